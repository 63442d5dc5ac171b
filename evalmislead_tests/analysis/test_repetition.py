"""Repetition loops as data: exact-copy test bodies, loop answers, rates with copies counted once."""

from pathlib import Path

import pandas as pd
import pytest

from evalmislead_assets import settings
from evalmislead_assets.analysis import repetition
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.analysis.repetition import (
    function_keys,
    per_answer_repeats,
    per_test_repeats,
    repetition_rates,
    tail_repeating,
)
from evalmislead_assets.report.sections.repetition import render

LOOPING = '''\
from solution import fib


def test_one():
    assert fib(1) == 1


def test_two():
    assert   fib(1)  ==  1


def test_three():
    assert fib(2) == 1


def test_four():
    assert fib(1) == 1
'''

PARAM = '''\
import pytest
from solution import f


@pytest.mark.parametrize("x", [1, 2])
def test_a(x):
    assert f(x)


class TestB:
    def test_b(self):
        assert f(3)

    def test_c(self):
        assert f(3)
'''


def frames():
    key = {"condition": "buggy_code", "thinking": "off"}
    gt = pd.DataFrame([
        {**key, "task_id": "Python/55", "source": LOOPING,
         "test_ids": ["t.py::test_one", "t.py::test_two", "t.py::test_three", "t.py::test_four"]},
        {**key, "task_id": "Python/7", "source": PARAM,
         "test_ids": ["t.py::test_a[1]", "t.py::test_a[2]", "t.py::TestB::test_b", "t.py::TestB::test_c"]},
    ])
    outcomes = pd.DataFrame([
        {**key, "task_id": "Python/55", "problem_idx": 55, "test_id": t, "outcome": o}
        for t, o in (("t.py::test_four", "misleading"), ("t.py::test_one", "misleading"),
                     ("t.py::test_two", "misleading"), ("t.py::test_three", "both_pass"))
    ] + [
        {**key, "task_id": "Python/7", "problem_idx": 7, "test_id": t, "outcome": o}
        for t, o in (("t.py::test_a[1]", "effective"), ("t.py::test_a[2]", "effective"),
                     ("t.py::TestB::test_b", "misleading"), ("t.py::TestB::test_c", "misleading"))
    ])
    loop_text = "```python\n" + LOOPING + "\n".join(f"def test_fib_{i}():\n    assert fib({i}) == 1\n" for i in range(20))
    gens = pd.DataFrame([
        {**key, "task_id": "Python/55", "problem_idx": 55, "finish_reason": "length", "response_text": loop_text},
        {**key, "task_id": "Python/7", "problem_idx": 7, "finish_reason": "stop", "response_text": PARAM},
        {**key, "task_id": "Python/9", "problem_idx": 9, "finish_reason": "length", "response_text": "x = 1\n" * 40},
    ])
    return outcomes, gt, gens


def test_copies_are_found_in_file_order_with_whitespace_normalised():
    outcomes, gt, _ = frames()
    r = per_test_repeats(outcomes, gt).set_index("test_id")
    assert pd.isna(r.loc["t.py::test_one", "duplicate_of"])
    assert r.loc["t.py::test_two", "duplicate_of"] == "t.py::test_one"  # only the spacing differs
    assert r.loc["t.py::test_four", "duplicate_of"] == "t.py::test_one"
    assert pd.isna(r.loc["t.py::test_three", "duplicate_of"])
    assert r.loc["t.py::test_one", "body_sha256"] == r.loc["t.py::test_four", "body_sha256"]
    # a parametrized test's instances are not copies; a method with another's body is
    assert pd.isna(r.loc["t.py::test_a[2]", "duplicate_of"])
    assert r.loc["t.py::TestB::test_c", "duplicate_of"] == "t.py::TestB::test_b"
    assert list(r[r["task_id"] == "Python/55"].index) == ["t.py::test_one", "t.py::test_two", "t.py::test_three",
                                                          "t.py::test_four"]


