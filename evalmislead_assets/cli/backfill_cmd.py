"""`evalmislead backfill --thinking on`: backfill one thinking mode through the running Dagster webserver.

Launches an asset backfill over GraphQL (`launchPartitionBackfill` with exact
partitions per asset, so no partition of the other mode is touched), then follows
it to the end, printing a line whenever its progress changes. The dagster-daemon
must be running (`dagster dev` starts one) for the backfill to make progress.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import Counter
from collections.abc import Mapping

from evalmislead_assets import settings
from evalmislead_assets.cli import backfill_deps
from evalmislead_assets.cli.webserver_client import BackfillState, WebserverClient, WebserverError
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.study.conditions import THINKING_MODES
from evalmislead_assets.study.models import model_key

HELP = "backfill every partition of one thinking mode (e.g. --thinking on) through the running Dagster webserver"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thinking", required=True, choices=THINKING_MODES, help="the thinking mode to backfill")
    parser.add_argument("--assets", default="",
                        help="comma-separated assets partitioned by thinking (default: the Python assets of "
                             "model_specs_job and generation_chain_job, i.e. the specs and the chain)")
    parser.add_argument("--models", default="",
                        help="with several models in the study: comma-separated model names whose assets to backfill "
                             "(default: every model of the study file)")
    parser.add_argument("--url", default=settings.webserver_url(),
                        help=f"dagster-webserver URL (default: EVALMISLEAD_WEBSERVER_URL or {settings.DEFAULT_WEBSERVER_URL})")
    parser.add_argument("--poll", type=float, default=5.0, metavar="S", help="seconds between progress checks")
    parser.add_argument("--timeout", type=float, default=None, metavar="S", help="stop following after S seconds")
    parser.add_argument("--no-wait", action="store_true", help="launch and return without following")


def mode_partitions(dimensions: Mapping[str, Mapping[str, list[str]] | None], mode: str) -> dict[str, list[str]]:
    """asset -> every partition key whose thinking dimension is ``mode``.

    ``dimensions`` maps each asset to {dimension name: keys}, as the webserver reports
    them; multi-partition keys join dimension values sorted by dimension name with '|'.
    """
    out: dict[str, list[str]] = {}
    for asset, dims in dimensions.items():
        if not dims:
            raise ConfigError(f"asset {asset} is not partitioned; --assets takes thinking-partitioned assets")
        if len(dims) == 1:
            (values,) = dims.values()
            if mode not in values:
                raise ConfigError(f"asset {asset} has no partition {mode!r}; it is not partitioned by thinking")
            out[asset] = [mode]
            continue
        if "thinking" not in dims:
            raise ConfigError(f"asset {asset} has no thinking dimension (dimensions: {', '.join(dims)})")
        names = sorted(dims)
        choices = [[mode] if n == "thinking" else list(dims[n]) for n in names]
        out[asset] = ["|".join(combo) for combo in itertools.product(*choices)]
    return out


def model_assets(assets: list[str], models: str, keys: list[list[str]]) -> list[str]:
    """The webserver's asset keys (``keys``) for ``assets``: in a one-model study the names themselves;
    with several models each model's (``qwen2_5_coder_1_5b/test_generations``), only those of ``models``
    (comma-separated names) when given. A key given with its prefix stays as it is."""
    wanted = {model_key(m.strip()) for m in models.split(",") if m.strip()}
    out: list[str] = []
    for asset in assets:
        if "/" in asset:
            out.append(asset)
            continue
        matches = [k for k in keys if k[-1] == asset and (len(k) == 1 or not wanted or k[0] in wanted)]
        prefixed = [k for k in keys if k[-1] == asset and len(k) > 1]
        if wanted and not prefixed:
            raise ConfigError(f"--models: the study behind {asset} has one model (no per-model keys); drop --models")
        if not matches:
            found = sorted({k[0] for k in prefixed})
            raise ConfigError(f"no asset {asset} of model(s) {sorted(wanted)}; the webserver's models are {found}")
        out += ["/".join(k) for k in sorted(matches)]
    return out


def refuse_thinking(mode: str, models: str) -> None:
    """Before anything is launched: thinking-on work for a model of the data folder's study that cannot think is
    refused in one line, as `evalmislead run` refuses it (the study file's line or the bundled model's default)."""
    from evalmislead_assets import study_models

    study = study_models.check()  # read now: this process's environment, not a study cached earlier
    wanted = {m.strip() for m in models.split(",") if m.strip()}
    for model in study.models:
        if not wanted or model.name in wanted or model.key in wanted:
            model.refuse_thinking(mode, study.source)


def _title(mode: str, assets: list[str]) -> str:
    """The backfill's title (Dagster allows 100 characters): the mode and the assets, shortened to fit."""
    title = f"thinking={mode}: {', '.join(assets)}"
    return title if len(title) <= 100 else title[:97] + "..."


