"""`evalmislead run` (the README's first command) runs every language of the study file end to end:
Python's chain and analysis, then each other language's chain with the same conditions and modes, then the
languages side by side, and its summary sets the languages' cells next to each other.

The answers come from a fake server that writes, in the prompt's language, one test asserting the bug and
one asserting the fix (evalmislead_tests/assets/test_languages.answer_for); everything else is real: Dagster
runs, the DuckDB file, the oracles, the pytest / node:test / JUnit runners.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from evalmislead_tests.assets.test_languages import JUNIT, answer_for
from evalmislead_tests.fake_llm_server import FakeLLMServer


@pytest.mark.slow
@pytest.mark.timeout(2400)
@pytest.mark.skipif(not (shutil.which("node") and shutil.which("javac") and JUNIT.is_file()),
                    reason="node, a JDK and junit5 are needed (scripts/bootstrap.sh installs them)")
def test_the_first_command_runs_every_language_of_the_study(tmp_path: Path) -> None:
    study = tmp_path / "study.toml"
    study.write_text('languages = ["python", "js", "java"]\nproblems = "23,30"\n\n'
                     '[[models]]\nname = "coder"\nbundled = "qwen2.5-coder-0.5b"\n')
    db = tmp_path / "study.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALMISLEAD_")}
    with FakeLLMServer() as fake:
        fake.answer_for = answer_for
        env.update({"EVALMISLEAD_STUDY": str(study), "EVALMISLEAD_DB": str(db),
                    "EVALMISLEAD_HOME": str(tmp_path / "data"), "DAGSTER_HOME": str(tmp_path / "dagster_home"),
                    "EVALMISLEAD_LLM_URL": fake.url, "EVALMISLEAD_PROBE_N": "2"})
        proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code"],
                              env=env, capture_output=True, text=True, timeout=2100)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    for lang in ("js", "java"):
        assert f"done {lang}/test_generations+{lang}/generated_tests+{lang}/test_outcomes [buggy_code|off]" in out
        assert f"progress after {lang} buggy_code|off" in out
    inputs = next(ln for ln in out.splitlines() if ln.startswith("evalmislead: done ") and "java/problems" in ln)
    assert {"problems", "problem_validation", "java/problems", "java/problem_validation", "js/problems",
            "js/problem_validation"} <= set(inputs.split()[2].split("+"))  # with Python's, in one step
    assert re.search(r"done \S*language_comparisons\S*languages_report", out)
    # the closing summary: Python's table and worked example, then the languages' cells side by side
    assert "Per condition" in out and "Worked example (a misleading test): Python/" in out
    side = out[out.index("Languages side by side"):]
    for name in ("Python", "JavaScript", "Java"):  # 2 answers, 2 files, 4 tests: 2 misleading, 2 effective
        assert re.search(rf"buggy_code\s+{name}\s+2\s+2\s+4\s+2\s+2\s+0\s+50\.0 %\s+50\.0 %", side), side
    for name, task in (("Java", "Java/"), ("JavaScript", "JavaScript/")):  # each language's own misleading test
        assert re.search(rf"A misleading test in {name}: {task}\d+, condition buggy_code", side), side
    assert "on the fixed version: failed" in side.split("A misleading test in Java")[1]
    con = duckdb.connect(str(db), read_only=True)
    try:
        cells = con.execute("SELECT language, outcome, count(*) FROM test_outcomes GROUP BY ALL ORDER BY ALL").fetchall()
        pairs = con.execute("SELECT DISTINCT language_a, language_b FROM language_comparisons WHERE estimable "
                            "ORDER BY ALL").fetchall()
    finally:
        con.close()
    assert cells == [(lang, o, 2) for lang in ("java", "js", "python") for o in ("effective", "misleading")]
    assert pairs == [("js", "java"), ("python", "java"), ("python", "js")]
    assert "# Languages side by side" in (tmp_path / "data" / "report" / "languages.md").read_text()