def test_function_keys_keep_the_last_definition_and_ignore_bad_source():
    keys = function_keys("def test_x():\n    assert 1\n\ndef test_x():\n    assert 2\n")
    assert keys == {"test_x": ("", "assert 2")}
    assert function_keys("def (:") == {} and function_keys(None) == {}


def test_loop_needs_the_cap_and_repetition():
    assert tail_repeating("\n".join(f"assert fib({i}) == 1" for i in range(30)))  # digits masked
    assert not tail_repeating("\n".join(f"line {chr(65 + i)}{chr(97 + i)}" for i in range(26)))
    assert not tail_repeating("a\na\na")  # too short to tell
    outcomes, gt, gens = frames()
    a = per_answer_repeats(per_test_repeats(outcomes, gt), gens).set_index("task_id")
    assert (a.loc["Python/55", "n_tests"], a.loc["Python/55", "n_duplicates"], a.loc["Python/55", "loop"]) == (4, 2, True)
    assert a.loc["Python/7", "n_duplicates"] == 1 and not a.loc["Python/7", "loop"]  # a copy, but it stopped
    assert a.loc["Python/9", "n_tests"] == 0 and a.loc["Python/9", "loop"]  # capped with a repeating tail


def test_rates_with_copies_once_and_top_problem_share():
    outcomes, gt, gens = frames()
    plan = load_plan(settings.analysis_plan_path())
    t = per_test_repeats(outcomes, gt)
    r = repetition_rates(t, per_answer_repeats(t, gens), plan).iloc[0]
    assert (r.n_tests, r.n_misleading, r.n_effective) == (8, 5, 2)
    assert r.misleading_rate == pytest.approx(5 / 8)  # the pooled rate, unchanged
    # copies dropped: test_two, test_four, TestB::test_c -> 5 tests, 2 misleading, 2 effective
    assert (r.n_tests_distinct, r.n_misleading_distinct, r.n_effective_distinct) == (5, 2, 2)
    assert r.misleading_rate_distinct == pytest.approx(0.4) and r.effective_rate_distinct == pytest.approx(0.4)
    assert (r.top_misleading_task, r.top_misleading_n, r.top_misleading_share) == ("Python/55", 3, pytest.approx(0.6))
    assert (r.top_effective_task, r.top_effective_n, r.top_effective_share) == ("Python/7", 2, 1.0)
    # Python/9 is a loop without tests: not among the answers with tests cut in a loop
    assert (r.n_loop_answers, r.n_tests_in_loops, r.n_misleading_in_loops, r.n_effective_in_loops) == (1, 4, 3, 0)
    text = "\n".join(render({"repetition_rates": repetition_rates(t, per_answer_repeats(t, gens), plan)}))
    assert "62.5 % (5/8)" in text and "40.0 % (2/5)" in text and "Python/55: 3 (60.0 %)" in text
    assert "no rows" in "\n".join(render({"repetition_rates": pd.DataFrame()}))


def test_empty_inputs_give_empty_tables():
    plan = load_plan(settings.analysis_plan_path())
    t = per_test_repeats(pd.DataFrame(), pd.DataFrame())
    assert t.empty and "duplicate_of" in t.columns
    a = per_answer_repeats(t, pd.DataFrame())
    assert a.empty
    assert repetition_rates(t, a, plan).empty


def test_a_loop_inside_one_line_or_a_growing_list_repeats():
    one_line = "x = [" + ", ".join(["'a', 'b', '<', '>'"] * 200)
    growing = "\n".join(f"    assert f([{', '.join(str(-i) for i in range(k))}]) == True" for k in range(3, 12))
    assert tail_repeating(one_line) and tail_repeating(growing * 3)
    ordinary = Path(repetition.__file__).read_text()[:4000]  # 4,000 characters of ordinary code, no loop
    assert not tail_repeating(ordinary)
