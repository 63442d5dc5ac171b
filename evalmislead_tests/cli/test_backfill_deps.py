"""A backfill of a partition whose input partition is not materialized.

A UI backfill of `model_spec|on` without `model_specs|on` failed and the daemon retried the same failure
twice. Now `evalmislead backfill` names the missing input partitions in one line and launches nothing,
and the daemon retries only runs that failed outside their steps (dagster.yaml run_retries).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from evalmislead_assets.cli.backfill_deps import missing_parents, parent_partition
from evalmislead_tests.dagster_services import dagster_services
from evalmislead_tests.fake_llm_server import FakeLLMServer

MODES = ["off", "on"]
GRID = {"condition": ["buggy_code", "model_spec"], "thinking": MODES}


class FakeClient:
    """The webserver's answers for test_generations (reads model_specs and problems) and model_specs."""

    def __init__(self, materialized: list[str]) -> None:
        self.materialized = materialized

    def query(self, document: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        variables = variables or {}
        if "assetNodes" in document:
            nodes = {
                "test_generations": {"dependencyKeys": [{"path": ["model_specs"]}, {"path": ["problems"]}],
                                     "isPartitioned": True,
                                     "partitionKeysByDimension": [
                                         {"name": "thinking", "partitionKeys": MODES},
                                         {"name": "condition", "partitionKeys": ["buggy_code", "model_spec"]}]},
                # a one-dimension asset's dimension is called 'default' by the webserver
                "model_specs": {"dependencyKeys": [{"path": ["problems"]}], "isPartitioned": True,
                                "partitionKeysByDimension": [{"name": "default", "partitionKeys": MODES}]},
                "problems": {"dependencyKeys": [], "isPartitioned": False, "partitionKeysByDimension": []},
            }
            return {"assetNodes": [{"assetKey": {"path": k["path"]}, **nodes[k["path"][-1]]}
                                   for k in variables["keys"]]}
        asked = variables["partitions"]
        return {"assetOrError": {"__typename": "Asset", "assetMaterializations": [
            {"partition": p} for p in asked if p in self.materialized]}}


def test_the_partition_read_from_a_parent() -> None:
    assert parent_partition(GRID, "model_spec|on", {"default": MODES}) == "on"
    assert parent_partition(GRID, "model_spec|on", GRID) == "model_spec|on"
    assert parent_partition(GRID, "model_spec|on", {}) is None  # unpartitioned: built once, not checked
    assert parent_partition({"default": MODES}, "on", {"default": ["x"]}) is None


def test_only_model_spec_reads_the_specs_and_a_partition_in_the_backfill_is_not_missing() -> None:
    keys = ["buggy_code|on", "model_spec|on"]
    assert missing_parents(FakeClient([]), {"test_generations": keys}) == [
        ("model_specs", "on", "test_generations", "model_spec|on")]
    assert missing_parents(FakeClient(["on"]), {"test_generations": keys}) == []
    assert missing_parents(FakeClient([]), {"test_generations": keys, "model_specs": ["on"]}) == []
    assert missing_parents(FakeClient([]), {"test_generations": ["buggy_code|on"]}) == []


def _wait_for(predicate, what: str, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(1.0)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_daemon_does_not_retry_a_step_that_fails_the_same_way(tmp_path: Path, seeded_warehouse) -> None:
    """A backfill launched as the UI does (GraphQL), of test_generations [model_spec|off] without model_specs
    [off]: its run fails in one line naming the missing partition, and the daemon does not retry it."""
    with FakeLLMServer() as fake:
        env = {"EVALMISLEAD_DB": str(seeded_warehouse.path), "EVALMISLEAD_HOME": str(tmp_path / "data"),
               "EVALMISLEAD_PROBLEMS": "30", "EVALMISLEAD_LLM_URL": fake.url}
        with dagster_services(tmp_path / "svc", env, timeout_s=600) as svc, svc.client() as client:
            backfill_id = client.launch_backfill_by_assets({"test_generations": ["model_spec|off"]}, title="no specs")
            with DagsterInstance.from_config(str(svc.home)) as instance:
                def failed_run():
                    runs = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.FAILURE]))
                    return next(iter(runs), None)

                run = _wait_for(failed_run, f"the backfill's run to fail\n{svc.logs()}", timeout=900)
                messages = [r.dagster_event.message or "" for r in instance.all_logs(run.run_id)
                            if r.dagster_event and r.dagster_event.is_step_failure]
                assert messages and all("Execution of step" in m for m in messages), messages
                errors = [str(r.dagster_event.event_specific_data.error.message) for r in instance.all_logs(run.run_id)
                          if r.dagster_event and r.dagster_event.is_step_failure]
                assert any("model_specs partition 'off' has no spec for Python/30" in e for e in errors), errors
                _wait_for(lambda: instance.get_run_by_id(run.run_id).tags.get("dagster/will_retry"),
                          "the retry decision", timeout=120)
                assert instance.get_run_by_id(run.run_id).tags["dagster/will_retry"] == "false"
                _wait_for(lambda: client.backfill(backfill_id).finished, f"the backfill to end\n{svc.logs()}",
                          timeout=300)
                time.sleep(45)  # the daemon's retry loop runs every few seconds; give it several turns
                assert [r.run_id for r in instance.get_runs()] == [run.run_id]  # no retry run
        assert fake.chat_requests == 0  # failed before any request
