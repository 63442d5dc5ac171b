"""The JS runner on real node: collection, the four cells, and the hostile corpus (positive evidence only)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from evalmislead_assets.polyglot import js_runner
from evalmislead_assets.polyglot.process import ProcessLimits
from evalmislead_assets.polyglot.scoring import collect_js, score_js
from evalmislead_tests.polyglot.js_corpus import BUGGY, ENTRY, FIXED, HONEST, HOSTILE

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
LIMITS = ProcessLimits(timeout_s=20.0)  # a loaded 2-core machine starts node slowly


def _modules() -> tuple[str, str]:
    return js_runner.solution_module(BUGGY, ENTRY), js_runner.solution_module(FIXED, ENTRY)


def test_collection_lists_ids_by_path_without_running_bodies() -> None:
    buggy, fixed = _modules()
    tests = collect_js(HONEST, buggy, fixed, LIMITS)
    assert tests.import_ok and tests.error is None
    assert tests.test_ids == ["misleading: locks the bug in", "effective: catches the bug", "suite > both pass",
                              "suite > both fail", "error: a hook fails", "subtests belong to their parent"]


def test_a_file_that_does_not_load_has_zero_tests() -> None:
    buggy, fixed = _modules()
    tests = collect_js("const x = require('./missing.js');\nrequire('node:test').test('t', () => {});", buggy, fixed,
                       LIMITS)
    assert tests.test_ids == [] and not tests.import_ok and "Cannot find module" in (tests.error or "")


def test_honest_tests_land_in_their_cells() -> None:
    buggy, fixed = _modules()
    ids = collect_js(HONEST, buggy, fixed, LIMITS).test_ids
    scored = {s.test_id: s for s in score_js(HONEST, ids, buggy, fixed, LIMITS, workers=2)}
    assert scored["misleading: locks the bug in"].outcome == "misleading"
    assert scored["effective: catches the bug"].outcome == "effective"
    assert scored["suite > both pass"].outcome == "both_pass"
    both_fail = scored["suite > both fail"]
    assert (both_fail.outcome, both_fail.buggy_status) == ("both_fail", "failed")
    assert "AssertionError" in both_fail.buggy_detail
    assert scored["subtests belong to their parent"].outcome == "effective"
    hook = scored["error: a hook fails"]
    assert hook.buggy_status in ("error", "failed") and hook.outcome == "both_fail"


@pytest.mark.slow
def test_hostile_tests_never_pass_without_positive_evidence(tmp_path) -> None:
    buggy, fixed = _modules()
    outside = "/tmp/evalmislead-hostile-js"
    if os.path.exists(outside):
        os.remove(outside)
    ids = collect_js(HOSTILE, buggy, fixed, LIMITS).test_ids
    assert len(ids) == 13
    limits = ProcessLimits(timeout_s=15.0)
    fixed_runs = dict(zip(ids, js_runner.run_tests(HOSTILE, fixed, ids, limits, workers=2)))
    status = {t: v.status for t, v in fixed_runs.items()}
    assert status["exit zero"] == "crashed"
    assert status["exit zero later"] == "failed"
    assert status["infinite loop"] == "timeout"
    assert status["timer left running"] == "passed"  # passed honestly; the timer died with the run
    assert status["write outside"] == "failed" and "EROFS" in fixed_runs["write outside"].detail
    assert status["write home"] == "passed"  # its own work folder is writable
    assert status["huge output"] in ("crashed", "timeout")
    assert status["patch the writer"] == "failed"
    assert status["forge lines"] in ("failed", "crashed")  # its writes to node's own descriptors may kill node
    assert status["reload the harness"] == "failed"
    assert status["read the nonce from memory"] == "failed"
    assert fixed_runs["read the nonce from memory"].detail.count("ENOENT") == 1  # /proc is hidden
    assert status["network"] == "failed"
    assert status["spawn a daemon"] == "passed"  # honest pass; the daemon dies with the PID namespace
    assert not os.path.exists(outside)
    leftover = subprocess.run(["pgrep", "-f", "sleep 600"], capture_output=True, text=True).stdout.split()
    assert leftover == [], "a test's daemon outlived its run"


def test_names_with_regex_characters_and_deep_nesting_select_exactly_one_test() -> None:
    source = ("const { test, describe } = require('node:test');\nconst assert = require('node:assert');\n"
              "test('adds (1 + 2) = 3 #x? [a]{2} $ ^ | \\\\ / é', () => { assert.ok(true); });\n"
              "describe('outer', () => { describe('inner', () => { test('deep', () => { assert.ok(false); }); }); });\n"
              "test('deep', () => { assert.ok(true); });\n")
    solution = js_runner.solution_module("const f = () => 1;", "f")
    ids, error = js_runner.collect(source, solution, LIMITS)
    assert error is None and ids == ["adds (1 + 2) = 3 #x? [a]{2} $ ^ | \\ / é", "outer > inner > deep", "deep"]
    verdicts = js_runner.run_tests(source, solution, ids, LIMITS, workers=2)
    assert [v.status for v in verdicts] == ["passed", "failed", "passed"]  # same-named 'deep' tests kept apart
