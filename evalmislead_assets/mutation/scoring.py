"""Mutants of the fixed function, the dataset oracle's verdict on each, and the mutation score of a test file.

Tables (declared in store/schema.py):

- ``mutants``: one row per mutant of a problem's fixed function (``mutator.py``), with
  ``oracle_killed``: does the dataset's own ``check(...)`` oracle fail on it (run as
  ``validation.run_oracle`` runs it: own interpreter, own session, 10 s limit)? A mutant the
  oracle does not kill is flagged ``likely_equivalent`` (it may still differ on inputs the
  oracle never tries; a test file that kills one shows so in ``n_killed_likely_equivalent``).
- ``mutation_scores``: per generated test file with at least one collected test.
- ``mutant_kills``: per test file and mutant: killed or not, and by which test.

Kill rule. A test file's tests first run against the fixed version; only the tests that
**pass** there take part. A mutant is killed when at least one of those tests does not pass
on it (failed, error, timeout or crashed). Tests that already fail on the fixed version never
count as kills: they would "kill" every mutant and say nothing about it (for ``buggy_code``
this leaves out exactly the misleading and both-fail tests). Each run goes through the
same ``Sandbox.run`` as ``test_outcomes`` (``Module(solution=mutant_code, tests=source)``).

Runs against mutants use a shorter limit, ``MUTANT_TIMEOUT_S`` (a mutant that loops forever
is the common case, and it would otherwise cost 10 s per test): a test whose fixed run took
more than ``SLOW_FRACTION`` of that limit runs against the mutants with the full limit
instead. Running over the limit counts as a kill (as in mutmut and cosmic-ray) only when the
same test's fixed run took under ``TIMEOUT_KILL_FRACTION`` (half) of the limit that mutant run
had: otherwise a slow but correct run on a loaded machine could be a false kill, so such a run
is not a kill (the mutant goes on to meet the other tests) and is counted in ``n_timeouts_not_kills``. Kills by timeout
are flagged (``mutant_kills.killed_by_timeout``, ``mutation_scores.n_killed_by_timeout``).
Each mutant first meets the first passing test of the file; only the survivors meet the
others. The kill flags are the same as running every test (a kill needs one non-pass), and
``killing_test`` is the first passing test, in file order, that does not pass on the mutant.

Work cap: ``max_runs`` bounds one file's runs, fixed runs included. It is
applied before any mutant runs: with n tests and M mutants, only the first
``k = max(1, (max_runs - n) // M)`` passing tests (file order) meet the mutants, so a file runs
at most ``max(max_runs, n + M)`` times. The passing tests left out (``n_tests_capped``) and the
runs they would have cost (``runs_dropped``: the mutants that survive the first test, times the
tests left out) are stored and reported; the score is then the first k tests' score.

``mutation_score`` = killed non-equivalent mutants / non-equivalent mutants; NULL ("not
estimable", never 0.0) when the problem has no non-equivalent mutant or no test of the file
passes on the fixed version. "Non-equivalent" means "the dataset oracle kills it", so the
denominator is the oracle-detectable mutants, not the textbook killed / (all - equivalent):
a mutant the oracle misses but that is not truly equivalent is left out too.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pandas as pd

from evalmislead_assets.execution.collection import stored_test_ids
from evalmislead_assets.execution.oracle_validation import ORACLE_TIMEOUT_S, run_oracle
from evalmislead_assets.mutation import mutator
from evalmislead_assets.sandbox.host import Isolation, Module, Ran, Sandbox, weakest
from evalmislead_assets.store import schema

MUTANT_TIMEOUT_S = 2.0
SLOW_FRACTION = 0.25
TIMEOUT_KILL_FRACTION = 0.5  # a timeout kills only when the fixed run took under this share of the limit

SCORE_COLUMNS = schema.column_names("mutation_scores")
KILL_COLUMNS = schema.column_names("mutant_kills")
MUTANT_COLUMNS = schema.column_names("mutants")


# ---------------------------------------------------------------- mutants + oracle


def build_mutants(problems: pd.DataFrame, cap: int = mutator.MAX_MUTANTS_PER_PROBLEM,
                  seed: int = mutator.SAMPLE_SEED, oracle_timeout_s: float = ORACLE_TIMEOUT_S,
                  workers: int | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Rows of ``mutants`` for each problem (task_id, problem_idx, entry_point, fixed_code, test), and notes."""
    rows, notes = [], []
    for p in problems.itertuples(index=False):
        try:
            kept, n = mutator.mutants(p.fixed_code, p.entry_point, cap, seed, key=str(p.task_id))
        except mutator.MutationError as exc:
            notes.append(f"{p.task_id}: {exc}")
            continue
        for m in kept:
            rows.append({"task_id": p.task_id, "problem_idx": int(p.problem_idx), "mutant_id": m.mutant_id,
                         "operator": m.operator, "line": m.line, "description": m.description, "diff": m.diff,
                         "mutant_code": m.code, "n_candidates": n, "mutator_version": mutator.MUTATOR_VERSION,
                         "cap": cap, "seed": seed, "_test": p.test, "_entry": p.entry_point})
    workers = workers or max(8, 4 * (os.cpu_count() or 2))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        verdicts = list(pool.map(lambda r: run_oracle(r["mutant_code"], r["_test"], r["_entry"], oracle_timeout_s),
                                 rows))
    for r, v in zip(rows, verdicts):
        r["oracle_killed"] = not v.passed
        r["oracle_detail"] = v.detail
        r["likely_equivalent"] = v.passed
    df = pd.DataFrame(rows, columns=MUTANT_COLUMNS)
    for c in ("problem_idx", "mutant_id", "line", "n_candidates", "cap"):
        df[c] = df[c].astype("int32")
    return df, notes


