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
def _celery_worker(env: dict[str, str], log: Path, queue: str, name: str = "") -> Iterator[subprocess.Popen[bytes]]:
    """One Celery worker of the project's app serving ``queue`` (comma-separated queues), one run at a time, logging
    to ``log``. No -O fair or --prefetch-multiplier: the app sets them (celery_settings.py)."""
    cmd = [sys.executable, "-m", "celery", "-A", "evalmislead_assets.celery_app", "worker", "-Q", queue,
           "--concurrency", "1", "-n", f"{name or _node_name(queue)}@%h",
           "--loglevel", "INFO", "--logfile", str(log)]
    with open(log.with_suffix(".out"), "wb") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for(lambda: log.exists() and " ready." in log.read_text(errors="replace") or proc.poll() is not None,
                  "the Celery worker", timeout_s=180)
        assert proc.poll() is None, log.with_suffix(".out").read_text(errors="replace")[-3000:]
        yield proc
    finally:
        if proc.poll() is None:
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
def _deploy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeLLMServer | None = None,
            poll_interval_s: int | None = None) -> Iterator[tuple[dict[str, str], Path]]:
    """PostgreSQL, Redis and a fake LLM server (``fake``, else a new one) on loopback, DAGSTER_HOME holding the
    profile (run monitoring every ``poll_interval_s`` where given); the study's environment (the head's and the
    workers') and DAGSTER_HOME."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    profile = PROFILE.read_text()
    if poll_interval_s is not None:
        assert "  poll_interval_seconds: 30\n" in profile
        profile = profile.replace("  poll_interval_seconds: 30\n", f"  poll_interval_seconds: {poll_interval_s}\n")
    (home / "dagster.yaml").write_text(profile)
    with _postgres("pw-" + os.urandom(6).hex()) as pg, _redis(tmp_path / "redis") as redis_url, \
            (contextlib.nullcontext(fake) if fake is not None else FakeLLMServer()) as fake:
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


@contextlib.contextmanager
def _daemon(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A dagster-daemon on the profile's DAGSTER_HOME (run monitoring, run retries), logging to ``log``."""
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "-w", str(ROOT / "workspace.yaml")],
                                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _rows(db: str) -> dict[str, object]:
    """What must not be duplicated or lost: every table's row count, the answers, tests and outcomes by key, the
    requests answered, and whether any cache key is stored twice. llm_calls logs every request sent, a request of a
    killed run included (its row stays 'sent'): its answered requests are compared, the others listed apart."""
    con = duckdb.connect(db, read_only=True)
    try:
        tables = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables "
                                            "WHERE table_schema = 'main' AND table_name <> 'llm_calls' ORDER BY 1"
                                            ).fetchall()]
        out: dict[str, object] = {f"count {t}": con.execute(f'SELECT count(*) FROM "{t}"').fetchone() for t in tables}
        out["llm_calls answered"] = con.execute("SELECT asset, condition, thinking, task_id, cache_key FROM llm_calls "
                                                "WHERE state = 'answered' ORDER BY ALL").fetchall()
        out["llm_calls not answered"] = con.execute("SELECT asset, state FROM llm_calls WHERE state <> 'answered' "
                                                    "ORDER BY ALL").fetchall()
        out["test_generations"] = con.execute("SELECT condition, thinking, task_id FROM test_generations ORDER BY ALL"
                                              ).fetchall()
        out["generated_tests"] = con.execute("SELECT condition, thinking, task_id FROM generated_tests ORDER BY ALL"
                                             ).fetchall()
        out["test_outcomes"] = con.execute("SELECT condition, thinking, task_id, outcome FROM test_outcomes "
                                           "ORDER BY ALL").fetchall()
        out["llm_cache keys stored twice"] = con.execute(
            "SELECT count(*) - count(DISTINCT cache_key) FROM llm_cache").fetchone()
    finally:
        con.close()
    return out


