"""The model a server serves, checked against the answers already stored under the same model name.

Every request body names a model (the study's model name, or the server's alias), and every stored row
is named after it. If the server behind a URL is restarted with another model file, the new answers
would be stored under the old name, and a comparison would pair one model's buggy_code with another's
fixed_code. So before a batch sends anything, the file each server serves (its
``/props`` ``model_path``, by file name, since the same model lives in different folders on different
machines; else ``model_alias``) is compared with the files behind the stored answers of that model name
(``llm_cache`` joined to ``server_props``); a difference is refused with one line. A server without
``/props`` (a hosted endpoint) names no file and is not checked.
"""

from __future__ import annotations

import json
from typing import Any

from evalmislead_assets.llm.types import ServedModelChanged
from evalmislead_assets.store.database import Warehouse


def served_file(props: dict[str, Any] | None) -> str | None:
    """The model a server says it serves: its model file's name, else its alias; None when it says nothing."""
    props = props or {}
    path = props.get("model_path")
    if isinstance(path, str) and path.strip():
        return path.replace("\\", "/").rsplit("/", 1)[-1]
    alias = props.get("model_alias")
    return alias if isinstance(alias, str) and alias.strip() else None


def stored_files(warehouse: Warehouse, body_model: str) -> dict[str, int]:
    """Model file -> answers stored under ``body_model`` that a server serving it gave."""
    df = warehouse.query_df(
        "SELECT p.props_json, count(*) AS n FROM llm_cache c JOIN server_props p USING (server_props_sha256) "
        "WHERE json_extract_string(c.request_json, '$.model') = ? GROUP BY p.props_json", [body_model])
    out: dict[str, int] = {}
    for props_json, n in zip(df["props_json"], df["n"]):
        try:
            name = served_file(json.loads(props_json) if props_json else None)
        except ValueError:
            name = None
        if name:
            out[name] = out.get(name, 0) + int(n)
    return out


def check_served_model(warehouse: Warehouse, body_model: str, servers: dict[str, dict[str, Any]], label: str) -> None:
    """Raise ServedModelChanged when a server (url -> its /props) serves another model file than the stored
    answers of ``body_model`` came from."""
    seen = stored_files(warehouse, body_model)
    if not seen:
        return
    for url, props in servers.items():
        now = served_file(props)
        if now and now not in seen:
            before = ", ".join(f"{name} ({n} answers)" for name, n in sorted(seen.items(), key=lambda x: -x[1]))
            raise ServedModelChanged(
                f"{label}: the server at {url} serves {now}, but the stored answers of model '{body_model}' came "
                f"from {before}; nothing was sent, so two models are never stored under one name: point "
                f"'{body_model}' at a server of {next(iter(seen))} (study.toml url), or give the new model its own "
                "name in study.toml")
