"""The deploy profile (deploy/dagster.postgres-celery.yaml) with real servers on loopback: `evalmislead run`'s runs
are stored in PostgreSQL and executed by Celery workers reached through Redis, each run on the queue of its host
class.

Every server starts and stops inside the test: PostgreSQL (initdb into a temporary folder, a loopback port, its
socket folder there too), redis-server (a free port, nothing saved) and two Celery workers of
evalmislead_assets.celery_app, one serving the `gpu` queue and one the default `cpu` queue. PostgreSQL refuses to
run as root, so as root its folder belongs to `nobody` and its programs run as that user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from evalmislead_tests.fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "deploy" / "dagster.postgres-celery.yaml"
QUEUE = "cpu"  # DAGSTER_CELERY_QUEUE: the runs whose assets name no host class
GPU_QUEUE = "gpu"  # the runs with a step that calls the model
# A bound on waiting for the study on a loaded 2-core machine, not a speed figure.
RUN_TIMEOUT_S = 1500


def _pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(check, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} did not come up within {timeout_s:.0f} s")


@contextlib.contextmanager
def _postgres(password: str) -> Iterator[dict[str, str]]:
    """A PostgreSQL server on a free loopback port with database `dagster`; its DAGSTER_PG_* settings."""
    pg_bin = _pg_bin()
    if pg_bin is None:
        pytest.skip("PostgreSQL is not installed (Debian package postgresql)")
    base = Path(tempfile.mkdtemp(prefix="evalmislead-pg-"))
    as_user: dict[str, object] = {}
    if os.getuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(base, nobody.pw_uid, nobody.pw_gid)
        as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    data, sockets, pwfile = base / "data", base / "sock", base / "pw"
    port = _free_port()
    started = False
    try:
        def as_pg(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True, cwd=base,
                                  **as_user, **kw)  # type: ignore[call-overload]

        as_pg(["sh", "-c", f"umask 077; mkdir {sockets}; printf %s '{password}' > {pwfile}"])
        as_pg([str(pg_bin / "initdb"), "-D", str(data), "-U", "evalmislead", "--auth=scram-sha-256",
               f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"])
        as_pg([str(pg_bin / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "120",
               "-o", f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off", "start"])
        started = True
        as_pg([str(pg_bin / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "evalmislead", "dagster"],
              env={**os.environ, "PGPASSWORD": password})
        yield {"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(port), "DAGSTER_PG_USERNAME": "evalmislead",
               "DAGSTER_PG_PASSWORD": password, "DAGSTER_PG_DB": "dagster"}
    finally:
        if started:
            subprocess.run([str(pg_bin / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True, timeout=120, cwd=base, **as_user)  # type: ignore[call-overload]
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def _redis(folder: Path) -> Iterator[str]:
    """A redis-server on a free loopback port that saves nothing; its URL."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    import redis

    folder.mkdir()
    port = _free_port()
    proc = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                             "--dir", str(folder), "--logfile", str(folder / "redis.log")])
    try:
        client = redis.Redis(host="127.0.0.1", port=port)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        _wait_for(answers, "redis-server")
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def _celery_worker(env: dict[str, str], log: Path, queue: str) -> Iterator[subprocess.Popen[bytes]]:
    """One Celery worker of the project's app serving ``queue``, one run at a time, logging to ``log``."""
    cmd = [sys.executable, "-m", "celery", "-A", "evalmislead_assets.celery_app", "worker", "-Q", queue,
           "-O", "fair", "--prefetch-multiplier", "1", "--concurrency", "1", "-n", f"{_node_name(queue)}@%h",
           "--loglevel", "INFO", "--logfile", str(log)]
    with open(log.with_suffix(".out"), "wb") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for(lambda: log.exists() and " ready." in log.read_text(errors="replace") or proc.poll() is not None,
                  "the Celery worker", timeout_s=180)
        assert proc.poll() is None, log.with_suffix(".out").read_text(errors="replace")[-3000:]
        yield proc
    finally:
        proc.terminate()  # warm shutdown: finishes a running task first (none is left here)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _node_name(queue: str) -> str:
    return f"evalmislead-test-{queue}"


def _parent(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2:].split()[1])


