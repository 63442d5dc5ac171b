"""Before `evalmislead backfill` launches: every partition its assets read must be materialized or in it.

A backfill of ``test_generations [model_spec|on]`` without ``model_specs [on]`` used to start, fail in its
first step and be retried by the daemon with the same failure. Here the webserver is asked for each
target asset's parents and whether the partitions they would be read from hold a materialization; what
is neither materialized nor part of the backfill is named in one line, and nothing is launched.

The partition read from a parent: the child's own key when both share a partitioning (the chain), the
child's value of the parent's one dimension (``model_specs [on]`` for ``... [model_spec|on]``).
Unpartitioned parents (``problems``, ``problem_validation``, ``mutants``) are not checked: they are built
once for the whole study (`evalmislead run` or the UI) and read from DuckDB whatever Dagster recorded.
``model_specs`` is read only by the
``model_spec`` condition (assets/generation.py), so other conditions do not need it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from evalmislead_assets.errors import ConfigError

_NODES = """
query Deps($keys: [AssetKeyInput!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path } dependencyKeys { path } isPartitioned partitionKeysByDimension { name partitionKeys }
  }
}
"""
_MATERIALIZED = """
query Mats($key: AssetKeyInput!, $partitions: [String!]) {
  assetOrError(assetKey: $key) {
    __typename ... on Asset { assetMaterializations(partitions: $partitions) { partition } }
  }
}
"""
# parent -> the only condition that reads it (its input is declared for every condition)
READ_ONLY_BY = {"model_specs": "model_spec"}


class Client(Protocol):
    def query(self, document: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]: ...


def _nodes(client: Client, paths: list[list[str]]) -> dict[str, dict[str, Any]]:
    nodes = client.query(_NODES, {"keys": [{"path": p} for p in paths]})["assetNodes"]
    return {"/".join(n["assetKey"]["path"]): n for n in nodes}


def _dims(node: dict[str, Any]) -> dict[str, list[str]]:
    """{dimension: keys}, sorted by name (a one-dimension asset's dimension is called 'default')."""
    if not node["isPartitioned"]:
        return {}
    dims = sorted(node["partitionKeysByDimension"], key=lambda d: d["name"])
    return {d["name"]: list(d["partitionKeys"]) for d in dims}


def parent_partition(child_dims: Mapping[str, list[str]], child_key: str, parent_dims: Mapping[str, list[str]]
                     ) -> str | None:
    """The parent's partition ``child_key`` reads; None: an unpartitioned parent or no rule here."""
    if not parent_dims:
        return None
    if {n: sorted(k) for n, k in parent_dims.items()} == {n: sorted(k) for n, k in child_dims.items()}:
        return child_key
    if len(parent_dims) == 1 and len(child_dims) > 1:
        (keys,) = parent_dims.values()
        # the child's dimension with the same keys (model_specs' 'default' is the chain's 'thinking')
        names = [n for n, k in child_dims.items() if sorted(k) == sorted(keys)]
        if len(names) == 1:
            return child_key.split("|")[list(child_dims).index(names[0])]  # values joined by sorted dimension
    return None


def missing_parents(client: Client, partitions: Mapping[str, list[str]]) -> list[tuple[str, str, str, str]]:
    """(parent, its partition, child, child partition) for each partition read by the backfill that is neither
    materialized nor in ``partitions`` (asset -> keys, as launched)."""
    children = _nodes(client, [a.split("/") for a in partitions])
    parent_paths = {"/".join(d["path"]): d["path"] for n in children.values() for d in n["dependencyKeys"]}
    parents = _nodes(client, list(parent_paths.values())) if parent_paths else {}
    wanted: dict[tuple[str, str], tuple[str, str]] = {}  # (parent, partition) -> the first (child, key) reading it
    for child, keys in partitions.items():
        node = children.get(child)
        if node is None:
            continue
        cdims = _dims(node)
        for dep in node["dependencyKeys"]:
            parent = "/".join(dep["path"])
            if parent not in parents:
                continue
            pdims = _dims(parents[parent])
            for key in keys:
                only = READ_ONLY_BY.get(dep["path"][-1])
                if only and "condition" in cdims and key.split("|")[list(cdims).index("condition")] != only:
                    continue
                part = parent_partition(cdims, key, pdims)
                if part is None or part in partitions.get(parent, []):
                    continue
                wanted.setdefault((parent, part), (child, key))
    out = []
    by_parent: dict[str, list[str]] = {}
    for parent, part in wanted:
        by_parent.setdefault(parent, []).append(part)
    for parent, parts in by_parent.items():
        data = client.query(_MATERIALIZED, {"key": {"path": parent.split("/")}, "partitions": parts})["assetOrError"]
        mats = (data.get("assetMaterializations") or []) if data["__typename"] == "Asset" else []
        done = {m["partition"] for m in mats}
        for part in parts:
            if part not in done:
                out.append((parent, part, *wanted[(parent, part)]))
    return out


def refuse_missing(client: Client, partitions: Mapping[str, list[str]]) -> None:
    """ConfigError (one line) naming the partitions the backfill would read that nothing provides."""
    missing = missing_parents(client, partitions)
    if not missing:
        return
    shown = [f"{p} [{k}] (read by {c} [{ck}])" for p, k, c, ck in missing[:4]]
    more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
    assets = sorted({p for p, *_ in missing})
    raise ConfigError(
        f"nothing launched: the backfill reads partitions that are neither materialized nor in it: "
        f"{'; '.join(shown)}{more}; add {', '.join(assets)} to --assets or materialize them first")
