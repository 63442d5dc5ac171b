"""The JS and Java hostile corpora as a normal user (uid 65534): the launcher's user-namespace route."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from evalmislead_assets.polyglot import java_runner
from evalmislead_tests.sandbox_as_user import can_drop_privileges, json_result, run_python_as_user

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not can_drop_privileges(), reason="needs root to become a user")]

_CODE = """
import json
from evalmislead_assets.polyglot import java_runner, js_runner
from evalmislead_assets.polyglot.process import ProcessLimits, run_confined
from evalmislead_tests.polyglot import java_corpus, js_corpus
limits = ProcessLimits(timeout_s=30)
out = {"missing": run_confined(["/bin/true"], {}, limits).missing}
fixed = js_runner.solution_module(js_corpus.FIXED, js_corpus.ENTRY)
ids = ["exit zero", "write outside", "timer left running", "read the nonce from memory", "patch the writer",
       "spawn a daemon"]
out["js"] = {i: v.status for i, v in zip(ids, js_runner.run_tests(js_corpus.HOSTILE, fixed, ids, limits, 2))}
if JAVA:
    classes, error = java_runner.compile_version(java_corpus.HOSTILE, java_corpus.FIXED)
    names = ["exitZero", "writeOutside", "threadLeftRunning", "reflectOnRunner", "readOwnMemory"]
    uids = [f"[engine:junit-jupiter]/[class:HostileTest]/[method:{n}()]" for n in names]
    verdicts = java_runner.run_tests(java_corpus.HOSTILE, classes, uids, limits, 2)
    out["java"] = {n: v.status for n, v in zip(names, verdicts)}
print(json.dumps(out))
"""


def test_hostile_corpora_hold_as_a_normal_user() -> None:
    work = Path(tempfile.mkdtemp(prefix="evalmislead-pg-user-"))  # not tmp_path: its parents are closed to the user
    java = os.path.isfile(java_runner.JUNIT_JAR)
    try:
        result = json_result(run_python_as_user(f"JAVA = {java}\n{_CODE}", work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert result["missing"] == []  # the user namespace gave every protection
    assert result["js"] == {"exit zero": "crashed", "write outside": "failed", "timer left running": "passed",
                            "read the nonce from memory": "failed", "patch the writer": "failed",
                            "spawn a daemon": "passed"}
    if java:
        assert result["java"] == {"exitZero": "crashed", "writeOutside": "failed", "threadLeftRunning": "passed",
                                  "reflectOnRunner": "failed", "readOwnMemory": "failed"}
