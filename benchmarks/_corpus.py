"""What the sandbox benchmarks share: the corpus, the runs, the naive runner and the CPU clock.

Corpus: for each HumanEvalPack problem, the dataset's own check() asserts become one test
function each, the shape of a generated test file (`from solution import f` then
`def test_k(): assert f(...) == ...`); every fourth problem also gets them as one parametrized
test and as a test class, so that ids like `test_p[3]` and `TestF::test_k` are in the corpus.

The naive runner starts a fresh interpreter and pytest per run (`python -m pytest FILE::ID`) in
the sandbox's scrubbed environment, installed plugins loading as they do for a user unless
``lean`` (autoload off, as the zygotes run).
"""

from __future__ import annotations

import ast
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evalmislead_assets.sandbox.host import MODULE_UNDER_TEST, TEST_FILE, Limits, Module, Sandbox, scrubbed_env
from evalmislead_assets.study.problems import DATA_FILE

Case = tuple[str, str, str, list[str]]  # (buggy, fixed, test source, test ids)
Run = tuple[Module, str]


def _asserts(test_src: str, entry_point: str) -> list[str]:
    """The check() body's top-level asserts that use only the candidate function and literals."""
    tree = ast.parse(test_src)
    check = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    param = check.args.args[0].arg
    out = []
    for stmt in check.body:
        if not isinstance(stmt, ast.Assert):
            continue
        names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        if not names <= {param, "True", "False", "None", "abs", "len", "sorted", "set", "round", "tuple", "list"}:
            continue
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and n.id == param:
                n.id = entry_point
        out.append(ast.unparse(stmt))
    return out[:12]


def dataset_rows() -> list[dict]:
    return [json.loads(line) for line in open(DATA_FILE, encoding="utf-8")]


def corpus(indices: list[int]) -> list[Case]:
    """(buggy, fixed, test source, test ids) per problem."""
    rows = dataset_rows()
    out = []
    for i in indices:
        r = rows[i]
        ep = r["entry_point"]
        asserts = _asserts(r["test"], ep)
        if not asserts:
            continue
        lines = ["import pytest", f"from {MODULE_UNDER_TEST} import {ep}", ""]
        ids = []
        for k, a in enumerate(asserts):
            lines += [f"def test_{k}():", f"    {a}", ""]
            ids.append(f"test_{k}")
        if i % 4 == 0:
            lines += [f"@pytest.mark.parametrize('k', range({len(asserts)}))", "def test_p(k):"]
            lines += [f"    if k == {k}:\n        {a}" for k, a in enumerate(asserts)] + [""]
            ids += [f"test_p[{k}]" for k in range(len(asserts))]
            lines += ["class TestF:"] + [f"    def test_{k}(self):\n        {a}\n" for k, a in enumerate(asserts)]
            ids += [f"TestF::test_{k}" for k in range(len(asserts))]
        buggy = r["declaration"] + r["buggy_solution"]
        fixed = r["declaration"] + r["canonical_solution"]
        out.append((buggy, fixed, "\n".join(lines) + "\n", ids))
    return out


def version_runs(cases: Sequence[Case]) -> list[Run]:
    """Every test id against the buggy and the fixed version, in that order."""
    runs: list[Run] = []
    for buggy, fixed, src, ids in cases:
        for tid in ids:
            runs += [(Module(buggy, src), tid), (Module(fixed, src), tid)]
    return runs


def drop_endless(runs: list[Run], workers: int, limit_s: float = 2.0) -> tuple[list[Run], int]:
    """The runs that end within ``limit_s`` in the sandbox, and how many did not (an endless buggy version
    costs the time limit in every runner and says nothing about start-up)."""
    ran = Sandbox(Limits(timeout_s=limit_s), workers=workers).run(runs)
    slow = {r for r, x in zip(runs, ran) if x.status == "timeout"}
    return [r for r in runs if r not in slow], len(slow)


def children_cpu() -> float:
    """CPU of finished child processes (zygotes, and through them every chain and test process)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def naive_status(moddir: str, test_id: str, timeout_s: float, lean: bool) -> str:
    env = scrubbed_env(moddir)
    if not lean:  # as a user would type it: installed pytest plugins load
        del env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", moddir,
           "-c", os.path.join(moddir, "pytest.ini"), f"{TEST_FILE}::{test_id}"]
    try:
        proc = subprocess.run(cmd, cwd=moddir, env=env, capture_output=True, timeout=timeout_s,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        return "timeout"
    if proc.returncode < 0:
        return "crashed"
    summary = proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    last = summary[0]
    if " error" in last:
        return "error"
    if "failed" in last or "xfailed" in last:
        return "failed"
    if "passed" in last and proc.returncode == 0:
        return "passed"
    return "error"


def run_naive(runs: Sequence[Run], workers: int, timeout_s: float, lean: bool = False) -> tuple[list[str], float, float]:
    """Each run through the naive runner, ``workers`` at a time: (statuses, wall seconds, CPU seconds)."""
    with tempfile.TemporaryDirectory(prefix="bench-naive-") as root:
        dirs: dict[Module, str] = {}
        for m, _ in runs:
            if m not in dirs:
                d = os.path.join(root, f"m{len(dirs)}")
                os.mkdir(d)
                Path(d, f"{MODULE_UNDER_TEST}.py").write_text(m.solution)
                Path(d, TEST_FILE).write_text(m.tests)
                Path(d, "pytest.ini").write_text("[pytest]\naddopts =\n")
                dirs[m] = d
        t, c = time.perf_counter(), children_cpu()
        with ThreadPoolExecutor(workers) as pool:
            statuses = list(pool.map(lambda r: naive_status(dirs[r[0]], r[1], timeout_s, lean), runs))
        return statuses, time.perf_counter() - t, children_cpu() - c