def _wait_for_status(instance, run_id: str, statuses, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status in statuses:
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} is {instance.get_run_by_id(run_id).status}, not one of {statuses}, "
                         f"after {timeout_s:.0f} s")


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 900)
def test_a_worker_killed_mid_run_fails_its_run_the_daemon_retries_it_and_no_row_is_duplicated_or_lost(
        tmp_path, monkeypatch) -> None:
    """The study on the workers with the worker that runs a chain run killed (SIGKILL, main and pool process, as
    when its host dies) gives the same rows as the study run on one machine without an interruption."""
    from celery import Celery
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

    from evalmislead_assets.celery_launcher import CELERY_WORKER_TAG
    from evalmislead_assets.cli.instance_runs import first_failure

    # the reference: the same study with the single-machine default, in its own folder, beside the deploy
    ref = tmp_path / "reference"
    (ref / "dagster_home").mkdir(parents=True)
    shutil.copy(ROOT / "dagster.yaml", ref / "dagster_home" / "dagster.yaml")
    args = ["--conditions", "buggy_code", "--no-mutation"]
    with FakeLLMServer() as ref_fake, FakeLLMServer() as fake:
        ref_env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")} | {
            "DAGSTER_HOME": str(ref / "dagster_home"), "EVALMISLEAD_DB": str(ref / "study.duckdb"),
            "EVALMISLEAD_HOME": str(ref / "data"), "EVALMISLEAD_PROBLEMS": "30", "EVALMISLEAD_PROBE_N": "1",
            "EVALMISLEAD_LLM_URL": ref_fake.url}
        reference = subprocess.Popen([sys.executable, "-m", "evalmislead_assets.cli", "run", *args], env=ref_env,
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            with _deploy(tmp_path, monkeypatch, fake=fake, poll_interval_s=2) as (env, home), \
                    _daemon(env, tmp_path / "daemon.log"), \
                    _celery_worker(env, tmp_path / "celery-a.log", "cpu,gpu", "evalmislead-test-a") as worker, \
                    DagsterInstance.from_config(str(home)) as instance:
                node = f"evalmislead-test-a@{socket.gethostname()}"
                # the app's settings hold although the worker was started without -O fair or --prefetch-multiplier
                stats = Celery(broker=env["DAGSTER_CELERY_BROKER_URL"]).control.inspect(
                    destination=[node], timeout=10).stats()
                assert stats and stats[node]["pool"]["writes"]["strategy"] == "fair", stats
                assert stats[node]["prefetch_count"] == 1, stats[node]

                fake.gate.clear()  # the first answer waits: the run that asked for it is mid-run
                head = subprocess.Popen([sys.executable, "-m", "evalmislead_assets.cli", "run", *args], env=env,
                                        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                assert fake.wait_for_requests(1, timeout_s=600, in_flight=True), "no generation request came"
                (killed,) = instance.get_runs(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED]))
                pool_pid = int(killed.tags["evalmislead/run_worker"].split(":")[1])
                (killed_asset,) = {k.path[-1] for k in killed.asset_selection or ()} & {"model_specs", "test_generations"}
                assert killed.tags[CELERY_WORKER_TAG] == node and _parent(pool_pid) == worker.pid
                os.kill(pool_pid, 9)
                os.kill(worker.pid, 9)
                worker.wait(timeout=30)

                # run monitoring: the worker answers no ping, the run is marked failed, and the head stops there
                failed = _wait_for_status(instance, killed.run_id, {DagsterRunStatus.FAILURE, DagsterRunStatus.SUCCESS},
                                          timeout_s=300)
                assert failed.status == DagsterRunStatus.FAILURE
                events = "\n".join(e.message or "" for e in instance.all_logs(killed.run_id))
                assert f"the Celery worker {node} that took the run answers no ping" in events, events[-2000:]
                head_out, _ = head.communicate(timeout=300)
                assert head.returncode != 0, head_out[-3000:]

                # a new worker, the server answers again: run retries re-execute the run there
                fake.gate.set()
                with _celery_worker(env, tmp_path / "celery-b.log", "cpu,gpu", "evalmislead-test-b"):
                    deadline = time.monotonic() + 600
                    retries: list = []
                    while not retries and time.monotonic() < deadline:
                        retries = [r for r in instance.get_runs()
                                   if r.tags.get("dagster/parent_run_id") == killed.run_id]
                        time.sleep(1)
                    assert retries, (tmp_path / "daemon.log").read_text(errors="replace")[-3000:]
                    retried = _wait_for_status(instance, retries[0].run_id, {DagsterRunStatus.SUCCESS,
                                               DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}, timeout_s=600)
                    assert retried.status == DagsterRunStatus.SUCCESS, first_failure(
                        [e for e in instance.all_logs(retried.run_id) if e.dagster_event is not None])
                    assert retried.tags[CELERY_WORKER_TAG] == f"evalmislead-test-b@{socket.gethostname()}"
                    # the rest of the study, on the new worker
                    again = _evalmislead_run(env, *args)
                    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
            ref_out, _ = reference.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            if reference.poll() is None:
                reference.kill()
                reference.wait(timeout=30)
    assert reference.returncode == 0, ref_out[-3000:]

    got, want = _rows(env["EVALMISLEAD_DB"]), _rows(ref_env["EVALMISLEAD_DB"])
    assert got["test_generations"] == [("buggy_code", "off", "Python/30")]
    assert got["llm_cache keys stored twice"] == (0,)
    # the request the killed run had sent stays recorded as sent; everything else is as without the interruption
    assert got.pop("llm_calls not answered") == [(killed_asset, "sent")]
    assert want.pop("llm_calls not answered") == []
    assert got == want
