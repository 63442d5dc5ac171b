"""One writer per DuckDB file on the UI's route: a backfill launched through a real webserver's GraphQL (the daemon
runs it) while an `evalmislead run` works on the same DuckDB file, against a fake server that counts
requests. The backfill's runs wait for the run (the io_manager's set-up takes the DuckDB file's lock), then
read its answers from the cache: no cache key is requested twice, and both leave intact rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, RunsFilter

from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.dagster_services import CHAIN_ASSETS, dagster_services
from evalmislead_tests.fake_llm_server import FakeLLMServer

pytestmark = pytest.mark.slow

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = ["buggy_code|off", "fixed_code|off"]


def _waiting_lines(home: Path, backfill_id: str) -> list[str]:
    """The "waiting for <lock>" lines the backfill's runs have logged so far."""
    with DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs(RunsFilter(tags={"dagster/backfill": backfill_id}))
        return [e.user_message for run in runs for e in instance.all_logs(run.run_id)
                if "waiting for" in (e.user_message or "")]


@pytest.mark.timeout(2700)
def test_a_ui_backfill_beside_a_running_study_sends_each_request_once(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        settings = {"EVALMISLEAD_HOME": str(tmp_path / "data"), "EVALMISLEAD_DB": str(tmp_path / "data" / "s.duckdb"),
                    "EVALMISLEAD_LLM_URL": server.url, "EVALMISLEAD_PROBLEMS": "30", "EVALMISLEAD_PROBE_N": "1",
                    # the caps both routes use: `evalmislead run` would otherwise take its demo caps (768/1024)
                    # and the backfill the study's (4,096/16,384), other requests by design
                    "EVALMISLEAD_MAX_TOKENS_OFF": "768", "EVALMISLEAD_MAX_TOKENS_ON": "1024",
                    "PYTHONPATH": str(PROJECT_ROOT)}
        with dagster_services(tmp_path, settings) as services, services.client(timeout_s=120) as client:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALMISLEAD_", "DAGSTER_"))}
            env.update(settings, DAGSTER_HOME=str(services.home))
            server.gate.clear()  # the run's first request is held until the backfill waits beside it
            run_log = tmp_path / "run.log"
            with open(run_log, "wb") as out:
                run = subprocess.Popen([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions",
                                        "buggy_code,fixed_code"], env=env, cwd=tmp_path, stdout=out,
                                       stderr=subprocess.STDOUT)
            try:
                assert server.wait_for_requests(1, timeout_s=900), run_log.read_text()[-3000:]
                backfill = client.launch_asset_backfill(CHAIN_ASSETS, PARTITIONS, title="beside a running study")
                deadline = time.monotonic() + 900
                while not (waiting := _waiting_lines(services.home, backfill)):
                    assert run.poll() is None, run_log.read_text()[-3000:]
                    assert time.monotonic() < deadline, services.logs()
                    time.sleep(2.0)
                assert f"held by pid {run.pid} on " in waiting[0], waiting
                assert "(evalmislead run --conditions buggy_code,fixed_code)" in waiting[0], waiting
                server.gate.set()
                assert run.wait(timeout=1800) == 0, run_log.read_text()[-4000:]
                sent_by_run = server.chat_requests
                state = client.wait_for_backfill(backfill, poll_s=3.0, timeout_s=1200)
            finally:
                server.gate.set()
                if run.poll() is None:
                    run.kill()
                    run.wait()
            assert state.succeeded, f"{state.summary()}\n{services.logs()}"
        bodies = [json.dumps(b, sort_keys=True) for b in server.bodies]
        late = [{k: v for k, v in json.loads(b).items() if k != "messages"} for b in bodies[sent_by_run:]]
        assert server.chat_requests == sent_by_run, late  # the backfill sent nothing: it read the run's answers
    # every cache key once; the one repeat is the determinism probe's re-send (EVALMISLEAD_PROBE_N=1, cache bypassed)
    repeated = {b: bodies.count(b) for b in set(bodies) if bodies.count(b) > 1}
    assert list(repeated.values()) == [2], (len(bodies), len(set(bodies)))
    wh = Warehouse(tmp_path / "data" / "s.duckdb")
    rows = wh.query_df("SELECT condition, thinking, task_id, response_text FROM test_generations ORDER BY ALL")
    assert [f"{c}|{t}" for c, t in zip(rows["condition"], rows["thinking"])] == PARTITIONS
    assert rows["task_id"].tolist() == ["Python/30"] * 2 and rows["response_text"].notna().all()
    stored = wh.query_df("SELECT count(*) AS n FROM llm_cache")
    assert int(stored["n"][0]) == len(set(bodies))  # one cached answer per distinct request
