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
    elif buggy.startswith("limit:") or fixed.startswith("limit:"):
        expected = "limit"  # a runner cap decided the run on one version: never misleading or effective
    assert cell == expected


def test_an_unknown_status_is_a_non_pass_never_an_exception() -> None:
    """An unknown status does not make outcome() raise (the whole `score` run would exit without JSON)."""
    assert scoring.outcome("passed", "skipped") == "misleading"
    assert scoring.outcome("weird", "weird") == "both_fail"
    assert scoring.outcome("passed", "tampered") == scoring.outcome("tampered", "passed") == "both_fail"


def test_counts_and_rates_use_all_tests_as_denominator() -> None:
    counts = scoring.cell_counts(["misleading"] * 6 + ["both_pass"])
    assert counts == {"misleading": 6, "effective": 0, "both_pass": 1, "both_fail": 0, "limit": 0}
    rates = scoring.cell_rates(counts)
    assert rates["misleading"] == pytest.approx(6 / 7) and sum(rates.values()) == pytest.approx(1.0)
    assert scoring.cell_rates(scoring.cell_counts([])) == dict.fromkeys(scoring.CATEGORIES, 0.0)
    with_limit = scoring.cell_rates(scoring.cell_counts(["misleading", "limit"]))
    assert with_limit["misleading"] == with_limit["limit"] == pytest.approx(0.5)  # a limit test is in the denominator


# A test that passes where plain pytest passes it on both versions, but on the fixed version only does
# something over one of the runner's caps: it prints ~21 MB (the output cap is 16 MiB) or builds ~1.1 GB (the
# memory cap is 1 GiB). The cap, not an assertion, ends the fixed run: never a misleading test.
OVER_A_CAP = '''
from solution import get_positive


def test_prints_a_lot_on_fixed():
    if get_positive([-1]) == []:
        print("x" * 21_000_000)
    assert True


def test_builds_a_lot_on_fixed():
    if get_positive([-1]) == []:
        big = [0] * 140_000_000
        assert len(big) == 140_000_000


def test_writes_a_big_file_on_fixed():
    if get_positive([-1]) == []:
        with open("big.bin", "wb") as fh:
            fh.write(b"\\0" * (20 << 20))


def test_asserts_the_bug():
    assert get_positive([-1]) == [-1]
'''


def test_a_run_ended_by_a_runner_cap_is_a_limit_never_misleading() -> None:
    ids = ["test_prints_a_lot_on_fixed", "test_builds_a_lot_on_fixed", "test_writes_a_big_file_on_fixed",
           "test_asserts_the_bug"]
    scored = {s.test_id: s for s in scoring.score_tests(OVER_A_CAP, ids, BUGGY, FIXED, Sandbox(workers=2))}
    got = {t: (s.buggy_status, s.fixed_status, s.outcome) for t, s in scored.items()}
    assert got == {
        "test_prints_a_lot_on_fixed": ("passed", "limit:output", "limit"),
        "test_builds_a_lot_on_fixed": ("passed", "limit:memory", "limit"),
        "test_writes_a_big_file_on_fixed": ("passed", "limit:fsize", "limit"),
        "test_asserts_the_bug": ("passed", "failed", "misleading"),  # an assertion still decides as before
    }, {t: s.fixed_detail for t, s in scored.items()}
    assert "File too large" in scored["test_prints_a_lot_on_fixed"].fixed_detail
    assert "MemoryError" in scored["test_builds_a_lot_on_fixed"].fixed_detail
    assert scoring.cell_counts(s.outcome for s in scored.values()) == {
        "misleading": 1, "effective": 0, "both_pass": 0, "both_fail": 0, "limit": 3}


def test_a_timeout_stays_the_protocols_non_pass() -> None:
    assert scoring.outcome("passed", "timeout") == "misleading"
    assert scoring.outcome("limit:memory", "passed") == "limit"
    assert scoring.outcome("tampered", "limit:output") == "both_fail"  # tampering is caught first


def test_worked_example_six_misleading_one_both_pass() -> None:
    scored = scoring.score_tests(WORKED_EXAMPLE, WORKED_IDS, BUGGY, FIXED, Sandbox(workers=2))
    assert [s.test_id for s in scored] == WORKED_IDS
    assert all(s.buggy_status == "passed" for s in scored)
    assert scoring.cell_counts(s.outcome for s in scored) == {"misleading": 6, "effective": 0, "both_pass": 1,
                                                              "both_fail": 0, "limit": 0}
    assert [s.test_id for s in scored if s.outcome == "both_pass"] == ["test_empty_list"]
    first = scored[0]
    assert first.fixed_status == "failed" and "assert [1, 2, 3] == []" in first.fixed_detail
    # shown the fixed code, the model wrote the correcting assertion: an effective test
    effective = "from solution import get_positive\n\ndef test_fixed():\n    assert get_positive([1, 2, 3]) == [1, 2, 3]\n"
    (only,) = scoring.score_tests(effective, ["test_fixed"], BUGGY, FIXED, Sandbox(workers=2))
    assert only.outcome == "effective"
