"""The study report from stored rows: Markdown, HTML and PNG plots (and the same Markdown for the UI).

Every table of PROTOCOL.md's "published run" section, in the same shape, for whatever the
warehouse holds; missing partitions are named at the top instead of failing. This module
loads the rows (the tables declared in inputs.py, nothing else) and assembles the document; the
tables and core sections are in tables.py, the number formatting in formatting.py, the plots in
plots.py, the method notes in sections/method_notes.py, and other analyses' sections in
section_list.py.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from evalmislead_assets.analysis.plan import Plan
from evalmislead_assets.report import section_list as report_sections
from evalmislead_assets.report.formatting import level_label, mc_stability_note, md_table
from evalmislead_assets.report.inputs import ReportSource
from evalmislead_assets.report.inputs import read as read_inputs
from evalmislead_assets.report.plots import rates_plot, truncation_plot
from evalmislead_assets.report.sections import method_notes as report_method
from evalmislead_assets.report.tables import (
    EXAMPLE_TASK,
    comparison_subset_note,
    comparison_table,
    example_section,
    made_with_table,
    mentions_section,
    rates_table,
    spec_section,
    thinking_table,
    truncation_lines,
    truncation_table,
)
from evalmislead_assets.report.tables import ZERO_DEN as ZERO_DEN_LABEL
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.values import is_missing
from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES

ImageRef = Callable[[str, bytes], str]
_TABLE = "table"  # field metadata: the field is the input table of its name, as stored


def _table() -> Any:  # a dataclass field, typed as its DataFrame by the annotation
    return field(metadata={_TABLE: True})


@dataclass(kw_only=True)
class ReportData:
    """The stored rows a report is drawn from (each frame may be empty)."""

    condition_rates: pd.DataFrame = _table()
    bootstrap_comparisons: pd.DataFrame = _table()
    truncation_matched_subset: pd.DataFrame = _table()
    thinking_comparisons: pd.DataFrame = _table()
    spec_labels: pd.DataFrame = _table()
    spec_label_agreement: pd.DataFrame = _table()
    spec_label_splits: pd.DataFrame = _table()
    reasoning_mentions: pd.DataFrame = _table()
    reasoning_mention_summary: pd.DataFrame = _table()
    example_outcomes: pd.DataFrame  # test_outcomes rows of the worked example's task
    example_sources: pd.DataFrame  # generated_tests rows (condition, thinking, source) of that task
    example_problem: dict = field(default_factory=dict)
    study_problems: int | None = None
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)  # tables read by report_sections
    method: dict[str, pd.DataFrame] = field(default_factory=dict)  # report_method's frames
    review_csv: Path | None = None  # the review CSV of this report's model (spec_labels writes and reads it)


def load_data(source: Mapping[str, pd.DataFrame] | ReportSource | Warehouse,
              review_csv: Path | None = None) -> ReportData:
    """The report's rows: the asset's input frames keyed by table name (every table of inputs.INPUTS), or a
    warehouse, read through ``inputs.read``. A table the report reads that it was not given raises
    ReportInputError, naming it."""
    if isinstance(source, ReportSource):
        tables = source
    else:
        tables = ReportSource(source if isinstance(source, Mapping) else read_inputs(source))
    frames = {f.name: tables.read_table(f.name) for f in fields(ReportData) if f.metadata.get(_TABLE)}
    task = pick_example_task(tables)
    ex_out = ex_src = pd.DataFrame()
    problem: dict = {}
    if task:
        ex_out = tables.query_df(
            "SELECT condition, thinking, test_id, buggy_status, fixed_status, outcome FROM test_outcomes "
            "WHERE task_id = ? ORDER BY condition, thinking, test_id", [task])
        ex_src = tables.query_df(
            "SELECT condition, thinking, source FROM generated_tests WHERE task_id = ?", [task])
        p = tables.query_df(
            "SELECT task_id, entry_point, buggy_code, fixed_code, bug_type FROM problems WHERE task_id = ?", [task])
        problem = p.iloc[0].to_dict() if len(p) else {"task_id": task}
    n = tables.query_df("SELECT count(DISTINCT task_id) AS n FROM test_generations")["n"].iloc[0]
    extra = {t: tables.read_table(t) for t in report_sections.tables()}
    return ReportData(**frames, example_outcomes=ex_out, example_sources=ex_src, example_problem=problem,
                      study_problems=int(n) if n else None, extra=extra, method=report_method.load(tables),
                      review_csv=review_csv)


def pick_example_task(warehouse) -> str | None:
    """Task 30 when it has outcomes, else the buggy_code problem with the most misleading tests."""
    have = warehouse.query_df("SELECT count(*) AS n FROM test_outcomes WHERE task_id = ?", [EXAMPLE_TASK])
    if int(have["n"].iloc[0]):
        return EXAMPLE_TASK
    best = warehouse.query_df(
        "SELECT task_id, count(*) FILTER (WHERE outcome = 'misleading') AS m, count(*) AS n FROM test_outcomes "
        "WHERE condition = 'buggy_code' GROUP BY task_id ORDER BY m DESC, n DESC, task_id LIMIT 1")
    if len(best):
        return str(best["task_id"].iloc[0])
    any_task = warehouse.query_df("SELECT min(task_id) AS t FROM test_outcomes")
    t = any_task["t"].iloc[0]
    return None if is_missing(t) else str(t)


# ---------------------------------------------------------------- the report


def stale_notes(data: ReportData, plan: Plan) -> list[str]:
    """Tables whose stored rows were computed under another plan than the current one."""
    out = []
    for name in ("condition_rates", "bootstrap_comparisons", "thinking_comparisons", "spec_labels",
                 "reasoning_mention_summary"):
        df = getattr(data, name)
        if len(df) and "plan_sha256" in df.columns:
            other = sorted({s for s in df["plan_sha256"].dropna() if s != plan.sha256})
            if other:
                out.append(f"`{name}` was computed under plan `{other[0][:12]}`, not the current "
                           f"`{plan.sha256[:12]}`: re-materialize it.")
    return out


@dataclass
class Report:
    plots: dict[str, bytes]
    build: Callable[[ImageRef], str]

    def markdown(self, image_ref: ImageRef) -> str:
        return self.build(image_ref)


def data_uri(_: str, png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def file_ref(name: str, _: bytes) -> str:
    return f"plots/{name}"


def build(data: ReportData, plan: Plan, notes: list[str] | None = None) -> Report:
    rates = data.condition_rates
    plots = {k: v for k, v in (("rates.png", rates_plot(rates)), ("truncation.png", truncation_plot(rates)),
                               ("rates.svg", rates_plot(rates, "svg")),
                               ("truncation.svg", truncation_plot(rates, "svg"))) if v}

    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    def render(image_ref: ImageRef) -> str:
        present = sorted({(c, t) for c, t in zip(rates["condition"], rates["thinking"])}) if len(rates) else []
        absent = [f"{c}|{t}" for t in THINKING_MODES for c in CONDITION_NAMES if (c, t) not in present]
        L = ["# evalmislead: study report", "",
             f"Generated {now} from the stored rows. Analysis plan v{plan.version} (`{plan.sha256[:12]}`): "
             f"comparisons by a paired bootstrap over problems, {plan.n_boot:,} resamples, {level_label(plan.level)} "
             f"percentile intervals, seed {plan.seed}; a condition's own rate by a {level_label(plan.level)} "
             "cluster-adjusted Wilson interval (tests clustered in problems; it does not collapse when a cell has "
             "few or no events). A rate is a cell count over all tests of the condition.", ""]
        L += ["Every answer and test, one page each (prompt, answer, extracted file, each test's status on both "
              "versions, the bug's diff): [viewer/index.html](viewer/index.html); the misleading tests: "
              "[viewer/index.html#misleading](viewer/index.html#misleading).", ""]
        if data.study_problems is not None:
            L.append(f"Problems answered: {data.study_problems}.")
        if absent:
            L += ["", f"**Partitions without rows** ({len(absent)} of {len(CONDITION_NAMES) * len(THINKING_MODES)}): "
                  + ", ".join(f"`{m}`" for m in absent) + ". Tables below cover what is stored."]
        for n in list(notes or []) + stale_notes(data, plan):
            L.append(f"- {n}")
        L += ["", "## Method notes", "", *report_method.render(data.method)]
        L += ["", "## 1. Rates and counts per condition", ""]
        if rates.empty:
            L.append("_No condition rates stored (materialize `condition_rates`)._")
        for mode in THINKING_MODES:
            if (rates["thinking"] == mode).any() if len(rates) else False:
                L += [f"### Thinking {mode}" + (" (primary)" if mode == plan.primary_thinking else " (report-only)"),
                      "", "Rates with their " + level_label(plan.level) + " cluster-adjusted Wilson intervals (%).", "",
                      md_table(rates_table(rates, mode)), ""]
        made_with = made_with_table(rates)
        if not made_with.empty:
            L += ["What made each condition's answers (every answered row of a cell must agree; a comparison of "
                  "cells that differ is refused as “not comparable”):", "", md_table(made_with), ""]
        if "rates.png" in plots:
            L += [f"![Rates per condition]({image_ref('rates.png', plots['rates.png'])})", "",
                  "(vector version for a paper: `plots/rates.svg`)", ""]
        L += ["## 2. Primary comparisons", ""]
        comp = data.bootstrap_comparisons
        if comp.empty:
            L.append("_No comparisons stored (materialize `bootstrap_comparisons`)._")
        else:
            L += [f"A side with 0 tests makes a comparison not estimable (no estimate, no interval). "
                  f"“{ZERO_DEN_LABEL}”: bootstrap resamples in which a side drew only problems without tests "
                  f"(its rate there is taken as {plan.zero_rate:g}).", ""]
        for mode in THINKING_MODES:
            if len(comp) and (comp["thinking"] == mode).any():
                tag = "verdicts: a difference only where the interval excludes 0" if mode == plan.primary_thinking \
                    else "report-only, no verdicts"
                subset = comparison_subset_note(comp, mode)
                L += [f"### Thinking {mode} ({tag}{'; ' + subset if subset else ''})", "",
                      md_table(comparison_table(comp, mode)), ""]
        if len(comp):
            L += ["“problems”: the problems paired (a problem without tests on a side adds 0 tests there); “problems "
                  "with tests a / b / both”: how many of them inform each side's rate.", ""]
            note = mc_stability_note(pd.concat([comp.get("ci_low_mc_se", pd.Series(dtype=float)),
                                                comp.get("ci_high_mc_se", pd.Series(dtype=float))]),
                                     comp["n_boot"].iloc[0])
            if note:
                L += [note, ""]
        L += ["## 3. Truncation", "", *truncation_lines(rates)]
        L += ["", md_table(truncation_table(rates)) if len(rates) else "_no rows_", ""]
        if "truncation.png" in plots:
            L += [f"![Truncation by condition]({image_ref('truncation.png', plots['truncation.png'])})", ""]
        L += ["## 4. Thinking on vs off on the truncation-matched subset (report-only)", ""]
        sub = data.truncation_matched_subset
        n_sub = int(sub["in_subset"].astype(bool).sum()) if len(sub) else 0
        L.append(f"Problems where both modes produced at least one test in both `buggy_code` and `fixed_code`: "
                 f"**{n_sub}** of {len(sub)}.")
        tc = data.thinking_comparisons
        if n_sub and len(tc):
            L += ["", md_table(thinking_table(tc))]
            note = mc_stability_note(pd.concat([tc.get("ci_low_mc_se", pd.Series(dtype=float)),
                                                tc.get("ci_high_mc_se", pd.Series(dtype=float))]), tc["n_boot"].iloc[0])
            if note:
                L += ["", note]
        elif not n_sub:
            L += ["", "_Empty subset: thinking-on and thinking-off rows for both conditions are needed._"]
        L += ["", "## 5. Spec labels", "", *spec_section(data), "",
              "## 6. Reasoning mentions (thinking on, `buggy_code`)", "", *mentions_section(data), "",
              "## 7. Worked example", "", *example_section(data), ""]
        for i, section in enumerate(report_sections.sections(), start=8):
            frames = {t: data.extra.get(t, pd.DataFrame()) for t in section.tables}
            L += [f"## {i}. {section.title}", "", *section.render(frames), ""]
        return "\n".join(L)

    return Report(plots, render)


_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>evalmislead: study report</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; line-height: 1.45; }}
table {{ border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }}
th {{ background: #f3f3f3; }}
code, pre {{ background: #f6f8fa; }} pre {{ padding: 0.6em; overflow-x: auto; }}
img {{ max-width: 100%; }}
</style></head><body>
{body}
</body></html>
"""


def to_html(markdown: str) -> str:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    return _HTML.format(body=md.render(markdown))


@dataclass(frozen=True)
class WrittenReport:
    markdown_path: Path
    html_path: Path
    plot_paths: list[Path]
    markdown_ui: str  # with data: images, for MetadataValue.md


def write(report: Report, out_dir: Path) -> WrittenReport:
    out = Path(out_dir)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    plot_paths = []
    for name, png in report.plots.items():
        path = out / "plots" / name
        path.write_bytes(png)
        plot_paths.append(path)
    md_file = report.markdown(file_ref)
    md_inline = report.markdown(data_uri)
    md_path, html_path = out / "report.md", out / "report.html"
    md_path.write_text(md_file, encoding="utf-8")
    html_path.write_text(to_html(md_inline), encoding="utf-8")
    return WrittenReport(md_path, html_path, plot_paths, md_inline)
