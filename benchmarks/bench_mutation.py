"""Mutation runs: the sandbox (fast runner) against the naive runner (`python -m pytest FILE::ID` per test per mutant).

    .venv/bin/python benchmarks/bench_mutation.py [--problems 0-5] [--max-mutants 6] [--max-tests 5] [--workers 2]

Corpus: for each HumanEvalPack problem in the range, the test file of bench_sandbox.py (_corpus.py: the dataset's own
check() asserts as one test function each, `from solution import f`), cut to --max-tests tests, and up to
--max-mutants mutants of the fixed function (evalmislead_assets.mutation.mutator, seeded sample). Only tests that
pass on the fixed version take part (the kill rule of mutation_scoring). A "run" is one test against one
mutant. Runs that hit a 2 s limit in a first pass are left out (an endless mutant costs the limit in both
runners and says nothing about start-up). Both runners get the same runs, files, scrubbed environment and
worker count; the kill result of every (file, mutant) pair is asserted identical.

Then the production path, mutation_scoring.run_kills (fixed run, then each mutant against the first passing
test, then survivors against the rest), is timed on the same corpus, its kills asserted identical too, and
a full-study mutation pass is estimated: 164 problems x the mean mutants per problem at the cap x 3 test
files (the primary conditions) x --tests-per-file tests, at the measured rates on this machine. Last, the
per-file run cap (EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE's default): worst-case files (every mutant survives
every test) with and without it, in runs and minutes at the measured rate.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import children_cpu, corpus, dataset_rows, run_naive

from evalmislead_assets.mutation import mutator as mutation
from evalmislead_assets.mutation import scoring as ms
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox
from evalmislead_assets.settings import DEFAULT_MAX_MUTATION_RUNS_PER_FILE, parse_problem_list

PRIMARY_FILES = 3
HOUR_S = 3600.0


def build(indices: list[int], max_mutants: int, max_tests: int) -> list[tuple[str, str, list[str], list[tuple[int, str]]]]:
    """(fixed code, test source, test ids, [(mutant_id, mutant code)]) per problem."""
    rows = dataset_rows()
    out = []
    for i in indices:
        case = corpus([i])
        if not case:
            continue
        _, fixed, src, ids = case[0]
        ids = [t for t in ids if t.startswith("test_") and "[" not in t][:max_tests]
        muts, _ = mutation.mutants(fixed, rows[i]["entry_point"], max_mutants, key=rows[i]["task_id"])
        out.append((fixed, src, ids, [(m.mutant_id, m.code) for m in muts]))
    return out


def kills_of(keys: list[tuple[int, int, str]], statuses: list[str]) -> dict[tuple[int, int], bool]:
    out: dict[tuple[int, int], bool] = {}
    for (f, m, _), s in zip(keys, statuses):
        out[(f, m)] = out.get((f, m), False) or s != "passed"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="0-5")
    ap.add_argument("--max-mutants", type=int, default=6)
    ap.add_argument("--max-tests", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--tests-per-file", type=float, default=8.0, help="assumed tests per generated file (estimate)")
    ap.add_argument("--endless-share", type=float, default=0.03,
                    help="share of mutants that never end (estimate; 4 of 147 oracle timeouts on problems 0-11)")
    ap.add_argument("--cap", type=int, default=mutation.MAX_MUTANTS_PER_PROBLEM, help="mutants per problem (estimate)")
    args = ap.parse_args()
    cases = build(parse_problem_list(args.problems) or list(range(164)), args.max_mutants, args.max_tests)

    probe = Sandbox(Limits(timeout_s=2.0), workers=args.workers)
    fixed_req = [(Module(fx, src), t) for fx, src, ids, _ in cases for t in ids]
    passing = {(m.tests, t) for (m, t), r in zip(fixed_req, probe.run(fixed_req)) if r.status == "passed"}
    keys, requests = [], []
    for f, (_fx, src, ids, muts) in enumerate(cases):
        for mid, code in muts:
            for t in ids:
                if (src, t) in passing:
                    keys.append((f, mid, t))
                    requests.append((Module(code, src), t))
    first = probe.run(requests)
    slow = {i for i, r in enumerate(first) if r.status == "timeout"}
    endless = {(keys[i][0], keys[i][1]) for i in slow}
    keep = [i for i in range(len(requests)) if (keys[i][0], keys[i][1]) not in endless]
    keys, requests = [keys[i] for i in keep], [requests[i] for i in keep]
    n_mut = sum(len(c[3]) for c in cases) - len(endless)
    print(f"corpus: {len(cases)} problems, {n_mut} mutants, {len(passing)} tests passing on fixed, "
          f"{len(requests)} runs (test x mutant); left out {len(endless)} endless mutants; workers {args.workers}, "
          f"{os.cpu_count()} CPUs")

    sandbox = Sandbox(Limits(timeout_s=args.timeout), workers=args.workers)
    t, c = time.perf_counter(), children_cpu()
    ours = [r.status for r in sandbox.run(requests)]
    t_ours, c_ours = time.perf_counter() - t, children_cpu() - c
    print(f"sandbox: {len(requests)} runs in {t_ours:.2f} s = {len(requests) / t_ours:.1f} runs/s, "
          f"{1000 * c_ours / len(requests):.1f} ms CPU per run")

    naive, t_naive, c_naive = run_naive(requests, args.workers, args.timeout)
    print(f"naive: {len(requests)} runs in {t_naive:.2f} s = {len(requests) / t_naive:.1f} runs/s, "
          f"{1000 * c_naive / len(requests):.1f} ms CPU per run")
    k_ours, k_naive = kills_of(keys, ours), kills_of(keys, naive)
    status_mismatch = sum(a != b for a, b in zip(ours, naive))
    print(f"kills: {sum(k_ours.values())} of {len(k_ours)} (file, mutant) pairs; identical kill results: "
          f"{k_ours == k_naive}; runs with a different status: {status_mismatch}")
    print(f"ratio: {t_naive / t_ours:.1f}x runs/s (wall), {c_naive / c_ours:.1f}x CPU per run")
    assert k_ours == k_naive, sorted(k for k in k_ours if k_ours[k] != k_naive.get(k))[:10]

    files = [ms.TestFile(src, tuple(ids), fx, tuple((m, code) for m, code in muts if (f, m) not in endless))
             for f, (fx, src, ids, muts) in enumerate(cases)]
    t = time.perf_counter()
    run = ms.run_kills(files, sandbox, max_runs=None)  # uncapped: the kills must equal the naive runner's
    t_prod = time.perf_counter() - t
    k_prod = {(f, m): by is not None for f, fk in enumerate(run.files) for m, by in fk.killed_by.items()
              if fk.passing}
    pairs = len(k_prod)
    survived_first = sum(1 for fk in run.files if fk.passing for m, by in fk.killed_by.items()
                         if by is None or by[0] != fk.passing[0])
    s1 = survived_first / pairs if pairs else 0.0
    print(f"run_kills (production, two phases): {pairs} pairs, {run.runs} runs (fixed included) in {t_prod:.2f} s "
          f"(3 sandbox start-ups included) = {pairs / t_prod:.1f} pairs/s; {100 * s1:.0f} % of pairs survive the "
          f"first test; identical kill results: {k_prod == k_ours}")
    assert k_prod == k_ours

    rows = dataset_rows()
    per_problem = [len(mutation.mutants(r["declaration"] + r["canonical_solution"], r["entry_point"], args.cap,
                                        key=r["task_id"])[0]) for r in rows]
    mean_m = sum(per_problem) / len(per_problem)
    tpf = args.tests_per_file
    all_pairs = len(rows) * PRIMARY_FILES * mean_m
    rate = len(requests) / t_ours
    endless_s = all_pairs * args.endless_share * ms.MUTANT_TIMEOUT_S / args.workers  # killed at the first test
    matrix_runs = all_pairs * tpf
    prod_runs = len(rows) * PRIMARY_FILES * tpf + all_pairs * (1 + s1 * (tpf - 1))
    est_matrix, est_prod = matrix_runs / rate + endless_s, prod_runs / rate + endless_s
    print(f"full study estimate: cap {args.cap} = {mean_m:.1f} mutants per problem; 164 problems x {PRIMARY_FILES} "
          f"files x {tpf:g} tests per file; {100 * args.endless_share:g} % endless mutants at "
          f"{ms.MUTANT_TIMEOUT_S:g} s; {rate:.1f} runs/s on {args.workers} workers")
    print(f"  every test x every mutant: {matrix_runs:,.0f} runs = {est_matrix / 60:.1f} min; production path "
          f"(fixed runs + first test + survivors x rest): {prod_runs:,.0f} runs = {est_prod / 60:.1f} min: "
          f"{'fits' if est_prod < HOUR_S else 'does NOT fit'} in an hour on {args.workers} cores")
    cap = DEFAULT_MAX_MUTATION_RUNS_PER_FILE
    for n, m in ((150, 6), (100, 30)):  # worst cases: every mutant survives every test
        k = ms.tests_for_mutants(n, m, n, cap)
        print(f"  run cap {cap:,} per file: {n} tests x {m} surviving mutants = {n + n * m:,} runs uncapped "
              f"({(n + n * m) / rate / 60:.1f} min), {n + k * m:,} capped ({(n + k * m) / rate / 60:.1f} min)")


if __name__ == "__main__":
    main()
