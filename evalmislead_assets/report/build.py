"""The study report from stored rows: Markdown, HTML and PNG plots (and the same Markdown for the UI).

Every table of PROTOCOL.md's "published run" section, in the same shape, for whatever the
warehouse holds; a partition with answers but no rates is named at the top, one never run near the
end, instead of failing. It opens with its result (summary.py) and a linked table of contents. This module
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
from evalmislead_assets.report import summary as report_summary
from evalmislead_assets.report import worked_example
from evalmislead_assets.report.formatting import level_label, mc_stability_note, md_table
from evalmislead_assets.report.inputs import ReportSource
from evalmislead_assets.report.inputs import read as read_inputs
from evalmislead_assets.report.plots import forest_plot, rates_plot, truncation_plot
from evalmislead_assets.report.sections import coverage as coverage_section
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
    misleading_examples: dict[str, worked_example.Example] = field(default_factory=dict)  # per thinking mode
    answered_partitions: set[tuple[str, str]] = field(default_factory=set)  # (condition, thinking) with answers


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
    examples = {mode: ex for mode in THINKING_MODES
                if (ex := worked_example.pick(tables.query_df, thinking=mode, misleading_only=True, python_only=True))}
    answered = tables.query_df("SELECT DISTINCT condition, thinking FROM test_generations")
    return ReportData(**frames, example_outcomes=ex_out, example_sources=ex_src, example_problem=problem,
                      study_problems=int(n) if n else None, extra=extra, method=report_method.load(tables),
                      review_csv=review_csv, misleading_examples=examples,
                      answered_partitions=set(zip(answered["condition"], answered["thinking"])))


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
    rates, comp = data.condition_rates, data.bootstrap_comparisons
    primary = plan.primary_thinking
    cover = {t: data.extra.get(t, pd.DataFrame()) for t in coverage_section.TABLES}
    figures = (("rates", lambda fmt: rates_plot(rates, fmt)),
               ("forest", lambda fmt: forest_plot(comp, primary, fmt, plan.comparisons)),
               ("truncation", lambda fmt: truncation_plot(rates, fmt)),
               ("coverage", lambda fmt: coverage_section.figure(cover, fmt)))
    plots = {f"{name}.{fmt}": b for name, draw in figures for fmt in ("png", "svg") if (b := draw(fmt))}

    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    def figure(name: str, alt: str, image_ref: ImageRef) -> list[str]:
        if f"{name}.png" not in plots:
            return []
        return [f"![{alt}]({image_ref(f'{name}.png', plots[f'{name}.png'])})", "",
                f"(vector version for a paper: `plots/{name}.svg`)", ""]

    def render(image_ref: ImageRef) -> str:
        present = {(c, t) for c, t in zip(rates["condition"], rates["thinking"])} if len(rates) else set()
        every = [(c, t) for t in THINKING_MODES for c in CONDITION_NAMES]
        # a partition with answers but no rates is a gap, named at the top; one without answers is one the study
        # did not run (a thinking mode it never asked for): named once, in the report's last section
        gaps = [f"{c}|{t}" for c, t in every if (c, t) in data.answered_partitions and (c, t) not in present]
        not_run = [(c, t) for c, t in every if (c, t) not in data.answered_partitions and (c, t) not in present]
        L = ["# evalmislead: study report", "", *report_summary.render(data, plan), "", TOC_MARK, ""]
        L += [f"Generated {now} from the stored rows. Analysis plan v{plan.version} (`{plan.sha256[:12]}`): "
              f"comparisons by a paired bootstrap over problems, {plan.n_boot:,} resamples, {level_label(plan.level)} "
              f"percentile intervals, seed {plan.seed}; a condition's own rate by a {level_label(plan.level)} "
              "cluster-adjusted Wilson interval (tests clustered in problems; it does not collapse when a cell has "
              "few or no events). A rate is a cell count over all tests of the condition.", ""]
        L += ["Every answer and test, one page each (prompt, answer, extracted file, each test's status on both "
              "versions, the bug's diff): [viewer/index.html](viewer/index.html); the misleading tests: "
              "[viewer/index.html#misleading](viewer/index.html#misleading).", ""]
        if data.study_problems is not None:
            L.append(f"Problems answered: {data.study_problems}.")
        if gaps:
            L += ["", f"**Partitions with answers but no rates** ({len(gaps)}): " + ", ".join(f"`{m}`" for m in gaps)
                  + " (materialize the analysis for them). Tables below cover what is stored."]
        for n in list(notes or []) + stale_notes(data, plan):
            L.append(f"- {n}")
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
        L += figure("rates", "Rates per condition", image_ref)
        L += sql_block(RATES_SQL)
        L += ["## 2. Primary comparisons", ""]
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
        L += figure("forest", f"The primary comparisons, thinking {primary}", image_ref)
        L += sql_block(COMPARISONS_SQL)
        L += ["## 3. Truncation", "", *truncation_lines(rates)]
        L += ["", md_table(truncation_table(rates)) if len(rates) else "_no rows_", ""]
        L += figure("truncation", "Truncation by condition", image_ref)
        L += sql_block(TRUNCATION_SQL)
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
        L += ["", *sql_block(THINKING_SQL)]
        L += ["## 5. Spec labels", "", *spec_section(data), "", *sql_block(SPEC_SQL),
              "## 6. Reasoning mentions (thinking on, `buggy_code`)", "", *mentions_section(data), "",
              *sql_block(MENTIONS_SQL), "## 7. Worked example", "", *example_section(data), "",
              *sql_block(EXAMPLE_SQL.replace("?", f"'{data.example_problem.get('task_id', EXAMPLE_TASK)}'"))]
        for i, section in enumerate(report_sections.sections(), start=8):
            frames = {t: data.extra.get(t, pd.DataFrame()) for t in section.tables}
            L += [f"## {i}. {section.title}", "", *section.render(frames), ""]
            if section.title == coverage_section.TITLE and "coverage.svg" in plots:
                L += ["(vector version of the coverage plot for a paper: `plots/coverage.svg`)", ""]
        L += ["## Method notes", "", *report_method.render(data.method), ""]
        if not_run:
            L += ["## Not in this study", "", *not_run_lines(not_run), ""]
        return with_contents(L)

    return Report(plots, render)


def not_run_lines(not_run: list[tuple[str, str]]) -> list[str]:
    """The partitions without answers, by thinking mode: a whole mode the study did not ask for in one line."""
    out = []
    for mode in THINKING_MODES:
        conds = [c for c, t in not_run if t == mode]
        if not conds:
            continue
        names = ", ".join(f"`{c}|{mode}`" for c in conds)
        if len(conds) == len(CONDITION_NAMES):
            out.append(f"- Thinking {mode}: not run by this study (no answers stored), so its {len(conds)} "
                       f"partitions have no rows: {names}.")
        else:
            out.append(f"- Thinking {mode}: conditions without answers (not run): {names}.")
    return out + ["", "A partition without answers is absent from the tables above: no rate, never a zero."]


TOC_MARK = "<!-- contents -->"


def anchor(heading: str) -> str:
    """The anchor of a '## N. Title' heading: 'sN' (stable when a title's wording changes); of an unnumbered
    one, its words joined by '-' ('method-notes')."""
    number = heading[3:].split(".", 1)[0].strip()
    return f"s{number}" if number.isdigit() else "-".join(heading[3:].lower().split())[:40]


def with_contents(lines: list[str]) -> str:
    """The report with an anchor before each '## ' heading and, at the contents mark, a linked list of them."""
    out, toc = [], []
    for line in lines:
        if line.startswith("## "):
            a = anchor(line)
            toc.append(f"- [{line[3:]}](#{a})")
            out += [f'<a id="{a}"></a>', ""]
        out.append(line)
    text = "\n".join(out)
    return text.replace(TOC_MARK, "**Contents**\n\n" + "\n".join(toc), 1)


def sql_block(sql: str) -> list[str]:
    """The SQL that reads a section's figures from the stored rows, as the later sections print theirs."""
    return ["SQL that reads these numbers from the stored rows:", "", "```sql", sql.strip(), "```", ""]


RATES_SQL = """\
SELECT condition, thinking, n_answers, n_tests, n_misleading, n_effective, n_both_pass, n_both_fail,
       misleading_rate, misleading_ci_low, misleading_ci_high, effective_rate, effective_ci_low, effective_ci_high,
       problems_with_misleading, problems_with_effective, n_problems
FROM condition_rates ORDER BY thinking, condition;
-- the counts, recomputed from the executed tests (a rate is a cell over all tests of the condition)
SELECT condition, thinking, count(*) AS n_tests,
       count(*) FILTER (WHERE outcome = 'misleading') AS n_misleading,
       count(*) FILTER (WHERE outcome = 'effective') AS n_effective,
       count(*) FILTER (WHERE outcome = 'misleading') / count(*) AS misleading_rate
FROM test_outcomes GROUP BY condition, thinking ORDER BY thinking, condition;"""

COMPARISONS_SQL = """\
SELECT thinking, comparison_id, metric, condition_a, condition_b, rate_a, rate_b, estimate, ci_low, ci_high,
       n_problems, n_tests_a, n_tests_b, n_zero_denominator, n_boot, verdict
FROM bootstrap_comparisons ORDER BY thinking, comparison_id;"""

TRUNCATION_SQL = """\
SELECT condition, thinking, n_answers, n_truncated, n_truncated_no_tests, n_zero_tests, n_unimportable,
       n_collect_one_version, n_errors, n_empty_spec
FROM condition_rates ORDER BY thinking, condition;
-- the answers that hit the token cap, one row each
SELECT condition, thinking, count(*) AS truncated, count(*) FILTER (WHERE n_tests = 0) AS truncated_no_tests
FROM truncated_answers GROUP BY condition, thinking ORDER BY thinking, condition;"""

THINKING_SQL = """\
SELECT count(*) FILTER (WHERE in_subset) AS in_subset, count(*) AS problems FROM truncation_matched_subset;
SELECT condition, metric, rate_off, rate_on, estimate, ci_low, ci_high, n_tests_off, n_tests_on
FROM thinking_comparisons ORDER BY condition, metric;"""

SPEC_SQL = """\
SELECT thinking, category, label_source, count(*) AS specs FROM spec_labels GROUP BY ALL ORDER BY ALL;
SELECT * FROM spec_label_agreement;
SELECT * FROM spec_label_splits ORDER BY thinking, condition, category;"""

MENTIONS_SQL = """\
SELECT mention_group, n_problems, n_problems_with_misleading, n_tests, n_misleading, misleading_rate
FROM reasoning_mention_summary;"""

EXAMPLE_SQL = """\
SELECT o.condition, o.thinking, o.test_id, o.buggy_status, o.fixed_status, o.outcome
FROM test_outcomes o WHERE o.task_id = ? ORDER BY o.condition, o.thinking, o.test_id;"""


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
