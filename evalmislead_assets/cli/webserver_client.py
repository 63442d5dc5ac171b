"""A small GraphQL client for a running dagster-webserver: launch and follow asset backfills, list runs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from evalmislead_assets import settings

DEFAULT_URL = settings.DEFAULT_WEBSERVER_URL

# Backfill statuses after which nothing more happens.
SUCCESS_STATUSES = frozenset({"COMPLETED", "COMPLETED_SUCCESS"})
TERMINAL_STATUSES = SUCCESS_STATUSES | {"COMPLETED_FAILED", "FAILED", "CANCELED"}
TERMINAL_RUN_STATUSES = frozenset({"SUCCESS", "FAILURE", "CANCELED"})


class WebserverError(RuntimeError):
    """The webserver could not be reached, or answered with an error."""


class WebserverUnreachable(WebserverError):
    """No answer (connection refused, timeout, HTTP error status): worth retrying."""


_LAUNCH = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on PartitionKeysNotFoundError { message partitionKeys }
    ... on UnauthorizedError { message }
    ... on InvalidSubsetError { message }
    ... on InvalidStepError { invalidStepKey }
    ... on InvalidOutputError { invalidOutputName }
    ... on RunConflict { message }
    ... on ConflictingExecutionParamsError { message }
    ... on PartitionSetNotFoundError { message }
    ... on PresetNotFoundError { message }
    ... on NoModeProvidedError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""

_BACKFILL = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill {
      id status numPartitions timestamp endTimestamp
      error { message }
      assetBackfillData {
        assetBackfillStatuses {
          __typename
          ... on AssetPartitionsStatusCounts {
            assetKey { path } numPartitionsTargeted numPartitionsInProgress
            numPartitionsMaterialized numPartitionsFailed
          }
          ... on UnpartitionedAssetStatus {
            assetKey { path } inProgress materialized failed
          }
        }
      }
    }
    ... on BackfillNotFoundError { message }
    ... on PythonError { message }
  }
}
"""

_TARGETED = """
query Targeted($id: String!, $key: AssetKeyInput!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill { partitionsTargetedForAssetKey(assetKey: $key) { partitionKeys } }
  }
}
"""

_RUNS = """
query Runs($filter: RunsFilter, $limit: Int) {
  runsOrError(filter: $filter, limit: $limit) {
    __typename
    ... on Runs { results { runId jobName status startTime endTime tags { key value } } }
    ... on PythonError { message }
    ... on InvalidPipelineRunsFilterError { message }
  }
}
"""

_ASSET_PARTITIONS = """
query AssetPartitions($keys: [AssetKeyInput!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    isPartitioned
    partitionKeysByDimension { name partitionKeys }
  }
}
"""

_DAEMONS = """
query Daemons {
  instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } }
}
"""


@dataclass(frozen=True)
class AssetProgress:
    asset: str
    targeted: int
    in_progress: int
    materialized: int
    failed: int

    @property
    def done(self) -> int:
        return self.materialized + self.failed


@dataclass(frozen=True)
class BackfillState:
    id: str
    status: str
    assets: list[AssetProgress] = field(default_factory=list)
    error: str | None = None
    end_timestamp: float | None = None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def succeeded(self) -> bool:
        return self.status in SUCCESS_STATUSES and not any(a.failed for a in self.assets)

    def summary(self) -> str:
        parts = [
            f"{a.asset} {a.materialized}/{a.targeted}"
            + (f" ({a.in_progress} running)" if a.in_progress else "")
            + (f" ({a.failed} failed)" if a.failed else "")
            for a in self.assets
        ]
        return f"{self.status}: " + ", ".join(parts)


def _key_input(asset: str) -> dict[str, list[str]]:
    return {"path": asset.split("/")}


