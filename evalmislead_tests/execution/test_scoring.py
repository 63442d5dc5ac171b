"""Statuses -> the four cells, counts and rates; the published worked example (task 30, get_positive)."""

import itertools

import pytest

from evalmislead_assets.execution import cells as scoring
from evalmislead_assets.sandbox.host import Sandbox

# The worked example of PROTOCOL.md: get_positive should keep the positive numbers, the buggy body
# keeps the negative ones. Seven assertions written against the buggy code: six assert the bug
# (they pass on the buggy version and fail on the fixed one), one holds for both.
BUGGY = "def get_positive(l: list):\n    return [e for e in l if e < 0]\n"
FIXED = "def get_positive(l: list):\n    return [e for e in l if e > 0]\n"
WORKED_EXAMPLE = '''
from solution import get_positive


def test_all_positive_gives_empty():
    assert get_positive([1, 2, 3]) == []


def test_mixed_keeps_negatives():
    assert get_positive([-1, 2, -3, 4]) == [-1, -3]


def test_all_negative_kept():
    assert get_positive([-5, -6]) == [-5, -6]


def test_single_positive():
    assert get_positive([7]) == []


def test_zero_and_positive():
    assert get_positive([0, 5]) == []


def test_large_mixed():
    assert get_positive([5, 3, -5, 2, -3, 3, 9, 0, 123, 1, -10]) == [-5, -3, -10]


def test_empty_list():
    assert get_positive([]) == []
'''
WORKED_IDS = ["test_all_positive_gives_empty", "test_mixed_keeps_negatives", "test_all_negative_kept",
              "test_single_positive", "test_zero_and_positive", "test_large_mixed", "test_empty_list"]


@pytest.mark.parametrize("buggy,fixed", list(itertools.product(scoring.STATUSES, repeat=2)))
def test_every_status_pair_lands_in_exactly_one_cell(buggy: str, fixed: str) -> None:
    cell = scoring.outcome(buggy, fixed)
    expected = {(True, False): "misleading", (False, True): "effective", (True, True): "both_pass",
                (False, False): "both_fail"}[(buggy == "passed", fixed == "passed")]
    if "tampered" in (buggy, fixed):
        expected = "both_fail"  # tampered on either version: a pass on neither
    assert cell == expected


def test_an_unknown_status_is_a_non_pass_never_an_exception() -> None:
    """An unknown status does not make outcome() raise (the whole `score` run would exit without JSON)."""
    assert scoring.outcome("passed", "skipped") == "misleading"
    assert scoring.outcome("weird", "weird") == "both_fail"
    assert scoring.outcome("passed", "tampered") == scoring.outcome("tampered", "passed") == "both_fail"


def test_counts_and_rates_use_all_tests_as_denominator() -> None:
    counts = scoring.cell_counts(["misleading"] * 6 + ["both_pass"])
    assert counts == {"misleading": 6, "effective": 0, "both_pass": 1, "both_fail": 0}
    rates = scoring.cell_rates(counts)
    assert rates["misleading"] == pytest.approx(6 / 7) and sum(rates.values()) == pytest.approx(1.0)
    assert scoring.cell_rates(scoring.cell_counts([])) == dict.fromkeys(scoring.OUTCOMES, 0.0)


def test_worked_example_six_misleading_one_both_pass() -> None:
    scored = scoring.score_tests(WORKED_EXAMPLE, WORKED_IDS, BUGGY, FIXED, Sandbox(workers=2))
    assert [s.test_id for s in scored] == WORKED_IDS
    assert all(s.buggy_status == "passed" for s in scored)
    assert scoring.cell_counts(s.outcome for s in scored) == {"misleading": 6, "effective": 0, "both_pass": 1,
                                                              "both_fail": 0}
    assert [s.test_id for s in scored if s.outcome == "both_pass"] == ["test_empty_list"]
    first = scored[0]
    assert first.fixed_status == "failed" and "assert [1, 2, 3] == []" in first.fixed_detail
    # shown the fixed code, the model wrote the correcting assertion: an effective test
    effective = "from solution import get_positive\n\ndef test_fixed():\n    assert get_positive([1, 2, 3]) == [1, 2, 3]\n"
    (only,) = scoring.score_tests(effective, ["test_fixed"], BUGGY, FIXED, Sandbox(workers=2))
    assert only.outcome == "effective"
