"""Per-version statuses -> the four cells (or ``limit``), and the counts and rates built on them.

A test whose run ended on one of the runner's caps on either version (a ``limit:*`` status: output, memory,
file size, processes, disk; sandbox/limits.py) has no verdict plain pytest would share, so its outcome is
``limit``: a category of its own, counted among the tests (it is in every denominator) and never misleading,
effective, both_pass or both_fail."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from evalmislead_assets.sandbox.host import STATUSES, Module, Sandbox

__all__ = ["STATUSES", "OUTCOMES", "LIMIT", "CATEGORIES", "is_limit", "outcome", "cell_counts", "cell_rates",
           "ScoredTest", "score_tests", "score_many"]
OUTCOMES = ("misleading", "effective", "both_pass", "both_fail")
LIMIT = "limit"  # the outcome of a test that ended on a runner cap on either version
CATEGORIES = (*OUTCOMES, LIMIT)


def is_limit(status: str) -> bool:
    """Whether a status says the run ended on one of the runner's caps (``limit:output``, ``limit:memory``...)."""
    return isinstance(status, str) and status.startswith("limit:")


def outcome(buggy_status: str, fixed_status: str) -> str:
    """The cell of one test: only `passed` counts as passing; every other status, an unknown one included,
    is a non-pass (never an exception: one odd status must not cost the batch). A test ``tampered`` on
    either version passes on neither: it lands in both_fail (and the report counts it apart). A test that
    ended on a runner cap on either version (``limit:*``) is ``limit``, whatever the other version says: a
    cap decided it, not its assertions."""
    if "tampered" in (buggy_status, fixed_status):
        return "both_fail"
    if is_limit(buggy_status) or is_limit(fixed_status):
        return LIMIT
    b, f = buggy_status == "passed", fixed_status == "passed"
    if b and not f:
        return "misleading"
    if f and not b:
        return "effective"
    return "both_pass" if b else "both_fail"


def cell_counts(outcomes: Iterable[str]) -> dict[str, int]:
    """Tests per cell, and per ``limit`` (the tests that ended on a runner cap)."""
    counts = dict.fromkeys(CATEGORIES, 0)
    for o in outcomes:
        counts[o] += 1
    return counts


def cell_rates(counts: Mapping[str, int]) -> dict[str, float]:
    """Each cell (and ``limit``) over all tests (the paper's denominator); 0.0 when there are none."""
    total = sum(counts.get(o, 0) for o in CATEGORIES)
    return {o: (counts.get(o, 0) / total if total else 0.0) for o in CATEGORIES}


@dataclass
class ScoredTest:
    test_id: str
    buggy_status: str
    fixed_status: str
    outcome: str
    buggy_detail: str
    fixed_detail: str
    seconds: float


def score_tests(source: str, test_ids: Sequence[str], buggy_code: str, fixed_code: str,
                sandbox: Sandbox | None = None) -> list[ScoredTest]:
    """Run each test id against both versions and classify it."""
    return score_many([(source, list(test_ids), buggy_code, fixed_code)], sandbox)[0]


def score_many(jobs: Sequence[tuple[str, list[str], str, str]], sandbox: Sandbox | None = None) -> list[list[ScoredTest]]:
    """Several modules at once (one sandbox batch): each job is (source, test ids, buggy code, fixed code)."""
    sandbox = sandbox or Sandbox()
    requests: list[tuple[Module, str]] = []
    for source, ids, buggy, fixed in jobs:
        for tid in ids:
            requests += [(Module(buggy, source), tid), (Module(fixed, source), tid)]
    ran = sandbox.run(requests)
    out: list[list[ScoredTest]] = []
    k = 0
    for _, ids, _, _ in jobs:
        scored = []
        for tid in ids:
            b, f = ran[k], ran[k + 1]
            k += 2
            bs, fs = b.status, f.status
            if "tampered" in (bs, fs):  # caught on one version: its pass on the other is no evidence either
                bs = fs = "tampered"
            scored.append(ScoredTest(tid, bs, fs, outcome(bs, fs), b.detail, f.detail, round(b.seconds + f.seconds, 4)))
        out.append(scored)
    return out
