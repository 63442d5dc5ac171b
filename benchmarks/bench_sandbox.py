"""Sandbox runner against the naive runner (a fresh `python -m pytest FILE::ID` per test and version).

    .venv/bin/python benchmarks/bench_sandbox.py [--problems 0-19] [--workers 2] [--timeout 10]

Corpus (_corpus.py, shared with bench_coverage and bench_mutation): for each HumanEvalPack problem
in the range, the dataset's own check() asserts become one test function each, the shape of a
generated test file (`from solution import f` then `def test_k(): assert f(...) == ...`); every
fourth problem also gets them as one parametrized test and as a test class, so that ids like
`test_p[3]` and `TestF::test_k` are in the corpus. Every test id runs against the buggy and the fixed
version (a "run"). Both runners use the same files, the same scrubbed environment and the same worker
count; the naive runner starts a fresh interpreter and pytest per run (`python -m pytest FILE::ID`, installed plugins loading as
they do for a user; --naive-lean turns autoload off as the zygotes do), with the 10 s limit.
Runs that hit the limit are left out (they cost the limit in both runners). Printed: runs per
second and CPU per run of each, the ratios, and whether every run got the same status from
both (asserted).
"""

from __future__ import annotations

import argparse
import os
import time

from _corpus import children_cpu, corpus, drop_endless, run_naive, version_runs

from evalmislead_assets.sandbox.host import Limits, Module, Sandbox
from evalmislead_assets.settings import parse_problem_list


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="0-19")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--naive-lean", action="store_true",
                    help="naive runner with plugin autoload off (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1), as the zygotes run")
    args = ap.parse_args()
    cases = corpus(parse_problem_list(args.problems) or list(range(164)))
    requests = version_runs(cases)
    n_tests = sum(len(c[3]) for c in cases)
    print(f"corpus: {len(cases)} test files, {n_tests} tests, {len(requests)} runs (tests x 2 versions); "
          f"workers {args.workers}, {os.cpu_count()} CPUs")

    sandbox = Sandbox(Limits(timeout_s=args.timeout), workers=args.workers)
    requests, n_slow = drop_endless(requests, args.workers)
    if n_slow:
        print(f"excluded {n_slow} runs that hit a 2 s limit (an endless buggy version); {len(requests)} runs left")
    t, c = time.perf_counter(), children_cpu()
    collected = sandbox.collect([m for b, f, s, _ in cases for m in (Module(b, s), Module(f, s))])
    t_collect, c_collect = time.perf_counter() - t, children_cpu() - c
    for (_b, _f, _s, ids), c in zip([x for x in cases for _ in (0, 1)], collected):
        assert c.test_ids == ids, (c.test_ids, ids, c.error)
    t, c = time.perf_counter(), children_cpu()
    ours = [r.status for r in sandbox.run(requests)]
    t_ours, c_ours = time.perf_counter() - t, children_cpu() - c
    print(f"sandbox: {len(requests)} runs in {t_ours:.2f} s = {len(requests) / t_ours:.1f} runs/s, "
          f"{1000 * c_ours / len(requests):.1f} ms CPU per run (collection of {len(collected)} file x version "
          f"pairs before: {t_collect:.2f} s; isolation: "
          f"{'full' if sandbox.isolation and not sandbox.isolation.missing() else sandbox.isolation})")

    naive, t_naive, c_naive = run_naive(requests, args.workers, args.timeout, args.naive_lean)
    print(f"naive{' (lean)' if args.naive_lean else ''}: {len(requests)} runs in {t_naive:.2f} s "
          f"= {len(requests) / t_naive:.1f} runs/s, "
          f"{1000 * c_naive / len(requests):.1f} ms CPU per run")
    mismatches = [(r[1], a, b) for r, a, b in zip(requests, ours, naive) if a != b]
    counts = {s: ours.count(s) for s in sorted(set(ours))}
    print(f"statuses: {counts}; identical outcomes: {not mismatches}")
    print(f"ratio: {t_naive / t_ours:.1f}x runs/s (wall), {c_naive / c_ours:.1f}x CPU per run")
    # the naive runner collects the file in every run; the sandbox once per file and version, before
    print(f"ratio with the sandbox's collection counted: {t_naive / (t_ours + t_collect):.1f}x wall, "
          f"{c_naive / (c_ours + c_collect):.1f}x CPU")
    assert not mismatches, mismatches[:10]


if __name__ == "__main__":
    main()
