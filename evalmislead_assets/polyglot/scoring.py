"""A JavaScript or Java test file -> its test ids (collected against both versions) and the four cells, as for Python.

The rules are Python's (execution/collection.py and execution/cells.py, reused): a file that does not load
against either version has zero tests; only ids collected against both versions are scored; each id runs
against the buggy and the fixed version in a process of its own; only ``passed`` counts as a pass.
"""

from __future__ import annotations

from evalmislead_assets.execution.cells import ScoredTest, outcome
from evalmislead_assets.execution.collection import ModuleTests, merge
from evalmislead_assets.polyglot import java_runner, js_runner
from evalmislead_assets.polyglot.problems import Problem, declared_name
from evalmislead_assets.polyglot.process import ProcessLimits
from evalmislead_assets.sandbox.host import Collected


def js_modules(problem: Problem) -> tuple[str, str]:
    """(buggy, fixed) solution.js modules of a JavaScript problem."""
    name = declared_name(problem)  # the dataset's entry_point misnames JavaScript/114
    return js_runner.solution_module(problem.buggy_code, name), js_runner.solution_module(problem.fixed_code, name)


def collect_js(source: str, buggy: str, fixed: str, limits: ProcessLimits | None = None) -> ModuleTests:
    if not source.strip():
        return ModuleTests([], False, "no code found in the answer")
    found = []
    for solution in (buggy, fixed):
        ids, error = js_runner.collect(source, solution, limits)
        found.append(Collected(ids, error, 0.0))
    tests = merge(found[0], found[1])
    if tests.error == "no tests collected (pytest found no test functions)":
        tests.error = "no tests collected (node:test found no tests)"
    return tests


def score_js(source: str, test_ids: list[str], buggy: str, fixed: str, limits: ProcessLimits | None = None,
             workers: int | None = None) -> list[ScoredTest]:
    """Every id against both versions (each in its own process) and its cell."""
    runs = js_runner.run_tests(source, buggy, test_ids, limits, workers)
    runs_fixed = js_runner.run_tests(source, fixed, test_ids, limits, workers)
    return [ScoredTest(t, b.status, f.status, outcome(b.status, f.status), b.detail, f.detail, b.seconds + f.seconds)
            for t, b, f in zip(test_ids, runs, runs_fixed)]


def collect_java(source: str, buggy: str, fixed: str, limits: ProcessLimits | None = None) -> ModuleTests:
    """The test class's JUnit ids against both versions (``buggy``/``fixed``: the ``Solution`` class source)."""
    if not source.strip():
        return ModuleTests([], False, "no code found in the answer")
    found = [Collected(*java_runner.collect(source, solution, limits), 0.0) for solution in (buggy, fixed)]
    tests = merge(found[0], found[1])
    if tests.error == "no tests collected (pytest found no test functions)":
        tests.error = "no tests collected (JUnit found no tests)"
    return tests


def score_java(source: str, test_ids: list[str], buggy: str, fixed: str, limits: ProcessLimits | None = None,
               workers: int | None = None) -> list[ScoredTest]:
    """Compile against each version once, then every id in its own JVM per version, and its cell."""
    verdicts = []
    for solution in (buggy, fixed):
        classes, error = java_runner.compile_version(source, solution)
        if error:
            verdicts.append([js_runner.Verdict("error", error, 0.0) for _ in test_ids])
        else:
            verdicts.append(java_runner.run_tests(source, classes, test_ids, limits, workers))
    return [ScoredTest(t, b.status, f.status, outcome(b.status, f.status), b.detail, f.detail, b.seconds + f.seconds)
            for t, b, f in zip(test_ids, verdicts[0], verdicts[1])]
