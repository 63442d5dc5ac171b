"""One writer per DuckDB file and data folder on every route, with real processes:
the locks of `data_lock`, a real `dagster asset materialize` waiting for them, and a real `evalmislead run`
beside a `dagster asset materialize` of the same partition against a fake server that counts requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evalmislead_tests.fake_llm_server import FakeLLMServer

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from evalmislead_assets import data_lock
    partition = None if sys.argv[2] == "ALL" else sys.argv[2]
    delegate = sys.argv[3] if len(sys.argv) > 3 else ""
    try:
        data_lock.hold_partition(Path(sys.argv[1]), partition, "holder " + sys.argv[2], delegate)
    except data_lock.LockHeld as exc:
        print("refused", exc, flush=True)
        sys.exit(3)
    if partition is None:
        data_lock.study_holder(Path(sys.argv[1]))  # as `evalmislead run` reads its own lock: it must keep it
    print("holding", flush=True)
    time.sleep(600)
""")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALMISLEAD_", "DAGSTER_"))}
    env.update({"EVALMISLEAD_HOME": str(tmp_path / "data"), "EVALMISLEAD_DB": str(tmp_path / "data" / "s.duckdb"),
                "DAGSTER_HOME": str(tmp_path / "dagster_home"), "PYTHONPATH": str(PROJECT_ROOT),
                "EVALMISLEAD_LLM_URL": "http://127.0.0.1:9"})
    return env


