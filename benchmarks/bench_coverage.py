"""Cost of coverage: the same batch through the sandbox with coverage off and on.

    .venv/bin/python benchmarks/bench_coverage.py [--problems 0-19] [--workers 2] [--repeat 2]

Corpus: bench_sandbox's (_corpus.py: the dataset's check() asserts as one test function each, some also
parametrized and as a class), every test id against the buggy and the fixed version. Runs that
hit a 2 s limit (an endless buggy version) are left out. Each mode runs --repeat times,
alternating (off, on, off, on, ...), and the best wall time and the least CPU of each count
(CPU per run is the steadier figure on a shared machine). Printed: runs per second and CPU
per run of each mode, the ratios, whether every run got the same status in both modes
(asserted), and the mean line coverage of the fixed versions as a sanity check.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _corpus import children_cpu, corpus, drop_endless, version_runs

from evalmislead_assets.sandbox import coverage_probe as cm
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox
from evalmislead_assets.settings import parse_problem_list


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="0-19")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    cases = corpus(parse_problem_list(args.problems) or list(range(164)))
    requests, n_slow = drop_endless(version_runs(cases), args.workers)
    print(f"corpus: {len(cases)} test files, {len(requests)} runs (tests x 2 versions, {n_slow} endless runs "
          f"left out); workers {args.workers}, {os.cpu_count()} CPUs")

    sandbox = Sandbox(Limits(timeout_s=10.0), workers=args.workers)
    best = {False: float("inf"), True: float("inf")}
    cpu = {False: float("inf"), True: float("inf")}
    results = {}
    for _ in range(args.repeat):
        for coverage in (False, True):
            t, c = time.perf_counter(), children_cpu()
            results[coverage] = sandbox.run(requests, coverage=coverage)
            best[coverage] = min(best[coverage], time.perf_counter() - t)
            cpu[coverage] = min(cpu[coverage], children_cpu() - c)
    off, on = results[False], results[True]
    same = [a.status for a in off] == [b.status for b in on]
    measured = sum(cm.payload_arcs(r.coverage) is not None for r in on)
    rate_off, rate_on = len(requests) / best[False], len(requests) / best[True]
    ms = {k: 1000 * v / len(requests) for k, v in cpu.items()}
    print(f"coverage off: {len(requests)} runs in {best[False]:.2f} s = {rate_off:.1f} runs/s, "
          f"{ms[False]:.1f} ms CPU per run")
    print(f"coverage on:  {len(requests)} runs in {best[True]:.2f} s = {rate_on:.1f} runs/s, "
          f"{ms[True]:.1f} ms CPU per run ({measured} runs returned coverage)")
    print(f"ratio on/off: {best[True] / best[False]:.2f}x wall time ({rate_on / rate_off:.2f}x the rate), "
          f"{ms[True] / ms[False]:.2f}x CPU per run; identical statuses: {same}")

    # sanity: line coverage of each fixed version by its whole file
    fixed_cov = []
    by_file: dict[Module, set[cm.Arc]] = {}
    for (module, _), r in zip(requests, on):
        arcs = cm.payload_arcs(r.coverage)
        if arcs is not None:
            by_file.setdefault(module, set()).update(arcs)
    entry = {fixed: re.search(r"from solution import (\w+)", src).group(1) for _, fixed, src, _ in cases}
    for module, arcs in by_file.items():
        if module.solution in entry:
            fc = cm.measure(cm.function_shape(module.solution, entry[module.solution]), arcs)
            if fc.line_coverage is not None:
                fixed_cov.append(fc.line_coverage)
    if fixed_cov:
        print(f"mean line coverage of the fixed versions: {100 * sum(fixed_cov) / len(fixed_cov):.1f} % "
              f"over {len(fixed_cov)} files")
    assert same


if __name__ == "__main__":
    main()
