"""The report section "Languages side by side" never draws a number from no tests."""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.analysis.language_comparison import language_comparisons
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.report.sections.languages import render
from evalmislead_assets.settings import analysis_plan_path


def test_a_side_without_tests_reads_not_estimable_with_why() -> None:
    gen = pd.DataFrame([{"language": lang, "condition": "buggy_code", "thinking": "off", "problem_idx": 0}
                        for lang in ("python", "java")])
    out = pd.DataFrame([{"language": "python", "condition": "buggy_code", "thinking": "off", "problem_idx": 0,
                         "outcome": "misleading"}])
    text = "\n".join(render({"language_comparisons": language_comparisons(
        out, gen, ["python", "java"], "m", load_plan(analysis_plan_path()))}))
    assert "Python − Java" in text and "not estimable: no test in java on the 1 paired problems" in text
    assert "0.0 %" not in text and "100.0 %" not in text
    assert "line_coverage, java: no JaCoCo offline" in text


def test_no_rows_say_so() -> None:
    assert "not estimable" in render({"language_comparisons": pd.DataFrame()})[0]