class WebserverClient:
    """GraphQL over httpx; pass ``http`` to reuse a client (e.g. an in-process app's test client)."""

    def __init__(self, url: str = DEFAULT_URL, timeout_s: float = 60.0, http: httpx.Client | None = None) -> None:
        self.url = url.rstrip("/")
        self._http = http or httpx.Client(timeout=timeout_s)
        self._endpoint = f"{self.url}/graphql"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> WebserverClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, document: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run one GraphQL document; raise WebserverError on transport or GraphQL errors."""
        try:
            resp = self._http.post(self._endpoint, json={"query": document, "variables": dict(variables or {})})
        except httpx.HTTPError as exc:
            raise WebserverUnreachable(f"no Dagster webserver answering at {self.url} ({type(exc).__name__})") from exc
        if resp.status_code != 200:
            raise WebserverUnreachable(f"{self._endpoint} answered HTTP {resp.status_code}: {resp.text[:300]}")
        body = resp.json()
        if body.get("errors"):
            raise WebserverError("GraphQL error: " + "; ".join(e.get("message", str(e)) for e in body["errors"]))
        return body["data"]

    def daemon_health(self) -> dict[str, bool]:
        """daemon type -> healthy, for the daemons this instance requires."""
        statuses = self.query(_DAEMONS)["instance"]["daemonHealth"]["allDaemonStatuses"]
        return {s["daemonType"]: bool(s["healthy"]) for s in statuses if s["required"]}

    def asset_keys(self) -> list[list[str]]:
        """Every asset key of the webserver's code locations, as paths."""
        nodes = self.query("{ assetNodes { assetKey { path } } }")["assetNodes"]
        return [list(n["assetKey"]["path"]) for n in nodes]

    def asset_dimensions(self, assets: Sequence[str]) -> dict[str, dict[str, list[str]] | None]:
        """asset -> {dimension: keys} (None when unpartitioned); unknown assets raise."""
        nodes = self.query(_ASSET_PARTITIONS, {"keys": [_key_input(a) for a in assets]})["assetNodes"]
        found = {"/".join(n["assetKey"]["path"]): n for n in nodes}
        missing = [a for a in assets if a not in found]
        if missing:
            raise WebserverError(f"the webserver's code location has no asset {', '.join(missing)}")
        return {
            a: (
                {d["name"]: list(d["partitionKeys"]) for d in found[a]["partitionKeysByDimension"]}
                if found[a]["isPartitioned"]
                else None
            )
            for a in assets
        }

    def _launch(self, params: dict[str, Any]) -> str:
        result = self.query(_LAUNCH, {"params": params})["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            detail = {k: v for k, v in result.items() if k != "__typename"}
            raise WebserverError(f"backfill not launched: {result['__typename']} {detail}")
        return result["backfillId"]

    def launch_asset_backfill(
        self, assets: Sequence[str], partition_names: Sequence[str], title: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """assetSelection + partitionNames: the named partitions of the selection's root assets and
        everything downstream of them inside the selection (roots must share one partitioning)."""
        params: dict[str, Any] = {
            "assetSelection": [_key_input(a) for a in assets],
            "partitionNames": list(partition_names),
            "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()],
        }
        if title:
            params["title"] = title
        return self._launch(params)

    def launch_backfill_by_assets(
        self, partitions: Mapping[str, Iterable[str] | None], title: str | None = None,
        tags: Mapping[str, str] | None = None, run_config: Mapping[str, Any] | None = None,
    ) -> str:
        """partitionsByAssets: exactly these partition keys per asset (None = unpartitioned asset).

        ``run_config`` applies to every run of the backfill (e.g. the executor, or op config)."""
        selectors = []
        for asset, keys in partitions.items():
            sel: dict[str, Any] = {"assetKey": _key_input(asset)}
            if keys is not None:
                sel["partitions"] = {"ranges": [{"start": k, "end": k} for k in keys]}
            selectors.append(sel)
        params: dict[str, Any] = {
            "partitionsByAssets": selectors,
            "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()],
        }
        if title:
            params["title"] = title
        if run_config:
            params["runConfigData"] = dict(run_config)
        return self._launch(params)

    def backfill(self, backfill_id: str) -> BackfillState:
        data = self.query(_BACKFILL, {"id": backfill_id})["partitionBackfillOrError"]
        if data["__typename"] != "PartitionBackfill":
            raise WebserverError(f"backfill {backfill_id}: {data.get('message', data['__typename'])}")
        assets = []
        for s in (data.get("assetBackfillData") or {}).get("assetBackfillStatuses", []):
            name = "/".join(s["assetKey"]["path"])
            if s["__typename"] == "AssetPartitionsStatusCounts":
                assets.append(AssetProgress(
                    name, s["numPartitionsTargeted"], s["numPartitionsInProgress"],
                    s["numPartitionsMaterialized"], s["numPartitionsFailed"],
                ))
            else:
                assets.append(AssetProgress(
                    name, 1, int(s["inProgress"]), int(s["materialized"]), int(s["failed"])
                ))
        return BackfillState(
            data["id"], data["status"], assets, (data.get("error") or {}).get("message"), data.get("endTimestamp")
        )

    def targeted_partitions(self, backfill_id: str, asset: str) -> list[str]:
        data = self.query(_TARGETED, {"id": backfill_id, "key": _key_input(asset)})["partitionBackfillOrError"]
        return list((data.get("partitionsTargetedForAssetKey") or {}).get("partitionKeys") or [])

    def wait_for_backfill(
        self, backfill_id: str, poll_s: float = 5.0, timeout_s: float | None = None,
        on_change: Callable[[BackfillState], None] | None = None, outage_s: float = 120.0,
    ) -> BackfillState:
        """Poll until the backfill reaches a terminal status; call on_change whenever its progress changes.

        The webserver may restart meanwhile (the backfill lives in the daemon and the instance):
        unanswered polls are retried for ``outage_s`` before WebserverError is raised.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        last = None
        failing_since: float | None = None
        while True:
            try:
                state = self.backfill(backfill_id)
                failing_since = None
            except WebserverUnreachable:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > outage_s:
                    raise
                time.sleep(poll_s)
                continue
            if on_change and state.summary() != last:
                on_change(state)
                last = state.summary()
            if state.finished:
                return state
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"backfill {backfill_id} still {state.status} after {timeout_s:.0f} s")
            time.sleep(poll_s)

    def runs(
        self, limit: int = 100, statuses: Sequence[str] | None = None, tags: Mapping[str, str] | None = None,
        job: str | None = None,
    ) -> list[dict[str, Any]]:
        """Recent runs, newest first: runId, jobName, status, startTime, endTime, tags (as a dict)."""
        flt: dict[str, Any] = {}
        if statuses:
            flt["statuses"] = list(statuses)
        if tags:
            flt["tags"] = [{"key": k, "value": v} for k, v in tags.items()]
        if job:
            flt["pipelineName"] = job
        data = self.query(_RUNS, {"filter": flt or None, "limit": limit})["runsOrError"]
        if data["__typename"] != "Runs":
            raise WebserverError(f"runs: {data.get('message', data['__typename'])}")
        return [{**r, "tags": {t["key"]: t["value"] for t in r["tags"]}} for r in data["results"]]

    def backfill_runs(self, backfill_id: str) -> list[dict[str, Any]]:
        return self.runs(limit=1000, tags={"dagster/backfill": backfill_id})
