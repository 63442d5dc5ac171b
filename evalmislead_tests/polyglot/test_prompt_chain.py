"""End to end on real problems: the prompt, an answer written as the prompt asks, extraction, the real runner
(node, or a JDK with JUnit 5), and each test in its cell. Two problems per language."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from evalmislead_assets import settings
from evalmislead_assets.polyglot import java_runner
from evalmislead_assets.polyglot.extraction import extract_java, extract_js
from evalmislead_assets.polyglot.problems import declared_name, load_problems
from evalmislead_assets.polyglot.process import ProcessLimits
from evalmislead_assets.polyglot.prompts import TEST_TEMPLATE, generation_prompt, load_language_template
from evalmislead_assets.polyglot.scoring import collect_java, collect_js, js_modules, score_java, score_js

LIMITS = ProcessLimits(timeout_s=30.0)  # a loaded 2-core machine starts node and the JVM slowly
PREFIX = "[engine:junit-jupiter]/[class:SolutionTest]/"

# JavaScript/30: getPositive keeps the negatives; JavaScript/114: minSubArraySum starts from Math.min(nums), NaN
# (and the dataset's entry_point field misspells it minSubarraySum)
JS_TESTS = {
    30: ("""
test('keeps the positive numbers', () => {
  assert.deepStrictEqual(getPositive([-1, 2, -4, 5, 6]), [2, 5, 6]);
});
test('returns the negative numbers', () => {
  assert.deepStrictEqual(getPositive([-1, 2, -4]), [-1, -4]);
});
test('empty list', () => {
  assert.deepStrictEqual(getPositive([]), []);
});
""", {"keeps the positive numbers": "effective", "returns the negative numbers": "misleading",
      "empty list": "both_pass"}),
    114: ("""
describe('minSubArraySum', () => {
  it('finds the smallest sum', () => {
    assert.strictEqual(minSubArraySum([2, 3, 4, 1, 2, 4]), 1);
  });
  it('is NaN', () => {
    assert.ok(Number.isNaN(minSubArraySum([2, 3])));
  });
  it('takes one negative number', () => {
    assert.strictEqual(minSubArraySum([-1, -2, -3]), -1);
  });
});
""", {"minSubArraySum > finds the smallest sum": "effective", "minSubArraySum > is NaN": "misleading",
      "minSubArraySum > takes one negative number": "both_fail"}),
}

# Java/0: hasCloseElements without Math.abs; Java/30: getPositive keeps the negatives
JAVA_TESTS = {
    0: ("""
    @Test
    void farApartNumbersAreNotClose() {
        assertFalse(new Solution().hasCloseElements(Arrays.asList(1.0, 2.0, 3.0), 0.5));
    }

    @Test
    void increasingNumbersAreClose() {
        assertTrue(new Solution().hasCloseElements(Arrays.asList(1.0, 2.0, 3.0), 0.5));
    }

    @Test
    void closeNumbers() {
        assertTrue(new Solution().hasCloseElements(Arrays.asList(1.0, 2.8, 3.0, 4.0, 5.0, 2.0), 0.3));
    }

    @ParameterizedTest
    @ValueSource(doubles = {0.1, 0.5})
    void thresholds(double threshold) {
        assertFalse(new Solution().hasCloseElements(Arrays.asList(1.0, 2.0, 3.0), threshold));
    }
""", {"[method:farApartNumbersAreNotClose()]": "effective", "[method:increasingNumbersAreClose()]": "misleading",
      "[method:closeNumbers()]": "both_pass",
      "[test-template:thresholds(double)]/[test-template-invocation:#1]": "effective",
      "[test-template:thresholds(double)]/[test-template-invocation:#2]": "effective"}),
    30: ("""
    private final Solution solution = new Solution();

    @Test
    void keepsPositives() {
        assertEquals(Arrays.asList(2, 5, 6), solution.getPositive(Arrays.asList(-1, 2, -4, 5, 6)));
    }

    @Test
    void returnsNegatives() {
        assertEquals(Arrays.asList(-1, -4), solution.getPositive(Arrays.asList(-1, 2, -4, 5, 6)));
    }

    @Test
    void zeroIsDropped() {
        assertEquals(List.of(), solution.getPositive(List.of(0)));
    }
""", {"[method:keepsPositives()]": "effective", "[method:returnsNegatives()]": "misleading",
      "[method:zeroIsDropped()]": "both_pass"}),
}


def _answer(language: str, import_lines: str, tests: str) -> str:
    """An answer as the prompt asks: Markdown, prose around one fenced test file."""
    fence = "javascript" if language == "js" else "java"
    return (f"Here are unit tests that cover every branch.\n\n```{fence}\n{import_lines}\n{tests}```\n\n"
            "They exercise the normal cases and the edge cases.")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("idx", sorted(JS_TESTS))
def test_a_js_answer_in_the_prompts_format_lands_in_its_cells(idx: int) -> None:
    problem = load_problems("js")[idx]
    template = load_language_template("js", TEST_TEMPLATE, settings.prompts_dir())
    prompt = generation_prompt(problem, "buggy_code", None, template).text
    import_line = re.search(r"`(const \{ \w+ \} = require\('\./solution\.js'\);)`", prompt)
    assert import_line and declared_name(problem) in import_line.group(1)
    tests, expected = JS_TESTS[idx]
    head = ("const { test, describe, it } = require('node:test');\nconst assert = require('node:assert');\n"
            + import_line.group(1))
    extraction = extract_js(_answer("js", head, tests), declared_name(problem))
    assert extraction.how == "fence:javascript" and extraction.notes == []
    buggy, fixed = js_modules(problem)
    collected = collect_js(extraction.source, buggy, fixed, LIMITS)
    assert collected.import_ok and sorted(collected.test_ids) == sorted(expected)
    scored = score_js(extraction.source, collected.test_ids, buggy, fixed, LIMITS, workers=2)
    assert {s.test_id: s.outcome for s in scored} == expected


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isfile(java_runner.JUNIT_JAR), reason="junit5 is not installed (scripts/bootstrap.sh)")
@pytest.mark.parametrize("idx", sorted(JAVA_TESTS))
def test_a_java_answer_in_the_prompts_format_lands_in_its_cells(idx: int) -> None:
    problem = load_problems("java")[idx]
    template = load_language_template("java", TEST_TEMPLATE, settings.prompts_dir())
    prompt = generation_prompt(problem, "fixed_code", None, template).text
    assert f"`new Solution().{declared_name(problem)}(...)`" in prompt and "JUnit 5" in prompt
    tests, expected = JAVA_TESTS[idx]
    head = ("package com.example;\n\nimport org.junit.jupiter.api.Test;\nimport org.junit.jupiter.params.ParameterizedTest;\n"
            "import org.junit.jupiter.params.provider.ValueSource;\nimport java.util.*;\n"
            "import static org.junit.jupiter.api.Assertions.*;\n\nclass SolutionTest {")
    extraction = extract_java(_answer("java", head, tests + "}\n"))
    assert extraction.how == "fence:java" and "removed_package" in extraction.notes
    collected = collect_java(extraction.source, problem.buggy_code, problem.fixed_code, LIMITS)
    assert collected.import_ok, collected.error
    assert sorted(t.removeprefix(PREFIX) for t in collected.test_ids) == sorted(expected)
    scored = score_java(extraction.source, collected.test_ids, problem.buggy_code, problem.fixed_code, LIMITS, 2)
    assert {s.test_id.removeprefix(PREFIX): s.outcome for s in scored} == expected
