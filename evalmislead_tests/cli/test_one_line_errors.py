"""One true line, exit 2, through the real CLI: a truncated or damaged DuckDB file (it
keeps its header), a DAGSTER_HOME the Dagster instance cannot use, a nearly full TMPDIR."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalmislead_assets.store.database import Warehouse

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALMISLEAD_", "DAGSTER_"))}
    env.update({"EVALMISLEAD_HOME": str(tmp_path / "data"), "EVALMISLEAD_DB": str(tmp_path / "data" / "s.duckdb"),
                "DAGSTER_HOME": str(tmp_path / "dagster_home"), "PYTHONPATH": str(PROJECT_ROOT),
                "EVALMISLEAD_LLM_URL": "http://127.0.0.1:9", **extra})
    return env


def _cli(env: dict[str, str], *args: str, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), sys.executable, "-m", "evalmislead_assets.cli", *args], env=env,
                          capture_output=True, text=True, timeout=600)


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    err = proc.stderr.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err[-3000:]
    return err


def _damaged_db(tmp_path: Path, how: str) -> Path:
    db = tmp_path / "data" / "s.duckdb"
    wh = Warehouse(db)
    wh.ensure_schema()
    wh.execute("CREATE TABLE filler AS SELECT range AS i, repeat('x', 50) AS s FROM range(200000)")
    data = db.read_bytes()
    if how == "truncated":
        db.write_bytes(data[: len(data) // 2])
    else:  # a block overwritten after the headers: the checksum no longer matches
        db.write_bytes(data[:12288] + b"\xab" * (len(data) // 2) + data[12288 + len(data) // 2:])
    return db


@pytest.mark.parametrize("how", ["truncated", "damaged"])
def test_a_truncated_or_damaged_duckdb_file_is_one_line_in_sql_and_run(tmp_path: Path, how: str) -> None:
    db = _damaged_db(tmp_path, how)
    assert db.read_bytes()[8:12] == b"DUCK"  # it passes the header check
    env = _env(tmp_path)
    err = _one_line(_cli(env, "sql", "select count(*) from test_outcomes"))
    assert f"the DuckDB file {db} is truncated or damaged" in err and "restore it from a backup" in err
    err = _one_line(_cli(env, "run"))
    assert f"the DuckDB file {db} is truncated or damaged" in err and "re-run to resume" not in err
    assert not (tmp_path / "dagster_home").exists()  # stopped before any run



@pytest.mark.slow
def test_a_truncated_duckdb_file_fails_a_dagster_run_with_the_one_line_first(tmp_path: Path) -> None:
    """`dagster asset materialize` (a Dagster run, not `evalmislead run`): the run's failure is the one line
    itself, not "Error executing resource_fn on ResourceDefinition io_manager" with the line as its cause; the
    UI shows the RUN_FAILURE event's error, read back here from the run's events."""
    from dagster import DagsterEventType, DagsterInstance

    db = _damaged_db(tmp_path, "truncated")
    before = db.read_bytes()
    env = _env(tmp_path)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    proc = subprocess.run([str(Path(sys.executable).parent / "dagster"), "asset", "materialize", "-m",
                           "evalmislead_assets.definitions", "--select", "problems"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    line = (f"the DuckDB file {db} is truncated or damaged (IO Error: Could not read enough bytes")
    assert proc.returncode != 0 and "RUN_FAILURE" in out, out[-4000:]
    shown = [ln for ln in out.split("RUN_FAILURE", 1)[1].splitlines()[1:] if ln.strip()][0]  # the error's line
    assert shown.startswith(f"dagster._core.errors.DagsterResourceFunctionError: {line}"), out[-4000:]
    assert shown.endswith("restore it from a backup, or move it away and run again to start a new file (its "
                          "stored answers go with it)"), shown
    assert "Error executing resource_fn" not in out and "re-run to resume" not in out
    assert db.read_bytes() == before  # nothing written, nothing "repaired"
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        failures = [e.dagster_event for e in instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_FAILURE)]
    (failure,) = failures
    error = failure.job_failure_data.error
    assert error is not None and error.cause is None and error.context is None
    assert error.message.strip() == shown and "\n" not in error.message.strip()


@pytest.mark.slow
def test_a_dagster_home_too_long_for_sqlite_is_one_line_naming_it(tmp_path: Path) -> None:
    home = tmp_path.joinpath(*["d" * 60] * 10)  # ~640 characters: SQLite opens no file below it
    err = _one_line(_cli(_env(tmp_path, DAGSTER_HOME=str(home)), "run"))
    assert f"DAGSTER_HOME={home} cannot be used by Dagster" in err and "SQLite's limit is 512" in err
    assert "export DAGSTER_HOME=" in err
    assert not (tmp_path / "data" / "s.duckdb").exists()  # nothing written


def _small_tmpfs_prefix(size: str) -> list[str]:
    """A command prefix running the rest in a mount namespace whose TMPDIR is a fresh ``size`` tmpfs."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) here to mount a small tmpfs")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here ({probe.stderr.strip()[:200]})")
    return ["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs "$TMPDIR" && exec "$@"', "sh"]


def test_a_nearly_full_tmpdir_is_one_line_naming_the_folder(tmp_path: Path) -> None:
    small = tmp_path / "small-tmp"
    small.mkdir()
    prefix = _small_tmpfs_prefix("16m")  # under the 64 MiB a run needs
    err = _one_line(_cli(_env(tmp_path, TMPDIR=str(small)), "run", prefix=prefix))
    assert f"the temporary folder {small} (TMPDIR) has" in err and "point TMPDIR at a folder with room" in err


def test_the_sandbox_names_a_full_folder(tmp_path: Path) -> None:
    """When the folder fills during a run: the sandbox's own one line names it (no OSError traceback)."""
    small = tmp_path / "small-tmp"
    small.mkdir()
    prefix = _small_tmpfs_prefix("128k")
    script = ("from evalmislead_assets.sandbox.host import Sandbox, Limits, Module, SandboxUnavailable\n"
              "big = 'x = ' + repr('a' * 300000) + '\\ndef f():\\n    return 1\\n'\n"
              "try:\n    Sandbox(Limits(timeout_s=10), workers=1).collect([Module(big, 'def test_a():\\n    pass\\n')])\n"
              "except SandboxUnavailable as exc:\n    print(exc)\n")
    proc = subprocess.run([*prefix, sys.executable, "-c", script], env=_env(tmp_path, TMPDIR=str(small)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "No space left on device" in proc.stdout and f"the sandbox folder {small} has" in proc.stdout


def _read_only_prefix(folder: Path) -> list[str]:
    """A command prefix running the rest in a mount namespace where ``folder`` is bind-mounted read-only."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) here to mount a folder read-only")
    script = 'mount --bind "$RO" "$RO" && mount -o remount,ro,bind "$RO" "$RO" && exec "$@"'
    probe = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", "true"], env={**os.environ, "RO": str(folder)},
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot bind-mount read-only in a mount namespace here ({probe.stderr.strip()[:200]})")
    return ["unshare", "-m", "sh", "-c", script, "sh"]


def test_answers_import_into_a_read_only_data_folder_is_one_line_naming_it(tmp_path: Path) -> None:
    """The folder is on a read-only mount: one line naming the data folder, not a traceback blaming the dataset."""
    data = tmp_path / "data"
    data.mkdir()
    env = _env(tmp_path, RO=str(data))
    pack = PROJECT_ROOT / "evalmislead_assets" / "data" / "answers" / "qwen2.5-coder-1.5b-full"
    err = _one_line(_cli(env, "answers", "import", str(pack), prefix=_read_only_prefix(data)))
    assert str(data) in err and ("not writable" in err or "Read-only" in err), err
    assert "humanevalpack" not in err and not any(data.iterdir())


def test_a_write_refused_deep_inside_a_command_is_one_line_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """However an OSError that refuses a write is wrapped (here as a dataset error with its cause suppressed), the
    CLI prints one line naming the file it could not write."""
    import errno

    from evalmislead_assets.cli import export_cmd, main

    def refuse(_args: object) -> int:
        try:
            raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "hf-cache" / "x.lock"))
        except OSError as exc:
            raise RuntimeError(f"dataset file could not be parsed: {exc}") from None

    monkeypatch.setattr(export_cmd, "run", refuse)
    assert main(["export"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"cannot write {tmp_path / 'hf-cache' / 'x.lock'} (Read-only file system)" in err