@contextlib.contextmanager
def _deploy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dict[str, str], Path]]:
    """PostgreSQL, Redis and a fake LLM server on loopback, DAGSTER_HOME holding the profile; the study's
    environment (the head's and the workers') and DAGSTER_HOME."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROFILE, home / "dagster.yaml")
    with _postgres("pw-" + os.urandom(6).hex()) as pg, _redis(tmp_path / "redis") as redis_url, \
            FakeLLMServer() as fake:
        env = dict(os.environ) | pg | {
            "DAGSTER_HOME": str(home),
            "DAGSTER_CELERY_BROKER_URL": f"{redis_url}/0",
            "DAGSTER_CELERY_BACKEND_URL": f"{redis_url}/1",
            "DAGSTER_CELERY_QUEUE": QUEUE,
            "EVALMISLEAD_DB": str(tmp_path / "study.duckdb"),
            "EVALMISLEAD_HOME": str(tmp_path / "data"),
            "EVALMISLEAD_PROBLEMS": "30",
            "EVALMISLEAD_PROBE_N": "1",
            "EVALMISLEAD_LLM_URL": fake.url,
        }
        for key, value in env.items():
            if key.startswith("DAGSTER_"):
                monkeypatch.setenv(key, value)  # DagsterInstance.from_config below resolves the profile's env vars
        yield env, home


def _evalmislead_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 600)
def test_evalmislead_run_stores_runs_in_postgres_and_runs_them_on_the_celery_worker_of_their_host_class(
        tmp_path, monkeypatch) -> None:
    from dagster import AssetKey, DagsterInstance, DagsterRunStatus
    from dagster_postgres import PostgresRunStorage

    from evalmislead_assets.dagster_metadata import HOST_CLASS_TAG
    from evalmislead_assets.definitions import defs

    logs = {q: tmp_path / f"celery-{q}.log" for q in (QUEUE, GPU_QUEUE)}
    with _deploy(tmp_path, monkeypatch) as (env, home), _celery_worker(env, logs[QUEUE], QUEUE) as cpu_worker, \
            _celery_worker(env, logs[GPU_QUEUE], GPU_QUEUE) as gpu_worker:
        proc = _evalmislead_run(env, "--conditions", "buggy_code")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:] + logs[QUEUE].read_text()[-3000:]
        assert "launched by DAGSTER_HOME's run launcher HostClassCeleryRunLauncher" in proc.stdout + proc.stderr

        with DagsterInstance.from_config(str(home)) as instance:
            assert isinstance(instance.run_storage, PostgresRunStorage)
            runs = instance.get_runs()
            # each run executed in a pool process, a child of the worker that serves its queue
            parents = {r.run_id: _parent(int(r.tags["evalmislead/run_worker"].split(":")[1])) for r in runs}
        worker_pids = {QUEUE: cpu_worker.pid, GPU_QUEUE: gpu_worker.pid}
        db = env["EVALMISLEAD_DB"]
    worker_logs = {q: log.read_text(errors="replace") for q, log in logs.items()}

    assert len(runs) >= 3 and all(r.status == DagsterRunStatus.SUCCESS for r in runs), \
        [(r.run_id, r.status) for r in runs]
    # a run with an asset that calls the model (test_generations, model_specs, the determinism probe) goes to gpu
    graph = defs.resolve_asset_graph()
    gpu_assets = {k for k in graph.materializable_asset_keys if graph.get(k).tags.get(HOST_CLASS_TAG) == "gpu"}
    assert AssetKey("test_generations") in gpu_assets
    queues = {r.run_id: GPU_QUEUE if gpu_assets & set(r.asset_selection or ()) else QUEUE for r in runs}
    assert set(queues.values()) == {QUEUE, GPU_QUEUE}, queues  # both kinds of run took place
    node = socket.gethostname()
    for run in runs:
        queue = queues[run.run_id]
        task_id = run.tags["dagster-celery/task_id"]
        assert run.tags.get("dagster-celery/queue", QUEUE) == queue, (run.asset_selection, run.tags)
        assert run.tags["evalmislead/celery_worker"] == f"{_node_name(queue)}@{node}"
        assert parents[run.run_id] == worker_pids[queue], (run.asset_selection, parents[run.run_id], worker_pids)
        assert f"Task execute_job[{task_id}] succeeded" in worker_logs[queue], (run.run_id, task_id)
    assert not (home / "history").exists()  # no SQLite run storage beside PostgreSQL

    # the rows of the chain's steps, written by the runs on the workers into the study's DuckDB file
    con = duckdb.connect(db, read_only=True)
    try:
        rows = {table: con.execute(f"SELECT condition, task_id FROM {table}").fetchall()
                for table in ("test_generations", "generated_tests")}
        rates = con.execute("SELECT condition, thinking FROM condition_rates").fetchall()
    finally:
        con.close()
    assert rows == {"test_generations": [("buggy_code", "Python/30")], "generated_tests": [("buggy_code", "Python/30")]}
    assert rates == [("buggy_code", "off")]
