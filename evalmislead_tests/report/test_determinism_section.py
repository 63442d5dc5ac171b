"""report/sections/determinism.py: the sensitivity lines, worded from analysis.determinism_sensitivity's rows."""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.analysis.determinism_sensitivity import SENSITIVITY_COLUMNS
from evalmislead_assets.report.sections.determinism import sensitivity_lines


def _row(**kw: object) -> dict[str, object]:
    base = {"comparison_id": 1, "thinking": "off", "role": "primary", "metric": "misleading_rate",
            "condition_a": "buggy_code", "condition_b": "fixed_code", "subset": "all", "estimate": 0.4,
            "ci_low": 0.1, "ci_high": 0.7, "level": 0.9875, "n_probed": 1, "n_changed": 1, "n_outside": 0,
            "estimate_swapped": 0.17, "shift": -0.227, "not_measured": None}
    return {**base, **kw}


def test_a_measured_shift_in_points() -> None:
    (line,) = sensitivity_lines(pd.DataFrame([_row()], columns=SENSITIVITY_COLUMNS))
    assert line == ("- misleading rate, `buggy_code` − `fixed_code` (thinking off): +40.0 points "
                    "[98.75 %: +10.0, +70.0]; with the 1 probed answers of its problems re-generated (1 with cell "
                    "counts other than the stored ones): +17.0 points (shift -22.7).")


def test_a_shift_not_measured_says_why_and_never_shows_a_number() -> None:
    nan = float("nan")
    rows = [_row(thinking="on", role="report-only", metric="effective_rate", subset="truncation_matched",
                 estimate=nan, ci_low=nan, ci_high=nan, level=None, n_probed=0, n_changed=0, n_outside=3,
                 estimate_swapped=None, shift=None, not_measured="not estimable")]
    (line,) = sensitivity_lines(pd.DataFrame(rows, columns=SENSITIVITY_COLUMNS))
    assert line == ("- effective rate, `buggy_code` − `fixed_code` (thinking on, report-only, truncation-matched "
                    "subset): – points [CI: –, –]; run-to-run shift not measured (not estimable); 3 probed answers "
                    "of these conditions are outside this comparison's problems and left out.")


def test_no_comparison_no_line() -> None:
    assert sensitivity_lines(pd.DataFrame(columns=SENSITIVITY_COLUMNS)) == []
