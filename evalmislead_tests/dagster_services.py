"""Real dagster-webserver + dagster-daemon on free ports with a fresh DAGSTER_HOME, for end-to-end tests.

The home is new for every use (daemon heartbeats persist in a reused one) and gets
the project's dagster.yaml; both services load the project's workspace.yaml. Each
service runs in its own session, so stopping kills its whole process group
(the code servers and run workers it started included).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evalmislead_assets.cli.webserver_client import WebserverClient, WebserverError
from evalmislead_assets.sandbox.processes import signal_group

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# what generation_chain_job selects for Python (jobs.py selects by partitions): the test data of the UI's route
CHAIN_ASSETS = ["test_generations", "generated_tests", "test_outcomes", "test_coverage"]
GENERATION_ASSETS = ["model_specs", *CHAIN_ASSETS]

_LOCATION_STATUS = """
{ workspaceOrError { __typename ... on Workspace { locationEntries {
    name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DagsterServices:
    home: Path
    url: str
    env: dict[str, str]
    log_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def client(self, timeout_s: float = 60.0) -> WebserverClient:
        return WebserverClient(self.url, timeout_s=timeout_s)

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{self.log_tail(n)}" for n in self.procs)

    def run_cli(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess:
        """Run `dagster <args>` against this instance (same env, project root as cwd)."""
        return subprocess.run(
            [str(BIN / "dagster"), *args], cwd=PROJECT_ROOT, env=self.env, capture_output=True, text=True,
            timeout=timeout_s,
        )

    def stop(self, grace_s: float = 20.0) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            # Kill what is left of the group (code servers, run workers) even if the leader exited.
            signal_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


def _start(name: str, cmd: list[str], env: Mapping[str, str], log_dir: Path) -> subprocess.Popen:
    log = open(log_dir / f"{name}.log", "wb")  # closed when the child exits
    try:
        return subprocess.Popen(
            cmd, cwd=PROJECT_ROOT, env=dict(env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    finally:
        log.close()


def _create_storage(env: Mapping[str, str], log_dir: Path) -> None:
    """Create the instance's SQLite storage before the services start: a webserver and a daemon
    started together on a fresh home both create it, and the loser of that race exits with
    "table alembic_version already exists" (seen once in CI)."""
    result = subprocess.run(
        [str(BIN / "dagster"), "instance", "migrate"], cwd=PROJECT_ROOT, env=dict(env),
        capture_output=True, text=True, timeout=300,
    )
    (log_dir / "instance_migrate.log").write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        raise RuntimeError(f"dagster instance migrate failed ({result.returncode}):\n{result.stderr[-2000:]}")


def _wait_ready(svc: DagsterServices, daemon: bool, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    client = svc.client(timeout_s=10)
    last = "webserver not answering"
    try:
        while time.monotonic() < deadline:
            for name, proc in svc.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}\n{svc.logs()}")
            try:
                entries = client.query(_LOCATION_STATUS)["workspaceOrError"]["locationEntries"]
                statuses = {e["name"]: e for e in entries}
                loaded = [e for e in entries if e["loadStatus"] == "LOADED"]
                errors = [e for e in loaded if e["locationOrLoadError"]["__typename"] == "PythonError"]
                if errors:
                    raise RuntimeError(f"code location failed to load: {errors[0]['locationOrLoadError']['message']}")
                if not entries or len(loaded) < len(entries):
                    last = f"code locations loading: {statuses}"
                elif daemon and not all(client.daemon_health().values()):
                    last = f"daemons not all healthy: {client.daemon_health()}"
                else:
                    return
            except WebserverError as exc:
                last = str(exc)
            time.sleep(1.0)
    finally:
        client.close()
    raise TimeoutError(f"dagster services not ready after {timeout_s:.0f} s ({last})\n{svc.logs()}")


@contextlib.contextmanager
def dagster_services(
    base: Path, env: Mapping[str, str] | None = None, daemon: bool = True, timeout_s: float = 240.0,
    dagster_yaml: Path = PROJECT_ROOT / "dagster.yaml", existing_home: bool = False,
) -> Iterator[DagsterServices]:
    """Start dagster-webserver (and dagster-daemon) with DAGSTER_HOME ``base``/dagster_home; stop them on exit.

    The home is created with a copy of ``dagster_yaml``, unless ``existing_home`` (one this test
    prepared, e.g. with seeded runs; never one a daemon used before). ``env`` is added to this
    process's environment (e.g. EVALMISLEAD_DB, EVALMISLEAD_LLM_URL).
    """
    home = base / "dagster_home"
    log_dir = base / "logs"
    if not existing_home:
        home.mkdir(parents=True)
        shutil.copyfile(dagster_yaml, home / "dagster.yaml")
    log_dir.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **(env or {}), "DAGSTER_HOME": str(home)}
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    port = free_port()
    svc = DagsterServices(home, f"http://127.0.0.1:{port}", full_env, log_dir)
    workspace = str(PROJECT_ROOT / "workspace.yaml")
    try:
        _create_storage(full_env, log_dir)
        svc.procs["webserver"] = _start(
            "webserver",
            [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port), "-w", workspace],
            full_env, log_dir,
        )
        if daemon:
            svc.procs["daemon"] = _start("daemon", [str(BIN / "dagster-daemon"), "run", "-w", workspace], full_env, log_dir)
        _wait_ready(svc, daemon, timeout_s)
        yield svc
    finally:
        svc.stop()


# --- A small real study behind real services, shared by the end-to-end test modules ---------

# One problem (task 30, get_positive), small output caps: every asset runs for real, quickly.
STUDY_ENV = {
    "EVALMISLEAD_PROBLEMS": "30",
    "EVALMISLEAD_MAX_TOKENS_OFF": "128",  # fits the grammar-shaped answers below
    "EVALMISLEAD_MAX_TOKENS_ON": "64",
}


# A GBNF grammar that makes the toy model answer with two real pytest tests (one passes on
# both versions, one fails on both), so that generated_tests and test_outcomes get rows.
TWO_TESTS_GRAMMAR = (
    r'root ::= "```python\nfrom solution import *\n\n\ndef test_passes():\n    assert True\n\n\n'
    r'def test_fails():\n    assert x_" [a-z]{1,8} " is None\n```\n"'  # a NameError, never a keyword
)


# For task 30 (get_positive, whose buggy body keeps the negative numbers): one misleading
# test (passes on the buggy version only) and one effective test (passes on the fixed one only).
GET_POSITIVE_GRAMMAR = (
    r'root ::= "```python\nfrom solution import get_positive\n\n\ndef test_m" [a-z]{0,6} "():\n'
    r'    assert get_positive([-1, 2]) == [-1]\n\n\ndef test_e" [a-z]{0,6} "():\n'
    r'    assert get_positive([-1, 2]) == [2]\n```\n"'
)


def grammar_run_config(grammar: str = TWO_TESTS_GRAMMAR) -> dict:
    return {"ops": {"test_generations": {"config": {"grammar": grammar}}}}


@contextlib.contextmanager
def patched_environ(env: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def materialize_thinking_mode(
    home: Path, env: Mapping[str, str], thinking: str, with_problems: bool = True,
    conditions: Sequence[str] | None = None, with_analysis: bool = True, grammar: str | None = TWO_TESTS_GRAMMAR,
) -> None:
    """Materialize, in this process, the study for one thinking mode into the instance at ``home``:
    problems and their validation, model_specs[thinking], the condition|thinking partitions of the
    generation chain (all conditions, or ``conditions``; answers shaped by ``grammar`` unless None),
    then the unpartitioned analysis assets."""
    from evalmislead_assets.definitions import defs
    from evalmislead_assets.partitions import partition_key
    from evalmislead_assets.study.conditions import CONDITION_NAMES

    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string(): k for k in graph.get_all_asset_keys()}
    roots = ["problems", "problem_validation"]
    analysis = sorted(
        name for name, k in keys.items()
        if graph.get(k).partitions_def is None and name not in roots and graph.get(k).is_executable
    )
    steps: list[tuple[list[str], str | None]] = []
    if with_problems:
        steps.append((roots, None))
    steps.append((["model_specs"], thinking))
    steps += [(CHAIN_ASSETS, str(partition_key(c, thinking))) for c in (CONDITION_NAMES if conditions is None else conditions)]
    if with_analysis:
        steps.append((analysis, None))
    materialize_steps(home, env, steps, grammar=grammar, tags={"evalmislead/seed": thinking})


def materialize_steps(
    home: Path, env: Mapping[str, str], steps: Sequence[tuple[Sequence[str], str | None]],
    grammar: str | None = None, tags: Mapping[str, str] | None = None,
) -> None:
    """Materialize, in this process, each (asset names, partition key or None) step in turn into the
    instance at ``home``, one Dagster run per step (answers shaped by ``grammar`` unless None)."""
    from dagster import DagsterInstance

    from evalmislead_assets.definitions import defs

    job = defs.resolve_implicit_global_asset_job_def()
    keys = {k.to_user_string(): k for k in defs.resolve_asset_graph().get_all_asset_keys()}
    with patched_environ({**env, "DAGSTER_HOME": str(home)}), DagsterInstance.from_config(str(home)) as instance:
        for names, partition in steps:
            run_config = grammar_run_config(grammar) if grammar and "test_generations" in names else None
            start = time.monotonic()
            job.execute_in_process(
                instance=instance, partition_key=partition, asset_selection=[keys[n] for n in names],
                run_config=run_config, tags=dict(tags or {}),
            )
            print(f"seeded {','.join(names)} [{partition or '-'}] in {time.monotonic() - start:.1f} s", flush=True)


@dataclass
class Study:
    services: DagsterServices
    db: Path
    env: dict[str, str]


_shared: dict[str, object] = {}


@contextlib.contextmanager
def shared_study(base: Path, llm_url: str) -> Iterator[Study]:
    """The thinking-off study for one problem, materialized, behind a running webserver and daemon.

    Test modules each wrap this in a session-scoped fixture; the first use builds it, later
    uses share it, and the last to finish stops the services.
    """
    if "study" not in _shared:
        db = base / "study.duckdb"
        env = {**STUDY_ENV, "EVALMISLEAD_DB": str(db), "EVALMISLEAD_HOME": str(base / "evalmislead_home"),
               "EVALMISLEAD_LLM_URL": llm_url}
        (base / "dagster_home").mkdir(parents=True)
        shutil.copyfile(PROJECT_ROOT / "dagster.yaml", base / "dagster_home" / "dagster.yaml")
        materialize_thinking_mode(base / "dagster_home", env, "off", grammar=GET_POSITIVE_GRAMMAR)
        stack = contextlib.ExitStack()
        services = stack.enter_context(dagster_services(base, env, existing_home=True))
        _shared.update(study=Study(services, db, env), stack=stack, users=0)
    _shared["users"] = int(_shared["users"]) + 1  # type: ignore[arg-type]
    try:
        yield _shared["study"]  # type: ignore[misc]
    finally:
        _shared["users"] = int(_shared["users"]) - 1  # type: ignore[arg-type]
        if _shared["users"] == 0:
            _shared.pop("stack").close()  # type: ignore[union-attr]
            _shared.clear()
