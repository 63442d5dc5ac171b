"""execution/dask_pool.py: the sandbox's batches on a real Dask cluster (a `dask scheduler` and two `dask worker`
processes on 127.0.0.1, started and stopped here) give the rows the local pool gives, also when a worker is
killed mid-batch; the study file's [execution] table and its one-line errors."""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.execution.batch import build_test_outcomes
from evalmislead_assets.execution.dask_pool import DaskSandbox, close_clients, task_groups
from evalmislead_assets.sandbox.host import Sandbox
from evalmislead_assets.study.models import DEFAULT_ANSWERS_PER_TASK, StudyError, parse_execution, parse_study

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = list(range(10))
STATUS_COLUMNS = ["task_id", "problem_idx", "test_id", "buggy_status", "fixed_status", "outcome"]


# --------------------------------------------------------------------------- the setting


def test_the_execution_table_parses_and_names_a_bad_value() -> None:
    assert parse_execution(None, "s.toml").dask_scheduler == ""
    got = parse_execution({"dask_scheduler": "tcp://10.0.0.5:8786", "answers_per_task": 3}, "s.toml")
    assert (got.dask_scheduler, got.answers_per_task) == ("tcp://10.0.0.5:8786", 3)
    assert parse_execution({}, "s.toml").answers_per_task == DEFAULT_ANSWERS_PER_TASK
    with pytest.raises(StudyError, match=r"s.toml \[execution\]: dask_scheduler = 'http://x:1' must be"):
        parse_execution({"dask_scheduler": "http://x:1"}, "s.toml")
    with pytest.raises(StudyError, match=r"unknown key\(s\) \['scheduler'\]"):
        parse_execution({"scheduler": "tcp://x:1"}, "s.toml")
    with pytest.raises(StudyError, match="answers_per_task = 0"):
        parse_execution({"answers_per_task": 0}, "s.toml")
    model = '[[models]]\nname = "m"\nurls = ["http://127.0.0.1:1"]\n'
    assert parse_study(model + '[execution]\ndask_scheduler = "tcp://127.0.0.1:8786"\n', "s", []).names == ["m"]
    with pytest.raises(StudyError, match="dask_scheduler = 8786"):
        parse_study(model + "[execution]\ndask_scheduler = 8786\n", "s", [])


def test_without_the_setting_the_local_pool_runs_and_distributed_is_not_imported(tmp_path: Path) -> None:
    study = tmp_path / "study.toml"
    study.write_text('[[models]]\nname = "m"\nbundled = "qwen2.5-coder-0.5b"\n')
    code = ("import sys\nfrom evalmislead_assets.assets.sandbox_config import ExecutionConfig, make_sandbox\n"
            "from evalmislead_assets.resources import StudySettingsResource\n"
            "s = make_sandbox(ExecutionConfig(workers=1), StudySettingsResource(), fan_out=True)\n"
            "print(type(s).__module__, type(s).__name__, 'distributed' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "EVALMISLEAD_STUDY": str(study)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["evalmislead_assets.sandbox.host", "Sandbox", "False"]


def test_tasks_hold_whole_answer_files_and_every_worker_gets_a_share() -> None:
    files = ["a", "a", "b", "b", "c", "c", "d", "a"]  # one answer file's runs (both versions) share its source
    assert task_groups(files, per_task=2, n_workers=1) == [[0, 1, 7, 2, 3], [4, 5, 6]]
    assert task_groups(files, per_task=8, n_workers=2) == [[0, 1, 7, 2, 3], [4, 5, 6]]
    assert task_groups(files, per_task=8, n_workers=4) == [[0, 1, 7], [2, 3], [4, 5], [6]]
    assert task_groups([], per_task=8, n_workers=2) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_is_one_line_naming_the_setting(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("distributed", reason="pip install 'evalmislead[distributed]' (the test extra has it)")
    from evalmislead_assets.assets.sandbox_config import ExecutionConfig, make_sandbox
    from evalmislead_assets.resources import StudySettingsResource

    address = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    study = tmp_path / "study.toml"
    study.write_text(f'[[models]]\nname = "m"\nbundled = "qwen2.5-coder-0.5b"\n\n[execution]\n'
                     f'dask_scheduler = "{address}"\n')
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(study))
    settings.forget_study_text()
    try:
        sandbox = make_sandbox(ExecutionConfig(), StudySettingsResource(), fan_out=True)
        assert isinstance(sandbox, DaskSandbox) and sandbox.address == address
        sandbox.connect_timeout_s = 2.0
        with pytest.raises(ConfigError) as caught:
            build_test_outcomes(*_answers(PROBLEMS[:1]), sandbox)
    finally:
        settings.forget_study_text()
    message = str(caught.value)
    assert "\n" not in message and f"no Dask scheduler answers at {address}" in message
    assert f"[execution] dask_scheduler in the study file {study}" in message


# --------------------------------------------------------------------------- the answers


def _asserts(test_src: str, entry_point: str) -> list[str]:
    """The dataset's check() asserts that use only the function under test and literals, as test bodies."""
    check = next(n for n in ast.parse(test_src).body if isinstance(n, ast.FunctionDef) and n.name == "check")
    param, out = check.args.args[0].arg, []
    for stmt in check.body:
        names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        if isinstance(stmt, ast.Assert) and names <= {param, "True", "False", "None", "abs", "len", "sorted"}:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Name) and n.id == param:
                    n.id = entry_point
            out.append(ast.unparse(stmt))
    return out[:6]


