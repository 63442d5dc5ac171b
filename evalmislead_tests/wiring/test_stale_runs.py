"""A killed run does not block its partition for good.

A real Dagster run executed in its own process (as `evalmislead run` and `dagster asset materialize`
run them; the project's dagster.yaml) is SIGKILLed mid-step: it stays STARTED with its partition tag.
`fail_stale_runs` (what `evalmislead run` calls) and the daemon's run monitoring (through the
project's run launcher) see that its worker is gone and mark it failed; the last test does the
whole daemon path with a backfill run whose worker and code server are killed.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.storage.dagster_run import IN_PROGRESS_RUN_STATUSES
from dagster._daemon.monitoring.run_monitoring import monitor_started_run

from evalmislead_assets import run_worker
from evalmislead_assets.data_lock import DELEGATE_TAG
from evalmislead_assets.run_launcher import PARTITION_TAG, WorkerCheckingRunLauncher, fail_stale_runs
from evalmislead_assets.run_worker import WORKER_TAG, worker_state

PROJECT_ROOT = Path(__file__).resolve().parents[2]

HANGING_RUN = textwrap.dedent("""
    import time
    from dagster import DagsterInstance, StaticPartitionsDefinition, asset, materialize
    from evalmislead_assets.resources import WarehouseIOManager

    @asset(partitions_def=StaticPartitionsDefinition(["buggy_code|off"]))
    def test_generations() -> None:
        print("step running", flush=True)
        time.sleep(600)

    materialize([test_generations], partition_key="buggy_code|off", instance=DagsterInstance.get(),
                resources={"io_manager": WarehouseIOManager()})
