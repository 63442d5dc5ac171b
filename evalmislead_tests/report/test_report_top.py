"""The report's top: the result in a few generated lines, a linked table of contents, SQL under every core
section, readable plots (PNG and SVG), and the partitions a study never ran named once, low in the report."""

from __future__ import annotations

import io
import re

import pandas as pd
from PIL import Image

from evalmislead_assets import settings
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.report import plots
from evalmislead_assets.report.build import build, file_ref, load_data, write
from evalmislead_assets.report.sections import coverage
from evalmislead_tests.report.test_report import analyse, store, wh  # noqa: F401 (wh: the fixture)


def _report(wh) -> str:  # noqa: F811
    return build(load_data(wh), load_plan(settings.analysis_plan_path())).markdown(file_ref)


def test_the_report_opens_with_its_result(wh) -> None:  # noqa: F811
    store(wh)
    md = _report(wh)
    top = md.split("**Contents**", 1)[0]
    # the largest rates, from the rows: buggy_code 4 misleading of 7 tests, fixed_code 4 effective of 4
    assert "The largest misleading rate: `buggy_code` 57.1 % [" in top and "(4/7 tests)" in top
    assert "the largest effective rate: `fixed_code` 100.0 % [" in top
    # the four verdicts: two stored, two not computed (no model_spec rows), never a 0
    verdicts = [ln for ln in top.splitlines() if ln.startswith("- #")]
    assert len(verdicts) == 4
    assert verdicts[0].startswith("- #1 misleading rate, `buggy_code` − `fixed_code`: +57.1 points [")
    assert "not computed" in verdicts[2] and "not computed" in verdicts[3] and "0.0" not in verdicts[2]
    # the misleading worked example: passes on the buggy version, fails on the fixed one, with its assertion
    assert ("`test_solution.py::test_all_positive` for `get_positive` (Python/30, condition `buggy_code`) passed "
            "on the buggy version and failed on the fixed one") in top
    assert "assert get_positive([1, 2, 3]) == []" in top
    # a thinking-off study does not open with the thinking-on partitions it never ran
    assert "Partitions" not in top and "|on`" not in md.split("## 1. Rates", 1)[0]
    low = md.split("## Not in this study", 1)[1]
    assert "Thinking on: not run by this study" in low and "`buggy_code|on`" in low
    assert md.count("`buggy_code|on`") == 1


def test_a_partition_with_answers_but_no_rates_is_named_at_the_top(wh) -> None:  # noqa: F811
    store(wh)
    wh.execute("DELETE FROM condition_rates WHERE condition = 'fixed_code'")
    md = _report(wh)
    head = md.split("## 1. Rates", 1)[0]
    assert "**Partitions with answers but no rates** (1): `fixed_code|off`" in head


def test_a_summary_over_no_tests_is_not_estimable_never_zero(wh) -> None:  # noqa: F811
    store(wh)
    wh.execute("DELETE FROM test_outcomes")
    analyse(wh)
    top = _report(wh).split("**Contents**", 1)[0]
    assert "The largest misleading rate: not estimable (no condition has tests)" in top
    assert "- #1 misleading rate, `buggy_code` − `fixed_code`: not estimable" in top
    assert "No misleading test is stored for thinking off" in top
    assert "0.0 %" not in top


def test_contents_link_to_anchored_sections_each_with_its_sql(wh) -> None:  # noqa: F811
    store(wh)
    md = _report(wh)
    toc = md.split("**Contents**", 1)[1].split("\n\n", 2)[1]
    links = re.findall(r"^- \[(.+)\]\(#([\w-]+)\)$", toc, re.M)
    headings = re.findall(r"^## (.+)$", md, re.M)
    assert [t for t, _ in links] == headings and len(headings) >= 18
    for title, anchor in links:
        assert f'<a id="{anchor}"></a>\n\n## {title}' in md
    # the core sections 1 to 7 each print the SQL that reads their numbers (the later ones print theirs beside
    # their tables, when they have rows)
    for n in range(1, 8):
        body = md.split(f"\n## {n}. ", 1)[1].split("\n## ", 1)[0]
        assert "```sql" in body, f"section {n} has no SQL"