def _answers(indices: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(generated_tests rows, problems indexed by task_id) for the problems ``indices``: one answer file each,
    the problem's own check() asserts as tests (one test function each), as a model would write them."""
    from evalmislead_assets.study.problems import DATA_FILE

    rows = [json.loads(line) for line in Path(DATA_FILE).read_text(encoding="utf-8").splitlines()]
    gen, probs = [], []
    for i in indices:
        r = rows[i]
        tests = _asserts(r["test"], r["entry_point"])
        source = f"from solution import {r['entry_point']}\n\n" + "".join(
            f"\ndef test_{k}():\n    {a}\n" for k, a in enumerate(tests))
        ids = [f"test_{k}" for k in range(len(tests))]
        gen.append({"task_id": r["task_id"], "problem_idx": i, "source": source, "test_ids": ids,
                    "n_tests": len(ids)})
        probs.append({"task_id": r["task_id"], "buggy_code": r["declaration"] + r["buggy_solution"],
                      "fixed_code": r["declaration"] + r["canonical_solution"]})
    return pd.DataFrame(gen), pd.DataFrame(probs).set_index("task_id")


# --------------------------------------------------------------------------- a real cluster


class Cluster:
    """A `dask scheduler` and worker processes on 127.0.0.1 (the venv's CLI), their scheduler file in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.file = folder / "scheduler.json"
        self.dask = str(Path(sys.executable).parent / "dask")
        # the workers' sandbox folders (one every user can enter, as the tests run as users of their own): a killed
        # worker leaves its own behind, and stop() removes them all
        self.tmp = tempfile.mkdtemp(prefix="evalmislead-dask-test-")
        os.chmod(self.tmp, 0o755)
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": self.tmp}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.address = ""

    def _start(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(self.folder / log, "wb") as out:
            proc = subprocess.Popen([self.dask, *args], stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                    cwd=self.folder)
        self.procs.append(proc)
        return proc

    def start(self, n_workers: int) -> Cluster:
        self._start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(self.file)], "scheduler.log")
        deadline = time.monotonic() + 120
        while not self.file.exists() or not self.file.read_text().strip():
            assert time.monotonic() < deadline and self.procs[0].poll() is None, self.log("scheduler.log")
            time.sleep(0.2)
        self.address = json.loads(self.file.read_text())["address"]
        for k in range(n_workers):
            # no nanny: the worker is this process, so killing it takes the worker away (nothing restarts it)
            self.workers[f"w{k}"] = self._start(
                ["worker", "--scheduler-file", str(self.file), "--nworkers", "1", "--nthreads", "1", "--no-nanny",
                 "--host", "127.0.0.1", "--no-dashboard", "--name", f"w{k}", "--local-directory",
                 str(self.folder / f"w{k}")], f"w{k}.log")
        from distributed import Client

        with Client(self.address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(n_workers, timeout=120)
        return self

    def log(self, name: str) -> str:
        path = self.folder / name
        return path.read_text(errors="replace")[-2000:] if path.exists() else f"no {name}"

    def stop(self) -> None:
        """The workers first (each closes its sandbox as it goes), then the scheduler."""
        close_clients()
        for group in (self.procs[1:], self.procs[:1]):
            for proc in group:
                if proc.poll() is None:
                    proc.terminate()
            for proc in group:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    pytest.importorskip("distributed", reason="pip install 'evalmislead[distributed]' (the test extra has it)")
    c = Cluster(tmp_path_factory.mktemp("dask"))
    try:
        yield c.start(2)
    finally:
        c.stop()


@pytest.fixture(scope="module")
def local_rows() -> pd.DataFrame:
    return build_test_outcomes(*_answers(PROBLEMS), Sandbox(workers=2))


def _statuses(df: pd.DataFrame) -> list[tuple]:
    return [tuple(r) for r in df[STATUS_COLUMNS].itertuples(index=False)]


@pytest.mark.slow
def test_the_cluster_gives_the_local_pools_rows(cluster: Cluster, local_rows: pd.DataFrame) -> None:
    assert len(local_rows) > 20 and set(local_rows["outcome"]) == {"effective", "both_pass"}
    sandbox = DaskSandbox(cluster.address, workers=1, answers_per_task=2, setting="the test's cluster")
    rows = build_test_outcomes(*_answers(PROBLEMS), sandbox)
    assert _statuses(rows) == _statuses(local_rows)
    assert rows["buggy_detail"].tolist() == local_rows["buggy_detail"].tolist()
    assert sandbox.tasks == len(PROBLEMS) // 2  # two answer files a task, never one run
    assert sandbox.isolation is not None  # the workers' isolation came back with their rows
    from distributed import Client

    with Client(cluster.address, timeout=30, set_as_default=False) as client:
        # (a lambda travels by value: naming a function of this module would import it, and pandas, there)
        loaded = client.run(lambda: sorted(m for m in ("dagster", "duckdb", "pandas") if m in sys.modules))
    assert set(map(tuple, loaded.values())) == {()}  # a worker runs the sandbox alone: no Dagster, no DuckDB
    # each worker started its zygote once and kept it for every later task, also for a head that connects anew
    # (where each run gets its own tmpfs, as on every host the project supports fully; else one a task)
    started = _zygotes_started(cluster)
    warm = sandbox.isolation.chain_namespaces
    assert sorted(started.values()) == [1, 1] if warm else sum(started.values()) == sandbox.tasks
    close_clients()
    again = build_test_outcomes(*_answers(PROBLEMS), DaskSandbox(cluster.address, workers=1, answers_per_task=2))
    assert _statuses(again) == _statuses(local_rows)
    if warm:
        assert _zygotes_started(cluster) == started


def _zygotes_started(cluster: Cluster) -> dict[str, int]:
    """Zygotes each worker's sandboxes have started so far."""
    from distributed import Client

    with Client(cluster.address, timeout=30, set_as_default=False) as client:
        return client.run(lambda: sum(s.started for s in sys.modules[
            "evalmislead_assets.execution.dask_worker"]._sandboxes.values()))


@pytest.mark.slow
def test_the_test_outcomes_asset_sends_its_runs_to_the_study_files_cluster(
        cluster: Cluster, local_rows: pd.DataFrame, seeded_warehouse, tmp_path: Path, monkeypatch) -> None:
    from dagster import DagsterInstance, materialize

    from evalmislead_assets.assets import execution
    from evalmislead_assets.partitions import partition_key
    from evalmislead_assets.resources import StudySettingsResource, WarehouseIOManager, WarehouseResource
    from evalmislead_tests.stored import with_stored

    generated, _ = _answers(PROBLEMS)
    seeded_warehouse.replace_rows("generated_tests", generated.assign(condition="buggy_code", thinking="off"),
                                  where={"condition": "buggy_code", "thinking": "off"})
    study = tmp_path / "study.toml"
    study.write_text(f'[[models]]\nname = "qwen2.5-coder-0.5b"\nbundled = "qwen2.5-coder-0.5b"\n\n[execution]\n'
                     f'dask_scheduler = "{cluster.address}"\nanswers_per_task = 3\n')
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(study))
    settings.forget_study_text()
    before = _tasks_done(cluster)
    try:
        result = materialize(with_stored([execution.test_outcomes]), partition_key=partition_key("buggy_code", "off"),
                             resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                                        "study_settings": StudySettingsResource()},
                             instance=DagsterInstance.ephemeral())
    finally:
        settings.forget_study_text()
    assert result.success
    stored = seeded_warehouse.read_table("test_outcomes")
    stored = stored.sort_values(["problem_idx"], kind="stable").reset_index(drop=True)
    assert _statuses(stored) == _statuses(local_rows)
    assert _tasks_done(cluster) - before == 4  # 10 answer files, 3 a task: the runs went to the cluster