# ---------------------------------------------------------------- kills


@dataclass(frozen=True)
class TestFile:
    """One generated test module, the fixed code of its problem, and that problem's mutants."""

    source: str
    test_ids: tuple[str, ...]
    fixed_code: str
    mutants: tuple[tuple[int, str], ...]  # (mutant_id, mutant code)


@dataclass
class FileKills:
    fixed_status: dict[str, str]
    passing: list[str]  # test ids that pass on the fixed version, in file order
    killed_by: dict[int, tuple[str, str] | None]  # mutant_id -> (first killing test, its status) or None
    tests_run: dict[int, int]  # mutant_id -> how many tests ran against it
    runs: int = 0  # test x version runs, the fixed ones included
    mutant_tests: list[str] = field(default_factory=list)  # the passing tests that meet the mutants (run cap)
    fixed_seconds: dict[str, float] = field(default_factory=dict)  # test id -> its run time on the fixed version
    timeouts_not_kills: dict[int, int] = field(default_factory=dict)  # mutant_id -> timeouts not counted as kills
    runs_dropped: int = 0  # mutant runs the run cap left out

    @property
    def tests_capped(self) -> int:
        return len(self.passing) - len(self.mutant_tests)


@dataclass
class KillRun:
    files: list[FileKills]
    isolation: Isolation | None = None
    runs: int = 0
    notes: list[str] = field(default_factory=list)


