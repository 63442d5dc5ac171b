"""The dataset's oracle per problem and version: fixed passes, buggy fails; the excluded problems and why."""

from __future__ import annotations

import pytest

from evalmislead_assets.polyglot.oracle import run_oracle, validate
from evalmislead_assets.polyglot.problems import load_problems

# Every excluded problem and the reason (docs/languages.md lists them).
JS_EXCLUDED = {"JavaScript/162": "Cannot find module 'js-md5'"}  # the dataset's test needs an npm package
JAVA_EXCLUDED: dict[str, str] = {}


@pytest.mark.parametrize("language", ["js", "java"])
def test_problem_0_fixed_passes_and_buggy_fails(language: str) -> None:
    [v] = validate(load_problems(language)[:1], workers=2)
    assert v.fixed.passed, v.fixed.detail
    assert not v.buggy.passed and "Assert" in v.buggy.detail
    assert v.valid and v.reason == ""


def test_an_early_exit_is_no_pass() -> None:
    """The mark after the dataset's test is the evidence: exiting 0 before it is a fail."""
    result = run_oracle("js", "const f = () => 1;", "process.exit(0);")
    assert not result.passed
    result = run_oracle("java", "class Solution {}", "public class Main { public static void main(String[] a) "
                        "{ System.exit(0); } }")
    assert not result.passed


def test_a_version_that_never_ends_times_out() -> None:
    result = run_oracle("js", "const f = () => { for (;;) {} };", "f();", timeout_s=2)
    assert not result.passed and result.detail.startswith("timeout")


@pytest.mark.slow
@pytest.mark.parametrize("language,excluded", [("js", JS_EXCLUDED), ("java", JAVA_EXCLUDED)])
def test_all_164_oracles_validate_but_the_listed_ones(language: str, excluded: dict[str, str]) -> None:
    results = validate(load_problems(language))
    invalid = {v.task_id: v.reason for v in results if not v.valid}
    assert set(invalid) == set(excluded), invalid
    for task_id, why in excluded.items():
        assert why in invalid[task_id]
    assert sum(v.valid for v in results) == 164 - len(excluded)


@pytest.mark.slow
def test_java_batch_agrees_with_one_jvm_per_version() -> None:
    """Problems 8-11 (Java/10's buggy version never ends): the same verdicts with and without the batch JVM."""
    problems = load_problems("java")[8:12]
    batched = validate(problems, workers=2)
    alone = validate(problems, workers=2, java_batch=False)
    assert [(v.task_id, v.buggy.passed, v.fixed.passed) for v in batched] == \
        [(v.task_id, v.buggy.passed, v.fixed.passed) for v in alone]
    assert all(v.valid for v in batched)
    assert alone[2].task_id == "Java/10" and alone[2].buggy.detail.startswith("timeout")