@pytest.mark.slow
def test_coverage_and_mutant_runs_on_the_cluster_match_the_local_pool(cluster: Cluster) -> None:
    from evalmislead_assets.analysis.coverage import build_test_coverage
    from evalmislead_assets.mutation import scoring
    from evalmislead_assets.mutation.mutator import mutants

    generated, problems = _answers(PROBLEMS[:4])
    remote = DaskSandbox(cluster.address, workers=1, answers_per_task=1, setting="the test's cluster")
    local = Sandbox(workers=2)
    measured = ["task_id", "version", "n_tests_measured", "line_coverage", "branch_coverage"]
    here = build_test_coverage(generated, problems.assign(entry_point=_entry_points(PROBLEMS[:4])), local)
    there = build_test_coverage(generated, problems.assign(entry_point=_entry_points(PROBLEMS[:4])), remote)
    assert here["n_tests_measured"].sum() > 0
    assert there[measured].equals(here[measured])

    files = []
    for g, entry in zip(generated.itertuples(index=False), _entry_points(PROBLEMS[:4])):
        fixed = problems.loc[g.task_id, "fixed_code"]
        found = tuple((m.mutant_id, m.code) for m in mutants(fixed, entry, cap=4)[0])
        files.append(scoring.TestFile(g.source, tuple(g.test_ids), fixed, found))
    kills_here = scoring.run_kills(files, local, max_runs=None)
    before, done = remote.tasks, _tasks_done(cluster)
    kills_there = scoring.run_kills(files, remote, max_runs=None)
    assert [f.killed_by for f in kills_there.files] == [f.killed_by for f in kills_here.files]
    assert any(by is not None for f in kills_here.files for by in f.killed_by.values())
    assert remote.tasks - before == len(files)  # the fixed runs: one task per answer file
    # and the mutant runs, on the shorter limit's sandbox (with_limits): on the cluster too
    assert _tasks_done(cluster) - done > len(files)