def tests_for_mutants(n_tests: int, n_mutants: int, n_passing: int, max_runs: int | None) -> int:
    """How many passing tests (the first, in file order) meet the mutants under the per-file run cap."""
    if max_runs is None or n_mutants == 0:
        return n_passing
    if max_runs < 1:
        raise ValueError(f"max_runs={max_runs}: set EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE to at least 1")
    return min(n_passing, max(1, (max_runs - n_tests) // n_mutants))


def run_kills(files: Sequence[TestFile], sandbox: Sandbox, mutant_timeout_s: float = MUTANT_TIMEOUT_S, *,
              max_runs: int | None) -> KillRun:
    """Run each file against its fixed code, then its passing tests against each mutant (see the module doc).

    ``max_runs``: the test runs one file may take (EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE in the wiring);
    None: no cap."""
    fixed = sandbox.run([(Module(f.fixed_code, f.source), t) for f in files for t in f.test_ids])
    out: list[FileKills] = []
    slow: set[tuple[int, str]] = set()
    k = 0
    for i, f in enumerate(files):
        ran = fixed[k:k + len(f.test_ids)]
        k += len(f.test_ids)
        status = {t: r.status for t, r in zip(f.test_ids, ran)}
        passing = [t for t, r in zip(f.test_ids, ran) if r.status == "passed"]
        slow |= {(i, t) for t, r in zip(f.test_ids, ran) if r.status == "passed"
                 and r.seconds > SLOW_FRACTION * mutant_timeout_s}
        k_tests = tests_for_mutants(len(f.test_ids), len(f.mutants), len(passing), max_runs)
        out.append(FileKills(status, passing, {m: None for m, _ in f.mutants}, {m: 0 for m, _ in f.mutants},
                             runs=len(f.test_ids), mutant_tests=passing[:k_tests],
                             fixed_seconds={t: r.seconds for t, r in zip(f.test_ids, ran)},
                             timeouts_not_kills={m: 0 for m, _ in f.mutants}))
    short_limits = dataclasses.replace(sandbox.limits, timeout_s=min(mutant_timeout_s, sandbox.limits.timeout_s))
    short = sandbox.with_limits(short_limits)  # a test's scripted sandbox stays scripted, a cluster's stays on it
    # phase 1: every mutant against the first passing test; phase 2: survivors against the rest
    first = [(i, mid, code, fk.mutant_tests[:1]) for i, (f, fk) in enumerate(zip(files, out))
             for mid, code in f.mutants if fk.mutant_tests]
    _run_phase(first, files, out, slow, sandbox, short)
    for fk in out:  # the survivors of the first test would have met every test the cap left out
        fk.runs_dropped = fk.tests_capped * sum(1 for by in fk.killed_by.values() if by is None)
    rest = [(i, mid, code, fk.mutant_tests[1:]) for i, (f, fk) in enumerate(zip(files, out))
            for mid, code in f.mutants if len(fk.mutant_tests) > 1 and fk.killed_by[mid] is None]
    _run_phase(rest, files, out, slow, sandbox, short)
    run = KillRun(out, runs=sum(f.runs for f in out))
    run.isolation = _weakest(sandbox.isolation, short.isolation)
    return run


def _run_phase(jobs: list[tuple[int, int, str, list[str]]], files: Sequence[TestFile], out: list[FileKills],
               slow: set[tuple[int, str]], full: Sandbox, short: Sandbox) -> None:
    fast_req: list[tuple[Module, str]] = []
    slow_req: list[tuple[Module, str]] = []
    where: list[tuple[bool, int, int, int, str]] = []  # (slow?, index in its request list, file, mutant, test)
    for i, mid, code, tests in jobs:
        for t in tests:
            target = slow_req if (i, t) in slow else fast_req
            where.append(((i, t) in slow, len(target), i, mid, t))
            target.append((Module(code, files[i].source), t))
    ran_fast: list[Ran] = short.run(fast_req) if fast_req else []
    ran_slow: list[Ran] = full.run(slow_req) if slow_req else []
    order = {(i, t): n for i, f in enumerate(files) for n, t in enumerate(f.test_ids)}
    for is_slow, j, i, mid, t in sorted(where, key=lambda w: (w[2], w[3], order[(w[2], w[4])])):
        r = (ran_slow if is_slow else ran_fast)[j]
        fk = out[i]
        fk.tests_run[mid] += 1
        fk.runs += 1
        limit = (full if is_slow else short).limits.timeout_s
        if r.status == "timeout" and not timeout_kills(fk.fixed_seconds.get(t, 0.0), limit):
            fk.timeouts_not_kills[mid] += 1
        elif r.status != "passed" and fk.killed_by[mid] is None:
            fk.killed_by[mid] = (t, r.status)


def timeout_kills(fixed_seconds: float, limit_s: float) -> bool:
    """Whether a mutant run over ``limit_s`` is a kill: only when the same test's fixed run was well under it."""
    return fixed_seconds < TIMEOUT_KILL_FRACTION * limit_s


def _weakest(a: Isolation | None, b: Isolation | None) -> Isolation | None:
    if a is None or b is None:
        return a or b
    return weakest(a, b)


# ---------------------------------------------------------------- rows


def score(n_mutants: int, n_likely_equivalent: int, n_killed_non_equivalent: int, n_passing: int) -> float | None:
    """Killed non-equivalent / non-equivalent; None when not estimable (no such mutant, or no passing test)."""
    non_equivalent = n_mutants - n_likely_equivalent
    if non_equivalent <= 0 or n_passing <= 0:
        return None
    return n_killed_non_equivalent / non_equivalent


def build_scores(generated: pd.DataFrame, mutants: pd.DataFrame, problems: pd.DataFrame, sandbox: Sandbox,
                 mutant_timeout_s: float = MUTANT_TIMEOUT_S,
                 *, max_runs: int | None,
                 ) -> tuple[pd.DataFrame, pd.DataFrame, KillRun]:
    """(mutation_scores rows, mutant_kills rows, the run) for generated_tests rows with n_tests > 0.

    ``generated`` has task_id, problem_idx, source, test_ids (list), n_tests; ``mutants`` the
    columns of the mutants table; ``problems`` is indexed by task_id with fixed_code.
    """
    generated = generated[generated["n_tests"] > 0].reset_index(drop=True)
    by_task = {t: g.sort_values("mutant_id") for t, g in mutants.groupby("task_id")} if len(mutants) else {}
    files, metas = [], []
    for g in generated.itertuples(index=False):
        muts = by_task.get(g.task_id, mutants.iloc[0:0])
        files.append(TestFile(g.source, tuple(stored_test_ids(g.test_ids)), problems.loc[g.task_id, "fixed_code"],
                              tuple(zip(muts["mutant_id"].astype(int), muts["mutant_code"]))))
        metas.append((g, muts))
    run = run_kills(files, sandbox, mutant_timeout_s, max_runs=max_runs)
    score_rows, kill_rows = [], []
    for (g, muts), fk in zip(metas, run.files):
        equivalent = dict(zip(muts["mutant_id"].astype(int), muts["likely_equivalent"].astype(bool)))
        operators = dict(zip(muts["mutant_id"].astype(int), muts["operator"]))
        killed = {m for m, by in fk.killed_by.items() if by is not None}
        n_eq = sum(equivalent.values())
        k_ne = sum(1 for m in killed if not equivalent[m])
        by_timeout = {m for m in killed if fk.killed_by[m][1] == "timeout"}  # type: ignore[index]
        score_rows.append({
            "task_id": g.task_id, "problem_idx": int(g.problem_idx), "n_tests": int(g.n_tests),
            "n_tests_passing_fixed": len(fk.passing), "n_mutants": len(equivalent), "n_likely_equivalent": n_eq,
            "n_killed": len(killed), "n_killed_non_equivalent": k_ne, "n_killed_likely_equivalent": len(killed) - k_ne,
            "mutation_score": score(len(equivalent), n_eq, k_ne, len(fk.passing)), "runs": fk.runs,
            "mutant_timeout_s": mutant_timeout_s, "mutator_version": mutator.MUTATOR_VERSION,
            "n_killed_by_timeout": len(by_timeout), "n_timeouts_not_kills": sum(fk.timeouts_not_kills.values()),
            "max_runs": max_runs, "n_tests_capped": fk.tests_capped, "runs_dropped": fk.runs_dropped,
        })
        for m in sorted(equivalent):
            by = fk.killed_by[m]
            kill_rows.append({
                "task_id": g.task_id, "problem_idx": int(g.problem_idx), "mutant_id": m, "operator": operators[m],
                "likely_equivalent": equivalent[m], "killed": by is not None, "killing_test": by[0] if by else None,
                "killing_status": by[1] if by else None, "n_tests_run": fk.tests_run[m],
                "killed_by_timeout": m in by_timeout, "n_timeouts_not_kills": fk.timeouts_not_kills[m],
            })
    scores = pd.DataFrame(score_rows, columns=[c for c in SCORE_COLUMNS if c not in ("condition", "thinking")])
    scores["mutation_score"] = scores["mutation_score"].astype("float64")
    scores["max_runs"] = scores["max_runs"].astype("Int32")
    kills = pd.DataFrame(kill_rows, columns=[c for c in KILL_COLUMNS if c not in ("condition", "thinking")])
    return scores, kills, run
