"""Report section "Coverage": coverage of the function under test per condition, beside the four
cells, the misleading rate by coverage band, a plot, and for every number the SQL that
recomputes it from stored rows (registered in report_sections)."""

from __future__ import annotations

import base64
import io

import pandas as pd

from evalmislead_assets.analysis import coverage as coverage_analysis
from evalmislead_assets.report.formatting import md_table, pct

TITLE = "Coverage"
TABLES = (coverage_analysis.TABLE, "test_outcomes")

COVERAGE_SQL = """\
WITH cov AS (
  SELECT condition, thinking,
         count(*) FILTER (WHERE version = 'fixed') AS files,
         avg(line_coverage) FILTER (WHERE version = 'fixed') AS line_fixed,
         avg(line_coverage) FILTER (WHERE version = 'buggy') AS line_buggy,
         avg(branch_coverage) FILTER (WHERE version = 'fixed') AS branch_fixed,
         avg(branch_coverage) FILTER (WHERE version = 'buggy') AS branch_buggy
  FROM test_coverage GROUP BY condition, thinking),
cells AS (
  SELECT condition, thinking, count(*) AS tests,
         count(*) FILTER (WHERE outcome = 'misleading') AS misleading,
         count(*) FILTER (WHERE outcome = 'effective') AS effective,
         count(*) FILTER (WHERE outcome = 'both_pass') AS both_pass,
         count(*) FILTER (WHERE outcome = 'both_fail') AS both_fail
  FROM test_outcomes GROUP BY condition, thinking)
SELECT cov.*, coalesce(tests, 0) AS tests, coalesce(misleading, 0) AS misleading,
       coalesce(effective, 0) AS effective, coalesce(both_pass, 0) AS both_pass,
       coalesce(both_fail, 0) AS both_fail
FROM cov LEFT JOIN cells USING (condition, thinking)
ORDER BY thinking, condition"""

BAND_SQL = """\
WITH banded AS (
  SELECT condition, thinking, task_id,
         CASE WHEN n_statements_run = n_statements THEN '100 %'
              WHEN line_coverage < 0.5 THEN '<50 %' ELSE '50–99 %' END AS band
  FROM test_coverage WHERE version = 'fixed' AND n_statements > 0)
SELECT o.condition, o.thinking, b.band, count(*) AS tests,
       count(*) FILTER (WHERE o.outcome = 'misleading') AS misleading,
       count(*) FILTER (WHERE o.outcome = 'misleading') / count(*) AS rate
FROM test_outcomes o JOIN banded b USING (condition, thinking, task_id)
GROUP BY ALL ORDER BY o.thinking, o.condition, b.band"""


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    cov = frames.get(coverage_analysis.TABLE, pd.DataFrame())
    outcomes = frames.get("test_outcomes", pd.DataFrame())
    intro = ("Line and branch coverage (coverage.py) of the function under test (the entry point's body in "
             "solution.py) by each generated test file, measured in the sandbox on the fixed and on the buggy "
             "version; failing tests count the lines they ran.")
    if cov is None or cov.empty:
        return [intro, "", "Not computed: the `test_coverage` table has no rows (materialize the "
                "`test_coverage` asset for the partitions of interest)."]
    outcomes = outcomes if outcomes is not None else pd.DataFrame()
    per = coverage_analysis.coverage_by_condition(cov, outcomes)
    bands = coverage_analysis.misleading_by_band(cov, outcomes)
    L = [intro + " Coverage is the mean over test files; the cells count tests (`test_outcomes`).", ""]
    L.append(md_table(pd.DataFrame([{
        "condition": f"{r.condition}", "thinking": f"{r.thinking}", "files": f"{r.files}",
        "line (fixed)": pct(r.line_fixed), "line (buggy)": pct(r.line_buggy),
        "branch (fixed)": pct(r.branch_fixed), "branch (buggy)": pct(r.branch_buggy), "tests": f"{r.tests}",
        "misleading": f"{r.misleading}", "effective": f"{r.effective}", "both pass": f"{r.both_pass}",
        "both fail": f"{r.both_fail}"} for r in per.itertuples(index=False)])))
    L += ["", "Branch coverage averages only the files whose function has a branch (NULL otherwise).", "",
          "```sql", COVERAGE_SQL, "```", "", "**Misleading rate by coverage band** (band of the file's line "
          "coverage on the fixed version: under 50 %, 50 % up to but not including 100 %, 100 %).", ""]
    if bands.empty:
        L.append("Not estimable: no `test_outcomes` rows match the covered files.")
    else:
        L.append(md_table(pd.DataFrame([{
            "condition": f"{r.condition}", "thinking": f"{r.thinking}", "band": f"{r.band}", "tests": f"{r.tests}",
            "misleading": f"{r.misleading}", "misleading rate": "not estimable" if r.tests == 0 else pct(r.rate)}
            for r in bands.itertuples(index=False)])))
    L += ["", "A band with no tests is not estimable (the query below returns no row for it).", "",
          "```sql", BAND_SQL, "```"]
    png = plot(per, bands)
    if png:
        L += ["", f"![Coverage per condition and misleading rate by band](data:image/png;base64,"
                  f"{base64.b64encode(png).decode()})"]
    return L


def plot(per: pd.DataFrame, bands: pd.DataFrame) -> bytes | None:
    """Left: mean line/branch coverage per condition|thinking and version. Right: misleading rate per band."""
    if per.empty:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.2))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    labels = [f"{c}|{t}" for c, t in zip(per["condition"], per["thinking"])]
    x = range(len(labels))
    series = [("line_fixed", "line, fixed"), ("line_buggy", "line, buggy"),
              ("branch_fixed", "branch, fixed"), ("branch_buggy", "branch, buggy")]
    width = 0.2
    for k, (col, name) in enumerate(series):
        left.bar([i + (k - 1.5) * width for i in x], (per[col].astype(float) * 100).fillna(0), width, label=name)
    left.set_xticks(list(x), labels, rotation=35, ha="right", fontsize=7)
    left.set_ylabel("mean coverage (%)")
    left.set_ylim(0, 105)
    left.legend(fontsize=7)
    left.set_title("coverage of the function under test", fontsize=9)
    if not bands.empty:
        keys = list(dict.fromkeys(zip(bands["condition"], bands["thinking"])))
        w = 0.8 / max(1, len(keys))
        for k, (c, t) in enumerate(keys):
            sub = bands[(bands["condition"] == c) & (bands["thinking"] == t)].set_index("band").reindex(coverage_analysis.BANDS)
            right.bar([i + (k - (len(keys) - 1) / 2) * w for i in range(len(coverage_analysis.BANDS))],
                      (sub["rate"].astype(float) * 100).fillna(0), w, label=f"{c}|{t}")
        right.legend(fontsize=6)
    right.set_xticks(range(len(coverage_analysis.BANDS)), list(coverage_analysis.BANDS))
    right.set_xlabel("line coverage of the fixed version (band)")
    right.set_ylabel("misleading rate (%)")
    right.set_title("misleading rate by coverage band (empty band: no bar)", fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    return buf.getvalue()