def _progress_line(state: BackfillState, started: float) -> str:
    return f"[{time.monotonic() - started:6.0f} s] {state.summary()}"


def default_assets() -> list[str]:
    """The names of the Python assets the two generation jobs select (jobs.py: by their partitions), in
    dependency order: what `evalmislead run` runs per partition."""
    from evalmislead_assets.dagster_metadata import LANGUAGE_METADATA
    from evalmislead_assets.definitions import defs
    from evalmislead_assets.study.models import DEFAULT_LANGUAGE

    graph = defs.resolve_asset_graph()
    selected = {k for job in ("model_specs_job", "generation_chain_job")
                for k in defs.resolve_job_def(job).asset_layer.executable_asset_keys}
    names: list[str] = []
    for key in graph.toposorted_asset_keys:
        language = graph.get(key).metadata.get(LANGUAGE_METADATA)
        if key in selected and getattr(language, "value", language) == DEFAULT_LANGUAGE and key.path[-1] not in names:
            names.append(key.path[-1])
    return names


def run(args: argparse.Namespace) -> int:
    assets = [a.strip() for a in args.assets.split(",") if a.strip()] or default_assets()
    if not assets:
        raise ConfigError("--assets is empty; name at least one asset, e.g. --assets test_generations")
    refuse_thinking(args.thinking, getattr(args, "models", ""))
    with WebserverClient(args.url) as client:
        try:
            client.query("{ version }")
        except WebserverError:
            raise ConfigError(
                f"no Dagster webserver answering at {args.url}; start one with "
                "`dagster dev -w workspace.yaml` (DAGSTER_HOME set) or pass --url"
            ) from None
        try:
            assets = model_assets(assets, getattr(args, "models", ""), client.asset_keys())
            partitions = mode_partitions(client.asset_dimensions(assets), args.thinking)
            # what its assets read must be materialized or in it: one line and nothing launched otherwise
            backfill_deps.refuse_missing(client, partitions)
        except WebserverError as exc:
            raise ConfigError(str(exc)) from None
        if not client.daemon_health().get("BACKFILL", False):
            print("evalmislead: warning: the dagster-daemon's backfill loop is not running; "
                  "the backfill waits until `dagster-daemon run` (or `dagster dev`) is started", file=sys.stderr)
        n = sum(len(v) for v in partitions.values())
        backfill_id = client.launch_backfill_by_assets(
            partitions, title=_title(args.thinking, assets),
            tags={"evalmislead/thinking": args.thinking},
        )
        print(f"launched backfill {backfill_id}: {n} asset partitions with thinking={args.thinking} "
              f"({', '.join(f'{a} x{len(k)}' for a, k in partitions.items())})")
        print(f"follow it in the UI: {client.url}/runs/b/{backfill_id}?tab=partitions", flush=True)
        if args.no_wait:
            return 0
        started = time.monotonic()
        try:
            state = client.wait_for_backfill(
                backfill_id, poll_s=args.poll, timeout_s=args.timeout,
                on_change=lambda s: print(_progress_line(s, started), flush=True),
            )
        except (TimeoutError, WebserverError) as exc:
            print(f"evalmislead: {exc}; backfill {backfill_id} keeps running in Dagster", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"evalmislead: stopped following; backfill {backfill_id} keeps running in Dagster", file=sys.stderr)
            return 130
        runs = client.backfill_runs(backfill_id)
        counts = Counter(r["status"] for r in runs)
        print(f"backfill {backfill_id} {state.status} after {time.monotonic() - started:.0f} s; runs: "
              + (", ".join(f"{c} {s.lower()}" for s, c in sorted(counts.items())) or "none"))
        for r in runs:
            if r["status"] != "SUCCESS":
                print(f"  run {r['runId']} {r['status']} partition {r['tags'].get('dagster/partition', '-')}: "
                      f"{client.url}/runs/{r['runId']}")
        if state.error:
            print(f"evalmislead: backfill error: {state.error.strip().splitlines()[0]}", file=sys.stderr)
        return 0 if state.succeeded else 1
