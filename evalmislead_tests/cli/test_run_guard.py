"""One `evalmislead run` per data folder, with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalmislead_assets.cli import run_guard

PROJECT_ROOT = Path(__file__).resolve().parents[2]

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from evalmislead_assets.cli import run_guard
    run_guard.hold_data_folder(Path(sys.argv[1]))
    print("holding", flush=True)
    time.sleep(600)
""")


def _env(tmp_path: Path, db: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALMISLEAD_")}
    env.update({"EVALMISLEAD_HOME": str(tmp_path / "data"), "EVALMISLEAD_DB": str(db or tmp_path / "data" / "s.duckdb"),
                "DAGSTER_HOME": str(tmp_path / "dagster_home"), "PYTHONPATH": str(PROJECT_ROOT),
                "EVALMISLEAD_LLM_URL": "http://127.0.0.1:9"})  # discard port: a request would fail at once
    return env


def _holder(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, env["EVALMISLEAD_DB"]], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "holding", proc.stderr.read()
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_second_run_on_the_same_data_folder_refuses_naming_the_first_pid(tmp_path: Path) -> None:
    env = _env(tmp_path)
    first = _holder(tmp_path, env)
    try:
        second = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run"], env=env,
                                capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stderr[-2000:]
        assert second.stderr.strip().count("\n") == 0
        assert f"pid {first.pid} " in second.stderr and "another evalmislead run" in second.stderr
        assert not (tmp_path / "dagster_home").exists()  # stopped before anything started
    finally:
        _stop(first)


def test_a_db_outside_the_data_folder_is_locked_too(tmp_path: Path) -> None:
    db = tmp_path / "elsewhere" / "s.duckdb"
    first = _holder(tmp_path, _env(tmp_path, db))
    try:
        other_home = _env(tmp_path, db) | {"EVALMISLEAD_HOME": str(tmp_path / "other-data")}
        second = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run"], env=other_home,
                                capture_output=True, text=True, timeout=300)
        assert second.returncode == 2 and f"pid {first.pid} " in second.stderr, second.stderr[-2000:]
    finally:
        _stop(first)


def test_the_same_db_named_from_another_data_folder_is_refused(tmp_path: Path) -> None:
    """The DuckDB file lies in the first run's data folder; the second run has its own EVALMISLEAD_HOME."""
    env = _env(tmp_path)  # data folder tmp/data, DB tmp/data/s.duckdb
    first = _holder(tmp_path, env)
    try:
        other_home = env | {"EVALMISLEAD_HOME": str(tmp_path / "other-data")}
        second = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run"], env=other_home,
                                capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stderr[-2000:]
        assert second.stderr.strip().count("\n") == 0
        assert f"pid {first.pid} " in second.stderr and "s.duckdb.run.lock" in second.stderr
        assert not (tmp_path / "other-data" / run_guard.LOCK_NAME).exists()  # all or none: nothing left held
    finally:
        _stop(first)


def test_the_refusal_names_the_holders_command(tmp_path: Path) -> None:
    env = _env(tmp_path)
    holder = HOLDER.replace("run_guard.hold_data_folder(Path(sys.argv[1]))",
                            "run_guard.hold_data_folder(Path(sys.argv[1]), 'evalmislead run --problems 30')")
    first = subprocess.Popen([sys.executable, "-c", holder, env["EVALMISLEAD_DB"]], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "holding"
        second = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run"], env=env,
                                capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"pid {first.pid} on " in second.stderr and "(evalmislead run --problems 30), started 20" in second.stderr
    finally:
        _stop(first)


def test_lock_of_a_killed_run_is_taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path)
    first = _holder(tmp_path, env)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    lock = tmp_path / "data" / run_guard.LOCK_NAME
    assert lock.read_text().split()[0] == str(first.pid)  # the dead run's file is still there
    second = _holder(tmp_path, env)  # and a new run takes it over
    try:
        assert lock.read_text().split()[0] == str(second.pid)
    finally:
        _stop(second)


def test_lock_is_free_again_after_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "data"))
    db = tmp_path / "data" / "s.duckdb"
    assert run_guard.hold_data_folder(db) == [tmp_path / "data" / "s.duckdb.run.lock", tmp_path / "data" / run_guard.LOCK_NAME]
    assert run_guard.hold_data_folder(db) == []  # held already by this process: nothing taken again
    try:
        probe = subprocess.run([sys.executable, "-c", HOLDER.replace("time.sleep(600)", ""), str(db)],
                               env=_env(tmp_path), capture_output=True, text=True, timeout=120)
        assert probe.returncode != 0 and f"pid {os.getpid()} " in probe.stderr
    finally:
        run_guard.release_all()
    probe = subprocess.run([sys.executable, "-c", HOLDER.replace("time.sleep(600)", ""), str(db)],
                           env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_real_runs_on_one_data_folder(tmp_path: Path) -> None:
    """A real `evalmislead run` (its model server never answers) and a second one started beside it."""
    import socket
    import time

    from evalmislead_assets.sandbox.processes import signal_group

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)  # connections complete in the backlog, no request is ever answered
    env = _env(tmp_path) | {"EVALMISLEAD_LLM_URL": f"http://127.0.0.1:{hung.getsockname()[1]}",
                            "EVALMISLEAD_PROBLEMS": "30"}
    first = subprocess.Popen([sys.executable, "-m", "evalmislead_assets.cli", "run"], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lock = tmp_path / "data" / run_guard.LOCK_NAME
    try:
        deadline = time.monotonic() + 300
        while not (lock.exists() and lock.read_text().split()[:1] == [str(first.pid)]):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        second = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run"], env=env,
                                capture_output=True, text=True, timeout=300)
        assert first.poll() is None  # the first is still running
        assert second.returncode == 2 and f"pid {first.pid} " in second.stderr, second.stderr[-2000:]
    finally:
        signal_group(first)
        first.wait()
        hung.close()


def test_unwritable_data_folder_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "afile" / "data"))  # under a file: cannot be made
    with pytest.raises(run_guard.ConfigError) as exc:
        run_guard.hold_data_folder(tmp_path / "afile" / "data" / "s.duckdb")
    assert "cannot create the run lock" in str(exc.value) and "\n" not in str(exc.value)