""")


# ---------------------------------------------------------------- worker liveness (fast)


def test_this_process_is_alive_and_a_reaped_one_is_dead() -> None:
    assert worker_state(run_worker.this_worker())[0] == "alive"
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    host = socket.gethostname()
    state, why = worker_state(f"{host}:{proc.pid}:{run_worker.start_ticks(os.getpid())}")
    assert state == "dead" and str(proc.pid) in why


def test_a_zombie_and_a_reused_pid_count_as_dead() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    tag = f"{socket.gethostname()}:{proc.pid}:{run_worker.start_ticks(proc.pid)}"
    deadline = time.monotonic() + 60
    while run_worker._proc_stat(proc.pid)[0] != "Z":  # exited, not reaped yet
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert worker_state(tag)[0] == "dead"
    proc.wait()
    me = os.getpid()
    assert worker_state(f"{socket.gethostname()}:{me}:1")[0] == "dead"  # same pid, another start time


def test_other_hosts_and_missing_tags_are_left_alone() -> None:
    assert worker_state(f"elsewhere-{socket.gethostname()}:1:1")[0] == "unknown"
    assert worker_state(None)[0] == "unknown"
    assert worker_state("garbage")[0] == "unknown"


# ---------------------------------------------------------------- a real SIGKILLed run


def _wait_for(predicate, what: str, timeout: float = 240.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture()
def killed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes((PROJECT_ROOT / "dagster.yaml").read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALMISLEAD_")}
    env.update({"DAGSTER_HOME": str(home), "EVALMISLEAD_HOME": str(tmp_path / "data"),
                "EVALMISLEAD_DB": str(tmp_path / "data" / "study.duckdb"), "PYTHONPATH": str(PROJECT_ROOT)})
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    proc = subprocess.Popen([sys.executable, "-c", HANGING_RUN], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the step is running: resources (and the worker tag) are set up
            if "step running" in line:
                break
        else:
            raise AssertionError(f"the run never reached its step (rc {proc.wait()})")
        with DagsterInstance.from_config(str(home)) as instance:
            run = _wait_for(lambda: next(iter(instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))), None),
                            "a STARTED run")
            assert run.tags[WORKER_TAG].split(":")[1] == str(proc.pid)
            assert worker_state(run.tags[WORKER_TAG])[0] == "alive"
            assert fail_stale_runs(instance) == []  # a live run is left alone
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
            run = instance.get_run_by_id(run.run_id)
            assert run.status == DagsterRunStatus.STARTED  # what Dagster alone leaves behind
            yield instance, run
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _partition_busy(instance: DagsterInstance, key: str) -> bool:
    """What the queue's one-run-per-partition limit counts: in-progress runs with the partition's tag."""
    return bool(instance.get_runs(RunsFilter(statuses=IN_PROGRESS_RUN_STATUSES, tags={PARTITION_TAG: key})))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_killed_run_is_marked_failed_by_the_cli_check(killed_run) -> None:
    instance, run = killed_run
    assert _partition_busy(instance, "buggy_code|off")
    stale = fail_stale_runs(instance)
    assert [s.run_id for s in stale] == [run.run_id]
    assert stale[0].partition == "buggy_code|off" and "is gone" in stale[0].line()
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.FAILURE
    assert not _partition_busy(instance, "buggy_code|off")
    assert fail_stale_runs(instance) == []  # once only


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_killed_run_is_marked_failed_by_dagster_run_monitoring(killed_run) -> None:
    """The daemon's own STARTED-run check, with the launcher dagster.yaml configures."""
    instance, run = killed_run
    assert isinstance(instance.run_launcher, WorkerCheckingRunLauncher)
    record = instance.get_run_record_by_id(run.run_id)
    monitor_started_run(instance, None, record, logging.getLogger("test"))  # workspace: used only to resume
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.FAILURE
    assert not _partition_busy(instance, "buggy_code|off")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_daemon_marks_a_run_failed_whose_worker_and_code_server_were_killed(tmp_path: Path, seeded_warehouse) -> None:
    """The daemon path: a backfill run hangs on a server that never answers; its worker and the code
    server that started it (which would otherwise report the crash) are SIGKILLed, as a machine
    crash or an OOM kill of the group does. Dagster alone leaves that run STARTED; the dagster-daemon's
    run monitoring, through the project's run launcher, marks it failed."""
    from evalmislead_tests.dagster_services import dagster_services

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)  # connections complete in the backlog; no request is ever answered
    env = {"EVALMISLEAD_DB": str(seeded_warehouse.path), "EVALMISLEAD_HOME": str(tmp_path / "data"),
           "EVALMISLEAD_PROBLEMS": "30", "EVALMISLEAD_LLM_URL": f"http://127.0.0.1:{hung.getsockname()[1]}"}
    try:
        with dagster_services(tmp_path / "svc", env) as svc, svc.client() as client:
            client.launch_backfill_by_assets({"model_specs": ["off"]}, title="stale-run test")
            with DagsterInstance.from_config(str(svc.home)) as instance:
                def tagged_run():
                    runs = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
                    return next((r for r in runs if WORKER_TAG in r.tags), None)

                run = _wait_for(tagged_run, f"a STARTED, tagged backfill run\n{svc.logs()}", timeout=400)
                pid = int(run.tags[WORKER_TAG].split(":")[1])
                assert worker_state(run.tags[WORKER_TAG])[0] == "alive"
                code_server = int(run_worker._proc_stat(pid)[1])  # the worker's parent
                os.kill(code_server, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
                _wait_for(lambda: instance.get_run_by_id(run.run_id).status == DagsterRunStatus.FAILURE,
                          f"run monitoring to fail run {run.run_id}\n{svc.logs()}", timeout=240)
                messages = [r.dagster_event.message or "" for r in instance.all_logs(run.run_id)
                            if r.dagster_event and r.dagster_event.is_run_failure]
                assert any("Detected run worker status" in m and "is gone" in m for m in messages), messages
                # the partition is free: nothing holds it but, at most, the daemon's retry of this very run
                busy = instance.get_runs(RunsFilter(statuses=IN_PROGRESS_RUN_STATUSES, tags={PARTITION_TAG: "off"}))
                assert all(r.parent_run_id == run.run_id for r in busy), busy
    finally:
        hung.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_next_evalmislead_run_frees_the_partition_of_a_killed_one(tmp_path: Path) -> None:
    """`evalmislead run` SIGKILLed with its process group (the code server and the run worker it launched) while
    its run is STARTED; the next `evalmislead run` marks it failed."""
    from evalmislead_assets.sandbox.processes import signal_group

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)
    home = tmp_path / "dagster_home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALMISLEAD_")}
    env.update({"DAGSTER_HOME": str(home), "EVALMISLEAD_HOME": str(tmp_path / "data"), "EVALMISLEAD_PROBLEMS": "30",
                "EVALMISLEAD_DB": str(tmp_path / "data" / "study.duckdb"), "PYTHONPATH": str(PROJECT_ROOT),
                "EVALMISLEAD_LLM_URL": f"http://127.0.0.1:{hung.getsockname()[1]}"})
    # The instance's SQLite storage is created here, before the run starts: a reader opening a fresh home
    # while the run's process creates the same tables left two alembic heads (seen in CI under load), and
    # every later open then failed.
    home.mkdir()
    (home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    subprocess.run([str(Path(sys.executable).parent / "dagster"), "instance", "migrate"], env=env, cwd=tmp_path,
                   check=True, capture_output=True, timeout=300)
    cmd = [sys.executable, "-m", "evalmislead_assets.cli", "run"]
    first = subprocess.Popen(cmd, env=env, cwd=tmp_path, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = None
    try:
        def started_run():
            # only once the run's own process has created the run storage (opening the instance
            # earlier would race it creating the same sqlite tables); a read mid-migration retries
            if not (home / "dagster.yaml").exists() or not (home / "history" / "runs.db").exists():
                return None
            try:
                with DagsterInstance.from_config(str(home)) as instance:
                    runs = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
            except Exception:  # sqlalchemy's OperationalError while the tables are made
                return None
            # launched by that `evalmislead run` (it names itself as the lock holder), its worker recorded
            return next((r for r in runs if r.tags.get(DELEGATE_TAG, "").split(" ")[:1] == [str(first.pid)]
                         and r.tags.get(WORKER_TAG)), None)

        run = _wait_for(started_run, "the first run's STARTED Dagster run", timeout=400)
        signal_group(first)
        first.wait()
        second = subprocess.Popen(cmd, env=env, cwd=tmp_path, start_new_session=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert second.stdout is not None
        seen = []
        for line in second.stdout:
            seen.append(line)
            if "marked failed" in line or "materializing" in line:
                break
        assert any(f"run {run.run_id}" in ln and "marked failed" in ln for ln in seen), "".join(seen)
        with DagsterInstance.from_config(str(home)) as instance:
            assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.FAILURE
    finally:
        for proc in (first, second):
            if proc is not None:
                signal_group(proc)
                proc.wait()
        hung.close()
