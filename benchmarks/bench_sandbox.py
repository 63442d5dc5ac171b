"""Sandbox runner against the naive runner (a fresh `python -m pytest FILE::ID` per test and version).

    .venv/bin/python benchmarks/bench_sandbox.py [--problems 0-19] [--workers 2] [--timeout 10]

Corpus: for each HumanEvalPack problem in the range, the dataset's own check() asserts become one
test function each, the shape of a generated test file (`from solution import f` then
`def test_k(): assert f(...) == ...`); every fourth problem also gets them as one parametrized
test and as a test class, so that ids like `test_p[3]` and `TestF::test_k` are in the corpus.
Every test id runs against the buggy and the fixed version (a "run"). Both runners use the same
files, the same scrubbed environment and the same worker count; the naive runner starts a
fresh interpreter and pytest per run (`python -m pytest FILE::ID`, installed plugins loading as
they do for a user; --naive-lean turns autoload off as the zygotes do), with the 10 s limit.
Runs that hit the limit are left out (they cost the limit in both runners). Printed: runs per
second and CPU per run of each, the ratios, and whether every run got the same status from
both (asserted).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evalmislead_assets.problems import DATA_FILE
from evalmislead_assets.sandbox import MODULE_UNDER_TEST, TEST_FILE, Limits, Module, Sandbox, scrubbed_env
from evalmislead_assets.settings import parse_problem_list


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


def corpus(indices: list[int]) -> list[tuple[str, str, str, list[str]]]:
    """(buggy, fixed, test source, test ids) per problem."""
    rows = [json.loads(line) for line in open(DATA_FILE, encoding="utf-8")]
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


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="0-19")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--naive-lean", action="store_true",
                    help="naive runner with plugin autoload off (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1), as the zygotes run")
    args = ap.parse_args()
    cases = corpus(parse_problem_list(args.problems) or list(range(164)))
    requests: list[tuple[Module, str]] = []
    for buggy, fixed, src, ids in cases:
        for tid in ids:
            requests += [(Module(buggy, src), tid), (Module(fixed, src), tid)]
    n_tests = sum(len(c[3]) for c in cases)
    print(f"corpus: {len(cases)} test files, {n_tests} tests, {len(requests)} runs (tests x 2 versions); "
          f"workers {args.workers}, {os.cpu_count()} CPUs")

    sandbox = Sandbox(Limits(timeout_s=args.timeout), workers=args.workers)
    # A test that never ends costs the time limit in both runners; it says nothing about start-up.
    slow = {(r[0], r[1]) for r, ran in zip(requests, Sandbox(Limits(timeout_s=2.0), workers=args.workers)
                                              .run(requests)) if ran.status == "timeout"}
    if slow:
        requests = [r for r in requests if (r[0], r[1]) not in slow]
        print(f"excluded {len(slow)} runs that hit a 2 s limit (an endless buggy version); {len(requests)} runs left")
    t = time.perf_counter()
    collected = sandbox.collect([m for b, f, s, _ in cases for m in (Module(b, s), Module(f, s))])
    t_collect = time.perf_counter() - t
    for (b, f, s, ids), c in zip([x for x in cases for _ in (0, 1)], collected):
        assert c.test_ids == ids, (c.test_ids, ids, c.error)
    t, c = time.perf_counter(), _children_cpu()
    ours = [r.status for r in sandbox.run(requests)]
    t_ours, c_ours = time.perf_counter() - t, _children_cpu() - c
    print(f"sandbox: {len(requests)} runs in {t_ours:.2f} s = {len(requests) / t_ours:.1f} runs/s, "
          f"{1000 * c_ours / len(requests):.1f} ms CPU per run (collection of {len(collected)} file x version "
          f"pairs before: {t_collect:.2f} s; isolation: "
          f"{'full' if sandbox.isolation and not sandbox.isolation.missing() else sandbox.isolation})")

    with tempfile.TemporaryDirectory(prefix="bench-naive-") as root:
        dirs: dict[Module, str] = {}
        for m, _ in requests:
            if m not in dirs:
                d = os.path.join(root, f"m{len(dirs)}")
                os.mkdir(d)
                Path(d, f"{MODULE_UNDER_TEST}.py").write_text(m.solution)
                Path(d, TEST_FILE).write_text(m.tests)
                Path(d, "pytest.ini").write_text("[pytest]\naddopts =\n")
                dirs[m] = d
        t, c = time.perf_counter(), _children_cpu()
        with ThreadPoolExecutor(args.workers) as pool:
            naive = list(pool.map(lambda r: naive_status(dirs[r[0]], r[1], args.timeout, args.naive_lean), requests))
        t_naive, c_naive = time.perf_counter() - t, _children_cpu() - c
    print(f"naive{' (lean)' if args.naive_lean else ''}: {len(requests)} runs in {t_naive:.2f} s = {len(requests) / t_naive:.1f} runs/s, "
          f"{1000 * c_naive / len(requests):.1f} ms CPU per run")
    mismatches = [(r[1], a, b) for r, a, b in zip(requests, ours, naive) if a != b]
    counts = {s: ours.count(s) for s in sorted(set(ours))}
    print(f"statuses: {counts}; identical outcomes: {not mismatches}")
    print(f"ratio: {t_naive / t_ours:.1f}x runs/s (wall), {c_naive / c_ours:.1f}x CPU per run")
    assert not mismatches, mismatches[:10]


if __name__ == "__main__":
    main()