def test_the_core_sql_reads_what_the_tables_show(wh) -> None:  # noqa: F811
    store(wh)
    md = _report(wh)
    body = md.split("\n## 1. ", 1)[1].split("\n## ", 1)[0]
    sql = body.split("```sql\n", 1)[1].split("```", 1)[0]
    first, second = [s for s in sql.split(";") if s.strip()]
    stored = wh.query_df(first).set_index(["condition", "thinking"])
    recomputed = wh.query_df(re.sub(r"--[^\n]*", "", second)).set_index(["condition", "thinking"])
    assert stored.loc[("buggy_code", "off"), "n_misleading"] == recomputed.loc[("buggy_code", "off"), "n_misleading"] == 4


def test_plots_are_wide_with_an_svg_each_and_the_forest_has_every_comparison(wh, tmp_path) -> None:  # noqa: F811
    store(wh)
    written = write(build(load_data(wh), load_plan(settings.analysis_plan_path())), tmp_path / "r")
    names = {p.name for p in written.plot_paths}
    for p in written.plot_paths:
        if p.suffix == ".png":
            assert p.with_suffix(".svg").name in names
            assert Image.open(p).size[0] >= 800, p.name
    md = written.markdown_path.read_text(encoding="utf-8")
    assert "](plots/forest.png)" in md and "`plots/forest.svg`" in md
    rates = wh.read_table("condition_rates")
    comp = wh.read_table("bootstrap_comparisons")
    plan = load_plan(settings.analysis_plan_path())
    svg = plots.forest_plot(comp, "off", "svg", plan.comparisons)
    assert svg and b"<svg" in svg[:2000]
    assert plots.forest_plot(comp, "on", "png") is None  # no thinking-on rows: no plot
    assert plots.rates_plot(rates.iloc[0:0]) is None


def test_the_coverage_plot_is_wide_has_an_svg_and_shows_few_tests_n() -> None:
    per = pd.DataFrame([{"condition": "buggy_code", "thinking": "off", "files": 3, "line_fixed": 0.9,
                         "line_buggy": 0.8, "branch_fixed": 0.5, "branch_buggy": 0.5}])
    bands = pd.DataFrame([{"condition": "buggy_code", "thinking": "off", "band": "100 %", "tests": 15,
                           "misleading": 3, "rate": 0.2}])
    png = coverage.plot(per, bands)
    assert png is not None and Image.open(io.BytesIO(png)).size[0] >= 800
    svg = coverage.plot(per, bands, "svg")
    assert svg is not None and b"<svg" in svg[:2000]
    # the bar on 15 tests carries its n (text in the SVG is drawn as paths: its id names the glyphs' text)
    from matplotlib.figure import Figure

    shown: list[str] = []
    original = Figure.savefig

    def capture(self, *a, **k):
        shown.extend(t.get_text() for ax in self.axes for t in ax.texts)
        return original(self, *a, **k)

    Figure.savefig = capture
    try:
        coverage.plot(per, bands)
    finally:
        Figure.savefig = original
    assert "n=15" in shown


def test_the_largest_rate_of_no_event_names_none() -> None:
    from evalmislead_assets.report.summary import largest

    rates = pd.DataFrame([{"condition": c, "n_tests": 5, "n_misleading": 0, "misleading_rate": 0.0,
                           "misleading_ci_low": 0.0, "misleading_ci_high": 0.55} for c in ("buggy_code", "fixed_code")])
    assert largest(rates, "misleading") == "none: no misleading test among the 10 tests of 2 conditions"
    rates.loc[1, ["n_misleading", "misleading_rate"]] = [1, 0.2]
    assert largest(rates, "misleading").startswith("`fixed_code` 20.0 % [0.0, 55.0] (1/5 tests)")