def _entry_points(indices: list[int]) -> list[str]:
    from evalmislead_assets.study.problems import DATA_FILE

    rows = [json.loads(line) for line in Path(DATA_FILE).read_text(encoding="utf-8").splitlines()]
    return [rows[i]["entry_point"] for i in indices]


def _tasks_done(cluster: Cluster) -> int:
    """Tasks of the sandbox's worker function the scheduler has seen finish since the first call (which starts
    its task stream)."""
    from distributed import Client

    with Client(cluster.address, timeout=30, set_as_default=False) as client:
        return sum(1 for t in client.get_task_stream(start=0) if "on_worker" in str(t.get("key", "")))


@pytest.mark.slow
def test_a_worker_killed_mid_batch_leaves_its_tasks_to_the_other(cluster: Cluster, local_rows: pd.DataFrame) -> None:
    from distributed import Client

    killed: list[str] = []
    watcher = Client(cluster.address, timeout=30, set_as_default=False)

    def kill_first_busy_worker() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            info = watcher.scheduler_info()["workers"]
            for address, keys in watcher.processing().items():
                if keys and info.get(address, {}).get("name") == "w0":  # w0 is running one of the batch's tasks
                    os.kill(cluster.workers["w0"].pid, signal.SIGKILL)  # no nanny: this process is the worker
                    killed.append(address)
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=kill_first_busy_worker, daemon=True)
    thread.start()
    try:
        sandbox = DaskSandbox(cluster.address, workers=1, answers_per_task=1, setting="the test's cluster")
        rows = build_test_outcomes(*_answers(PROBLEMS), sandbox)
        thread.join(timeout=60)
        assert killed, "w0 ran no task of the batch"
        assert cluster.workers["w0"].wait(timeout=30) == -signal.SIGKILL
        alive = {w["name"] for w in watcher.scheduler_info()["workers"].values()}
    finally:
        watcher.close()
    assert alive == {"w1"}  # every task w0 held ran on w1
    assert _statuses(rows) == _statuses(local_rows) and len(rows) == len(local_rows)
