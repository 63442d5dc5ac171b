"""Report section "Coverage": coverage of the function under test per condition, beside the four
cells, the misleading rate by coverage band, a plot, and for every number the SQL that
recomputes it from stored rows (registered in report_sections)."""

from __future__ import annotations

import base64

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


def figure(frames: dict[str, pd.DataFrame], fmt: str = "png") -> bytes | None:
    """The section's plot from its frames (PNG or SVG), None when no coverage is stored."""
    cov = frames.get(coverage_analysis.TABLE, pd.DataFrame())
    if cov is None or cov.empty:
        return None
    outcomes = frames.get("test_outcomes", pd.DataFrame())
    outcomes = outcomes if outcomes is not None else pd.DataFrame()
    return plot(coverage_analysis.coverage_by_condition(cov, outcomes),
                coverage_analysis.misleading_by_band(cov, outcomes), fmt)


def plot(per: pd.DataFrame, bands: pd.DataFrame, fmt: str = "png") -> bytes | None:
    """Left: mean line/branch coverage per condition|thinking and version. Right: misleading rate per band, each
    bar resting on few tests labelled with its n."""
    if per.empty:
        return None
    from evalmislead_assets.report.plots import FEW_TESTS, FONT_PT, _figure, _png, _style

    fig = _figure(14, 5.6)
    left, right = fig.subplots(1, 2)
    labels = [f"{c}|{t}" for c, t in zip(per["condition"], per["thinking"])]
    x = range(len(labels))
    series = [("line_fixed", "line, fixed"), ("line_buggy", "line, buggy"),
              ("branch_fixed", "branch, fixed"), ("branch_buggy", "branch, buggy")]
    width = 0.2
    for k, (col, name) in enumerate(series):
        left.bar([i + (k - 1.5) * width for i in x], (per[col].astype(float) * 100).fillna(0), width, label=name)
    left.set_xticks(list(x), labels, rotation=35, ha="right")
    left.set_ylabel("mean coverage (%)")
    left.set_ylim(0, 130)  # room above the bars for the legend
    _style(left, "coverage of the function under test")
    left.legend(fontsize=FONT_PT, ncol=2, loc="upper center")
    top = float((bands["rate"].astype(float) * 100).max()) if not bands.empty else 0.0
    top = max(10.0, 0.0 if pd.isna(top) else top * 1.25)
    right.set_ylim(0, top)
    if not bands.empty:
        keys = list(dict.fromkeys(zip(bands["condition"], bands["thinking"])))
        w = 0.8 / max(1, len(keys))
        for k, (c, t) in enumerate(keys):
            sub = bands[(bands["condition"] == c) & (bands["thinking"] == t)].set_index("band").reindex(coverage_analysis.BANDS)
            xs = [i + (k - (len(keys) - 1) / 2) * w for i in range(len(coverage_analysis.BANDS))]
            heights = (sub["rate"].astype(float) * 100).fillna(0).to_numpy()
            right.bar(xs, heights, w, label=f"{c}|{t}")
            for xi, h, n in zip(xs, heights, sub["tests"].to_numpy()):
                if not pd.isna(n) and 0 < int(n) < FEW_TESTS:
                    right.text(xi, h + top / 100, f"n={int(n)}", ha="center", va="bottom", fontsize=FONT_PT - 2,
                               rotation=90 if len(keys) > 3 else 0)
    right.set_xticks(range(len(coverage_analysis.BANDS)), list(coverage_analysis.BANDS))
    right.set_xlabel(f"line coverage of the fixed version (band); n = tests where fewer than {FEW_TESTS}")
    right.set_ylabel("misleading rate (%)")
    _style(right, "misleading rate by coverage band (empty band: no bar)")
    return _png(fig, fmt)
