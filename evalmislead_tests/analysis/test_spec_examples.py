"""The execution judge of spec labels: reading a spec's examples, labelling from their cells, running them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from evalmislead_assets.analysis.spec_examples import (
    NO_EXAMPLES,
    NO_SIDE,
    example_module,
    extract_examples,
    judge_by_execution,
    label_from_outcomes,
    read_value,
)
from evalmislead_assets.llm.prompts import extract_spec
from evalmislead_assets.sandbox.host import Limits, Sandbox
from evalmislead_assets.store.hashing import sha256_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "evalmislead_tests" / "data" / "spec_labels_hand.json"
PACK = ROOT / "evalmislead_assets" / "data" / "answers" / "qwen2.5-coder-1.5b-full"
DATASET = ROOT / "evalmislead_assets" / "data" / "humanevalpack_python.jsonl"

BUGGY = "def get_positive(l: list):\n    return [e for e in l if e < 0]\n"
FIXED = "def get_positive(l: list):\n    return [e for e in l if e > 0]\n"


def _calls(spec: str, name: str = "f") -> list[tuple[tuple, dict, object]]:
    return [(e.args, dict(e.kwargs), e.expected) for e in extract_examples(spec, name)]


# ---------------------------------------------------------------- the forms an example takes


def test_arrow_equals_and_assert_forms():
    spec = "Examples:\n- f([1, 2]) -> 3\n* f('a', k=2) == 'aa'\nassert f(None) == {'x': (1, 2)}\n1. f(2) => 4.5\n"
    assert _calls(spec) == [(([1, 2],), {}, 3), (("a",), {"k": 2}, "aa"), ((None,), {}, {"x": (1, 2)}),
                            ((2,), {}, 4.5)]


def test_returns_sentences():
    spec = ("f(1) returns 2\n- f(2) should return [2]\n`f(3)` returns `'x'`.\n"
            "f(4)  # Returns 'four'\nf(5) will return True, since 5 is odd\n")
    assert _calls(spec) == [((1,), {}, 2), ((2,), {}, [2]), ((3,), {}, "x"), ((4,), {}, "four"), ((5,), {}, True)]


def test_doctest_output_on_the_following_lines_and_comparison_form():
    spec = ">>> f([1,\n...\n>>> f(1)\n[1,\n 2]\n\n>>> f(2) == 3\nTrue\n>>> f(3)\n>>> f(4)\n'a'\n```"
    # f(3) has no output line before the next prompt: no example
    assert _calls(spec) == [((1,), {}, [1, 2]), ((2,), {}, 3), ((4,), {}, "a")]


def test_value_on_the_next_line():
    spec = "f([4.0, 3.5])\n# Output: ['A+', 'A']\n\nf(0)\n\nf(1)\n-> 7"
    assert _calls(spec) == [(([4.0, 3.5],), {}, ["A+", "A"]), ((1,), {}, 7)]


def test_an_explanation_after_the_value_is_not_part_of_it():
    spec = ("f([10, 43]) -> 10 (the largest prime is 43, and 4 + 3 = 7)\n"
            "f(1) -> 'b' because it is next\nf(2) -> [] - nothing left\nf(3) -> 0, as expected\n")
    assert _calls(spec) == [(([10, 43],), {}, 10), ((1,), {}, "b"), ((2,), {}, []), ((3,), {}, 0)]


def test_only_the_entry_point_and_repeats_once():
    spec = "g(1) -> 2\nf(1) -> 2\nf(1) -> 2\nprint(f(1))\nf(1) -> 3\n"
    assert _calls(spec) == [((1,), {}, 2), ((1,), {}, 3)]


# ---------------------------------------------------------------- what is refused


@pytest.mark.parametrize("line", [
    "f(x) -> 3",                      # an argument that is a name
    "f(1) -> y",                      # an expected value that is a name
    "f(123) returns 18 * 123 = 2214",  # arithmetic, not a literal
    "f(*[1, 2]) -> 3",                # unpacking
    "f(**{'a': 1}) -> 3",
    "f(1) -> 1, 2",                   # a bare tuple: a value followed by a comma, or a tuple?
    "f(1) returns 1, 2 and more",
    "f(1) -> 1.5.3",                  # not a number
    "f(1) -> 1e999",                  # reads as inf, which repr cannot write back as a literal
    "f(\"abc) -> 'x'",                # cut at the token cap
    "f(1) -> [1, 2",
    "f(1) -> 2 3",
    "f(1) and f(2) -> 3",
    "f(1)",                           # no value
])
def test_refused(line):
    assert extract_examples(line, "f") == []


def test_nothing_in_the_spec_runs_in_this_process(tmp_path):
    mark = tmp_path / "ran"
    payload = f"__import__('pathlib').Path({str(mark)!r}).touch()"
    spec = f"f({payload}) -> 1\nf(1) -> {payload}\n>>> f(1)\n{payload}\n>>> {payload}\n1\n"
    assert extract_examples(spec, "f") == []
    assert read_value(payload) == (False, None)
    assert not mark.exists()


def test_module_is_built_from_the_values_repr():
    examples = extract_examples("f('a\\'b', n=-2) -> {1: (2.5, None)}\nf(b'x') -> {1, 2}", "f")
    source, ids = example_module(examples, "f")
    assert ids == ["test_example_0", "test_example_1"]
    assert "assert _candidate(\"a'b\", n=-2) == {1: (2.5, None)}" in source
    assert "assert _candidate(b'x') == {1, 2}" in source
    compile(source, "test_generated.py", "exec")


# ---------------------------------------------------------------- the label from the examples' cells


@pytest.mark.parametrize("outcomes,category", [
    (["misleading", "both_pass"], "transcribes_bug"),
    (["effective", "effective", "both_fail"], "restores_correct"),
    (["effective", "both_pass", "both_fail"], "restores_correct"),  # one example, not outweighed
    (["misleading", "effective"], None),
    (["both_pass", "both_fail", "limit"], None),
    ([], None),
    (["effective", "both_fail", "both_fail"], None),  # a lone example among a majority agreeing with neither
    (["misleading", "both_fail", "limit"], None),
])
def test_label_from_outcomes(outcomes, category):
    cat, note = label_from_outcomes(outcomes)
    assert cat == category
    assert (note is None) == (category is not None)


def test_label_notes_say_why():
    assert label_from_outcomes([]) == (None, NO_EXAMPLES)
    assert label_from_outcomes(["both_pass", "both_fail"]) == (None, NO_SIDE)
    assert "2 agree with the buggy version only, 1 with the fixed" in str(
        label_from_outcomes(["misleading", "misleading", "effective"])[1])
    assert "another function" in str(label_from_outcomes(["effective", "both_fail", "both_fail"])[1])


# ---------------------------------------------------------------- running them in the sandbox


def test_judge_runs_examples_against_both_versions(tmp_path):
    mark = tmp_path / "ran"
    specs = [
        "Returns the negative numbers.\n- get_positive([1, -2]) returns [-2]\n- get_positive([]) returns []",
        "Returns the positive numbers.\n>>> get_positive([1, -2, 3])\n[1, 3]\n>>> get_positive([-1])\n[]",
        "Returns some numbers. No examples.",
        f"- get_positive(__import__('pathlib').Path({str(mark)!r}).touch()) -> []",
        "- get_positive([1, -2]) -> [1]\n- get_positive([-2]) -> [-2]",
    ]
    labels = judge_by_execution([(s, "get_positive", BUGGY, FIXED) for s in specs],
                                Sandbox(Limits(timeout_s=5.0), workers=2))
    assert [x.category for x in labels] == ["transcribes_bug", "restores_correct", None, None, None]
    first = labels[0]
    assert (first.n_examples, first.n_buggy_only, first.n_fixed_only, first.n_both_pass) == (2, 1, 0, 1)
    assert first.transcribes_bug is True and first.states_correct is None
    assert labels[1].transcribes_bug is False and labels[1].states_correct is True
    assert [(e["buggy"], e["fixed"]) for e in labels[1].examples] == [("failed", "passed")] * 2
    assert labels[2].note == NO_EXAMPLES and labels[3].note == NO_EXAMPLES
    assert labels[4].note is not None and "both sides" in labels[4].note
    assert not mark.exists()


# ---------------------------------------------------------------- the hand-checked recorded specs


def _fixture() -> list[dict]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))["specs"]


def disagreements(hand: dict[str, str], judged: dict[str, str | None]) -> list[str]:
    """Task ids where the execution judge gives a label and it differs from the hand label."""
    return [t for t, cat in judged.items() if cat is not None and cat != hand[t]]


def test_disagreements_are_found():
    hand = {"a": "neither", "b": "restores_correct", "c": "transcribes_bug"}
    assert disagreements(hand, {"a": None, "b": "restores_correct", "c": "transcribes_bug"}) == []
    assert disagreements(hand, {"a": "restores_correct", "b": None, "c": "restores_correct"}) == ["a", "c"]


def test_fixture_holds_the_recorded_specs():
    recorded = {}
    for shard in sorted(PACK.glob("answers-*.jsonl.gz")):
        with gzip.open(shard, "rt", encoding="utf-8") as fh:
            for line in fh:
                a = json.loads(line)
                if a["asset"] == "model_specs":
                    text = json.loads(a["response_json"])["choices"][0]["message"].get("content") or ""
                    recorded[(a["thinking"], a["task_id"])] = extract_spec(text)
    rows = _fixture()
    assert len(rows) == 30 and len({r["task_id"] for r in rows}) == 30
    assert sum(not r["held_out"] for r in rows) == 20  # the random sample; the rest checked the rule afterwards
    for r in rows:
        assert r["spec_text"] == recorded[(r["thinking"], r["task_id"])], r["task_id"]
        assert r["spec_sha256"] == sha256_text(r["spec_text"])
        assert r["hand_category"] in ("transcribes_bug", "restores_correct", "neither") and r["reason"]


@pytest.mark.slow
def test_execution_judge_agrees_with_the_hand_labels():
    problems = {}
    for line in DATASET.read_text(encoding="utf-8").splitlines():
        p = json.loads(line)
        problems[p["task_id"]] = p
    rows = _fixture()
    jobs = []
    for r in rows:
        p = problems[r["task_id"]]
        jobs.append((r["spec_text"], p["entry_point"], p["declaration"] + p["buggy_solution"],
                     p["declaration"] + p["canonical_solution"]))
    labels = judge_by_execution(jobs, Sandbox(Limits(timeout_s=2.0), workers=2))
    judged = {r["task_id"]: x.category for r, x in zip(rows, labels)}
    assert disagreements({r["task_id"]: r["hand_category"] for r in rows}, judged) == []
    # the judge labels a good part of the sample, on both sides
    sample = {r["task_id"] for r in rows if not r["held_out"]}
    assert sum(judged[t] == "transcribes_bug" for t in sample) >= 2
    assert sum(judged[t] == "restores_correct" for t in sample) >= 8
    assert all(judged[r["task_id"]] is not None for r in rows if r["held_out"])