def _hold(env: dict[str, str], partition: str, delegated_by: str = "") -> subprocess.Popen[str]:
    """A process holding ``partition``'s locks ('ALL': the whole study, as `evalmislead run`), or refused (exit 3);
    ``delegated_by``: launched by the process that holds the DuckDB file's lock (``data_lock.study_holder``)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, env["EVALMISLEAD_DB"], partition,
                             *([delegated_by] if delegated_by else [])], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith(("holding", "refused")), proc.stderr.read() if proc.stderr else ""
    if line.startswith("refused"):
        proc.wait(timeout=60)
        proc.refusal = line  # type: ignore[attr-defined]
    return proc


def _stop(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_partitions_run_side_by_side_but_never_twice_nor_beside_a_whole_study_run(tmp_path: Path) -> None:
    env = _env(tmp_path)
    a = _hold(env, "buggy_code|off")
    b = _hold(env, "fixed_code|off")  # another partition: side by side
    same = _hold(env, "buggy_code|off")  # the same partition: refused, naming the holder
    study = _hold(env, "ALL")  # a whole-study run (evalmislead run) beside partition runs: refused
    try:
        assert a.poll() is None and b.poll() is None
        assert same.returncode == 3 and f"pid {a.pid} on " in same.refusal  # type: ignore[attr-defined]
        assert "(holder buggy_code|off)" in same.refusal and "partition buggy_code_off" in same.refusal  # type: ignore[attr-defined]
        assert study.returncode == 3 and "s.duckdb.run.lock" in study.refusal  # type: ignore[attr-defined]
    finally:
        _stop(a, b)
    whole = _hold(env, "ALL")  # free again once the partition runs ended
    try:
        late = _hold(env, "model_spec|off")  # and a partition run beside a whole-study run is refused
        assert whole.poll() is None and late.returncode == 3 and f"pid {whole.pid} on " in late.refusal  # type: ignore[attr-defined]
    finally:
        _stop(whole)


def test_runs_launched_by_the_study_run_work_under_its_lock_and_others_still_wait(tmp_path: Path) -> None:
    from evalmislead_assets import data_lock

    env = _env(tmp_path)
    study = _hold(env, "ALL")  # `evalmislead run`: the DuckDB file's lock, exclusively
    try:
        holder = data_lock.study_holder(Path(env["EVALMISLEAD_DB"]))
        assert holder.startswith(f"{study.pid} ")
        mine = _hold(env, "buggy_code|off", delegated_by=holder)  # a run it launched: its partition only
        twice = _hold(env, "buggy_code|off", delegated_by=holder)  # never two runs of one partition
        other = _hold(env, "fixed_code|off")  # a run it did not launch: refused while it holds the file
        forged = _hold(env, "model_spec|off", delegated_by=f"{os.getpid()} somewhere 2020-01-01T00:00:00Z")
        try:
            assert mine.poll() is None
            assert twice.returncode == 3 and f"pid {mine.pid} on " in twice.refusal  # type: ignore[attr-defined]
            assert other.returncode == 3 and "s.duckdb.run.lock" in other.refusal  # type: ignore[attr-defined]
            assert forged.returncode == 3 and "s.duckdb.run.lock" in forged.refusal  # type: ignore[attr-defined]
        finally:
            _stop(mine)
    finally:
        _stop(study)
    # the study run ended: its identity no longer lets a run past the DuckDB file's lock, which is simply free
    late = _hold(env, "buggy_code|off", delegated_by=holder)
    try:
        assert late.poll() is None
        whole = _hold(env, "ALL")  # it took the file's lock shared, like any partition run
        assert whole.returncode == 3
    finally:
        _stop(late)


def _wait_for_text(path: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        out = path.read_text(errors="replace") if path.exists() else ""
        if text in out:
            return out
        assert proc.poll() is None, f"ended (rc {proc.returncode}) before printing {text!r}:\n{out[-3000:]}"
        assert time.monotonic() < deadline, f"no {text!r} within {timeout_s} s:\n{out[-3000:]}"
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_dagster_asset_materialize_waits_for_a_running_study_naming_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    (tmp_path / "dagster_home").mkdir()
    holder = _hold(env, "ALL")  # what `evalmislead run` holds for its whole run
    log = tmp_path / "materialize.log"
    with open(log, "wb") as out:
        mat = subprocess.Popen([DAGSTER, "asset", "materialize", "-m", "evalmislead_assets.definitions",
                                "--select", "problems"], env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        text = _wait_for_text(log, "waiting for", mat, 600)
        assert f"held by pid {holder.pid} on " in text and "(holder ALL)" in text
        assert not (tmp_path / "data" / "s.duckdb").exists()  # nothing written while it waits
        _stop(holder)
        assert mat.wait(timeout=600) == 0, log.read_text()[-3000:]
        assert "the run locks are free after" in log.read_text()
    finally:
        _stop(holder, mat)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_evalmislead_run_beside_dagster_asset_materialize_sends_each_request_once(tmp_path: Path) -> None:
    """The issue's repro: `dagster asset materialize` of a partition beside a running `evalmislead run` sent
    every request of that partition twice. Now it waits for the run and reads the answers from the cache."""
    with FakeLLMServer() as server:
        env = _env(tmp_path) | {"EVALMISLEAD_LLM_URL": server.url, "EVALMISLEAD_PROBLEMS": "30",
                                "EVALMISLEAD_PROBE_N": "1"}
        server.gate.clear()  # the run's first request is held until the materialize is under way
        run_log, mat_log = tmp_path / "run.log", tmp_path / "materialize.log"
        with open(run_log, "wb") as out:
            run = subprocess.Popen([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions",
                                    "buggy_code"], env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
        mat: subprocess.Popen[bytes] | None = None
        try:
            assert server.wait_for_requests(1, timeout_s=900), run_log.read_text()[-3000:]
            with open(mat_log, "wb") as out:
                mat = subprocess.Popen([DAGSTER, "asset", "materialize", "-m", "evalmislead_assets.definitions",
                                        "--select", "test_generations", "--partition", "buggy_code|off"],
                                       env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
            text = _wait_for_text(mat_log, "waiting for", mat, 900)
            assert f"pid {run.pid} on " in text and "(evalmislead run --conditions buggy_code)" in text
            server.gate.set()
            assert run.wait(timeout=1800) == 0, run_log.read_text()[-4000:]
            assert mat.wait(timeout=900) == 0, mat_log.read_text()[-4000:]
        finally:
            server.gate.set()
            for proc in (run, mat):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
        bodies = [json.dumps(b, sort_keys=True) for b in server.bodies]
    # every cache key once; the one repeat is the determinism probe's re-send (EVALMISLEAD_PROBE_N=1, cache bypassed)
    repeated = {b: bodies.count(b) for b in set(bodies) if bodies.count(b) > 1}
    assert list(repeated.values()) == [2], (len(bodies), len(set(bodies)))
    assert "the run locks are free after" in mat_log.read_text()
