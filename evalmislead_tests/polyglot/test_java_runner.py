"""The Java runner on a real JDK and JUnit 5: collection, the four cells, and the hostile corpus."""

from __future__ import annotations

import os

import pytest

from evalmislead_assets.polyglot import java_runner
from evalmislead_assets.polyglot.process import ProcessLimits
from evalmislead_assets.polyglot.scoring import collect_java, score_java
from evalmislead_tests.polyglot.java_corpus import BUGGY, FIXED, HONEST, HOSTILE

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.isfile(java_runner.JUNIT_JAR),
                                                   reason="junit5 is not installed (scripts/bootstrap.sh)")]
LIMITS = ProcessLimits(timeout_s=30.0)  # a loaded 2-core machine starts a JVM slowly
PREFIX = "[engine:junit-jupiter]/[class:{}]/"


def test_honest_tests_land_in_their_cells() -> None:
    tests = collect_java(HONEST, BUGGY, FIXED, LIMITS)
    prefix = PREFIX.format("SolutionTest")
    assert tests.import_ok and sorted(t.removeprefix(prefix) for t in tests.test_ids) == [
        "[method:bothFail()]", "[method:bothPass()]", "[method:effective()]", "[method:misleading()]",
        "[test-template:many(int)]/[test-template-invocation:#1]",
        "[test-template:many(int)]/[test-template-invocation:#2]"]
    scored = {s.test_id.removeprefix(prefix): s for s in score_java(HONEST, tests.test_ids, BUGGY, FIXED, LIMITS, 2)}
    assert scored["[method:misleading()]"].outcome == "misleading"
    assert scored["[method:effective()]"].outcome == "effective"
    assert scored["[method:bothPass()]"].outcome == "both_pass"
    assert scored["[method:bothFail()]"].outcome == "both_fail"
    assert "IllegalStateException: boom" in scored["[method:bothFail()]"].buggy_detail
    for n in (1, 2):  # each invocation is a test: inc(0) and inc(5) are off by one on buggy
        many = scored[f"[test-template:many(int)]/[test-template-invocation:#{n}]"]
        assert many.outcome == "effective" and "AssertionFailedError" in many.buggy_detail


def test_collection_runs_no_test_body() -> None:
    """Collecting expands templates but runs no body: a body that would hang or exit does not."""
    source = HONEST.replace("@Test void bothPass() {", "@Test void bothPass() { System.exit(3);")
    ids, error = java_runner.collect(source.replace("assertEquals(x + 1", "while (x >= 0) { } assertEquals(x + 1"),
                                     FIXED, LIMITS)
    assert error is None and len(ids) == 6


def test_a_class_that_does_not_compile_has_zero_tests() -> None:
    tests = collect_java(HONEST.replace("inc(1) > 1", "inc(\"1\") > 1"), BUGGY, FIXED, LIMITS)
    assert tests.test_ids == [] and not tests.import_ok and "does not compile" in (tests.error or "")


def test_hostile_tests_never_pass_without_positive_evidence() -> None:
    outside = "/tmp/evalmislead-hostile-java"
    if os.path.exists(outside):
        os.remove(outside)
    classes, error = java_runner.compile_version(HOSTILE, FIXED)
    assert error is None
    ids, error = java_runner.collect(HOSTILE, FIXED, LIMITS)
    assert error is None and len(ids) == 9
    verdicts = java_runner.run_tests(HOSTILE, classes, ids, ProcessLimits(timeout_s=20.0), workers=2)
    got = {i.split("[method:")[1].split("(")[0]: v for i, v in zip(ids, verdicts)}
    status = {k: v.status for k, v in got.items()}
    assert status["exitZero"] == "crashed" and status["haltZero"] == "crashed"
    assert status["infiniteLoop"] == "timeout"
    assert status["threadLeftRunning"] == "passed"  # an honest pass; the thread dies with the JVM
    assert status["writeOutside"] == "failed" and "Read-only file system" in got["writeOutside"].detail
    assert status["hugeOutput"] in ("crashed", "timeout")
    assert status["reflectOnRunner"] == "failed"  # its forged lines carry the wrong nonce
    assert status["readOwnMemory"] == "failed"  # /proc is hidden
    assert status["network"] == "failed"
    assert not os.path.exists(outside)
