"""The study report from stored rows: Markdown, HTML and PNG plots (and the same Markdown for the UI).

Every table of PROTOCOL.md's "published run" section, in the same shape, for whatever the
warehouse holds; missing partitions are named at the top instead of failing.
"""

from __future__ import annotations

import ast
import base64
import datetime as dt
import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from evalmislead_assets import report_sections, settings
from evalmislead_assets import spec_labels as sl
from evalmislead_assets.analysis import Plan
from evalmislead_assets.partitions import CONDITION_NAMES, CONDITIONS, THINKING_MODES

EXAMPLE_TASK = "Python/30"
MAX_EXAMPLE_TESTS = 25

ImageRef = Callable[[str, bytes], str]


def report_dir() -> Path:
    """EVALMISLEAD_REPORT_DIR, else <data>/report."""
    raw = os.environ.get("EVALMISLEAD_REPORT_DIR", "").strip()
    return Path(raw).expanduser() if raw else settings.project_data_dir() / "report"


@dataclass
class ReportData:
    """The stored rows a report is drawn from (each frame may be empty)."""

    condition_rates: pd.DataFrame
    bootstrap_comparisons: pd.DataFrame
    truncation_matched_subset: pd.DataFrame
    thinking_comparisons: pd.DataFrame
    spec_labels: pd.DataFrame
    spec_label_agreement: pd.DataFrame
    spec_label_splits: pd.DataFrame
    reasoning_mentions: pd.DataFrame
    reasoning_mention_summary: pd.DataFrame
    example_outcomes: pd.DataFrame  # test_outcomes rows of the worked example's task
    example_sources: pd.DataFrame  # generated_tests rows (condition, thinking, source) of that task
    example_problem: dict = field(default_factory=dict)
    study_problems: int | None = None
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)  # tables read by report_sections


TABLES_READ = [
    "condition_rates", "bootstrap_comparisons", "truncation_matched_subset", "thinking_comparisons", "spec_labels",
    "spec_label_agreement", "spec_label_splits", "reasoning_mentions", "reasoning_mention_summary",
]


def load_data(warehouse) -> ReportData:  # noqa: ANN001 (storage.Warehouse; avoids an import cycle)
    frames = {t: warehouse.read_table(t) for t in TABLES_READ}
    task = pick_example_task(warehouse)
    ex_out = ex_src = pd.DataFrame()
    problem: dict = {}
    if task:
        ex_out = warehouse.query_df(
            "SELECT condition, thinking, test_id, buggy_status, fixed_status, outcome FROM test_outcomes "
            "WHERE task_id = ? ORDER BY condition, thinking, test_id", [task])
        ex_src = warehouse.query_df(
            "SELECT condition, thinking, source FROM generated_tests WHERE task_id = ?", [task])
        p = warehouse.query_df(
            "SELECT task_id, entry_point, buggy_code, fixed_code, bug_type FROM problems WHERE task_id = ?", [task])
        problem = p.iloc[0].to_dict() if len(p) else {"task_id": task}
    n = warehouse.query_df("SELECT count(DISTINCT task_id) AS n FROM test_generations")["n"].iloc[0]
    extra = {t: warehouse.read_table(t) for t in report_sections.tables()}
    return ReportData(**frames, example_outcomes=ex_out, example_sources=ex_src, example_problem=problem,
                      study_problems=int(n) if n else None, extra=extra)


def pick_example_task(warehouse) -> str | None:  # noqa: ANN001
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
    return None if t is None or (isinstance(t, float) and np.isnan(t)) else str(t)


# ---------------------------------------------------------------- formatting


def pct(x: object, digits: int = 1) -> str:
    return "–" if _missing(x) else f"{100 * float(x):.{digits}f} %"


def points(x: object) -> str:
    return "–" if _missing(x) else f"{100 * float(x):+.1f}"


def ci(lo: object, hi: object, as_points: bool = True) -> str:
    if _missing(lo) or _missing(hi):
        return "–"
    f = points if as_points else (lambda v: f"{100 * float(v):.1f}")
    return f"[{f(lo)}, {f(hi)}]"


def _missing(x: object) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and np.isnan(x))


def md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_no rows_"
    return df.to_markdown(index=False, disable_numparse=True)


def level_label(level: float) -> str:
    return f"{100 * level:g} %"


# ---------------------------------------------------------------- sections


def _rates_table(rates: pd.DataFrame, thinking: str) -> pd.DataFrame:
    r = rates[rates["thinking"] == thinking]
    rows = []
    for _, x in r.iterrows():
        rows.append({
            "condition": x["condition"], "role": CONDITIONS[x["condition"]].role if x["condition"] in CONDITIONS else "",
            "answers": x["n_answers"], "tests": x["n_tests"], "misleading": x["n_misleading"],
            "effective": x["n_effective"], "both pass": x["n_both_pass"], "both fail": x["n_both_fail"],
            "misleading rate": f"{pct(x['misleading_rate'])} {ci(x['misleading_ci_low'], x['misleading_ci_high'], False)}",
            "effective rate": f"{pct(x['effective_rate'])} {ci(x['effective_ci_low'], x['effective_ci_high'], False)}",
            "problems with an effective test": f"{x['problems_with_effective']}/{x['n_problems']}",
            "problems with a misleading test": f"{x['problems_with_misleading']}/{x['n_problems']}",
        })
    return pd.DataFrame(rows)


def _comparison_table(comp: pd.DataFrame, thinking: str) -> pd.DataFrame:
    c = comp[comp["thinking"] == thinking]
    return pd.DataFrame([{
        "#": x["comparison_id"], "metric": x["metric"].replace("_", " "),
        "a − b": f"{x['condition_a']} − {x['condition_b']}", "a": pct(x["rate_a"]), "b": pct(x["rate_b"]),
        "difference (points)": points(x["estimate"]), f"{level_label(x['level'])} CI": ci(x["ci_low"], x["ci_high"]),
        "problems": x["n_problems"], "verdict": x["verdict"],
    } for _, x in c.iterrows()])


def _truncation_table(rates: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([{
        "condition": x["condition"], "thinking": x["thinking"], "answers": x["n_answers"],
        "hit the cap": x["n_truncated"], "hit the cap, zero tests": x["n_truncated_no_tests"],
        "zero tests (any cause)": x["n_zero_tests"], "unimportable files": x["n_unimportable"],
        "server errors": x["n_errors"],
    } for _, x in rates.iterrows()])


def _thinking_table(tc: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([{
        "condition": x["condition"], "metric": x["metric"].replace("_", " "), "thinking off": pct(x["rate_off"]),
        "thinking on": pct(x["rate_on"]), "on − off (points)": points(x["estimate"]),
        f"{level_label(x['level'])} CI": ci(x["ci_low"], x["ci_high"]),
        "tests off / on": f"{x['n_tests_off']} / {x['n_tests_on']}",
    } for _, x in tc.iterrows()])


def test_body(source: str | None, test_id: str) -> str | None:
    """The source of the test function a test id names (parametrize suffix and file prefix ignored)."""
    if not isinstance(source, str):
        return None
    name = re.sub(r"\[.*\]$", "", str(test_id).split("::")[-1])
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return ast.get_source_segment(source, node)
    return None


def _example_section(data: ReportData) -> list[str]:
    p = data.example_problem
    if not p:
        return ["_No executed tests are stored yet._"]
    task = p.get("task_id")
    why = ("task 30 is in the run" if task == EXAMPLE_TASK
           else "task 30 is not in the run; this is the problem with the most misleading `buggy_code` tests")
    out = [f"`{p.get('entry_point', '?')}` ({task}; {why})."]
    if p.get("buggy_code") and p.get("fixed_code"):
        out += ["", "The bug (buggy → fixed):", "", "```diff", sl.bug_diff(p["buggy_code"], p["fixed_code"]), "```"]
    o = data.example_outcomes
    for thinking in THINKING_MODES:
        for cond in ("buggy_code", "fixed_code"):
            sub = o[(o["condition"] == cond) & (o["thinking"] == thinking)] if len(o) else o
            if sub.empty:
                continue
            counts = sub["outcome"].value_counts().to_dict()
            summary = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(counts.items()))
            out += ["", f"**{cond}, thinking {thinking}**: {len(sub)} tests ({summary}).", ""]
            src = data.example_sources
            srow = src[(src["condition"] == cond) & (src["thinking"] == thinking)] if len(src) else src
            source = srow["source"].iloc[0] if len(srow) else None
            rows = []
            for _, t in sub.head(MAX_EXAMPLE_TESTS).iterrows():
                body = test_body(source, t["test_id"])
                rows.append({"test": f"`{t['test_id']}`", "buggy": t["buggy_status"], "fixed": t["fixed_status"],
                             "outcome": t["outcome"]})
                if body:
                    rows[-1]["body"] = "<br>".join(
                        f"`{ln.strip()}`" for ln in body.splitlines()[1:6] if ln.strip()).replace("|", "\\|")
            out.append(md_table(pd.DataFrame(rows)))
            if len(sub) > MAX_EXAMPLE_TESTS:
                out.append(f"\n_({len(sub) - MAX_EXAMPLE_TESTS} more tests in `test_outcomes`.)_")
    return out


def _spec_section(data: ReportData) -> list[str]:
    lab = data.spec_labels
    if lab.empty:
        return ["_No spec labels stored (materialize `spec_labels`)._"]
    out = []
    cc = sl.category_counts(lab).pivot(index="thinking", columns="category", values="n_specs").fillna(0).astype(int)
    cols = ["transcribes_bug", "restores_correct", "neither"] + (["unlabelled"] if "unlabelled" in cc.columns else [])
    cc = cc.reindex(columns=cols, fill_value=0).reset_index()
    out += ["Specs per category (after human review; human labels replace the judge's):", "", md_table(cc)]
    src = lab["label_source"].fillna("none").value_counts().to_dict()
    unparsed = int(lab["judge_error"].notna().sum())
    out += ["", f"Label sources: {', '.join(f'{k} {v}' for k, v in sorted(src.items()))}; "
                f"specs with a judge error or unparseable answer: {unparsed}."]
    ag = data.spec_label_agreement
    if len(ag) and ag["n_reviewed"].sum() > 0:
        out += ["", "Agreement of the human review with the judge (specs labelled by both):", "", md_table(pd.DataFrame([{
            "thinking": x["thinking"], "label": x["label"], "reviewed": x["n_reviewed"], "agree": x["n_agree"],
            "agreement": pct(x["agreement"], 0), "Cohen's κ": "–" if _missing(x["kappa"]) else f"{x['kappa']:.2f}",
        } for _, x in ag.iterrows()]))]
    else:
        out += ["", f"_No human labels imported yet: fill in `{sl.review_csv_path()}` and re-materialize `spec_labels`._"]
    sp = data.spec_label_splits
    if len(sp):
        out += ["", "Misleading rate of the tests split by the spec's category (same thinking mode):", "",
                md_table(pd.DataFrame([{
                    "thinking": x["thinking"], "condition": x["condition"], "spec category": x["category"],
                    "problems": x["n_problems"], "tests": x["n_tests"], "misleading": x["n_misleading"],
                    "misleading rate": pct(x["misleading_rate"]), "effective rate": pct(x["effective_rate"]),
                } for _, x in sp.iterrows()]))]
    return out


def _mentions_section(data: ReportData) -> list[str]:
    s = data.reasoning_mention_summary
    if s.empty or data.reasoning_mentions.empty:
        return ["_No reasoning-mention rows (needs thinking-on `buggy_code` answers)._"]
    by = s.set_index("mention_group")
    m, nm, allg = by.loc["mentions"], by.loc["no_mention"], by.loc["all_with_tests"]
    out = [
        f"{m['n_problems']} of {allg['n_problems']} problems with tests mentioned the bug or a name/behaviour "
        f"mismatch in their reasoning; {m['n_problems_with_misleading']} of those still got a misleading test; "
        f"misleading rate {pct(m['misleading_rate'])} among them vs {pct(nm['misleading_rate'])} elsewhere.",
        "", md_table(pd.DataFrame([{
            "group": g, "problems": x["n_problems"], "with a misleading test": x["n_problems_with_misleading"],
            "tests": x["n_tests"], "misleading": x["n_misleading"], "misleading rate": pct(x["misleading_rate"]),
        } for g, x in by.iterrows()])),
    ]
    rm = data.reasoning_mentions
    if len(rm):
        ex = rm[rm["mentions"].astype(bool)].head(5)
        if len(ex):
            out += ["", "First mentions (snippets):", ""]
            out += [f"- {x['task_id']}: “{str(x['first_snippet'])[:240]}”" for _, x in ex.iterrows()]
    return out


# ---------------------------------------------------------------- plots


def _png(fig) -> bytes:  # noqa: ANN001
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def rates_plot(rates: pd.DataFrame) -> bytes | None:
    """Misleading and effective rate per condition, one panel per thinking mode, with intervals."""
    if rates.empty:
        return None
    from matplotlib.figure import Figure

    modes = [m for m in THINKING_MODES if (rates["thinking"] == m).any()]
    fig = Figure(figsize=(5.2 * len(modes), 3.8))
    axes = fig.subplots(1, len(modes), squeeze=False, sharey=True)[0]
    for ax, mode in zip(axes, modes):
        r = rates[rates["thinking"] == mode].set_index("condition").reindex(
            [c for c in CONDITION_NAMES if c in set(rates.loc[rates["thinking"] == mode, "condition"])])
        x = np.arange(len(r))
        for k, (name, color) in enumerate((("misleading", "#c0392b"), ("effective", "#2e86c1"))):
            val = r[f"{name}_rate"].astype(float).to_numpy() * 100
            lo = r[f"{name}_ci_low"].astype(float).to_numpy() * 100
            hi = r[f"{name}_ci_high"].astype(float).to_numpy() * 100
            err = np.nan_to_num(np.vstack([val - lo, hi - val]), nan=0.0).clip(min=0)
            ax.bar(x + (k - 0.5) * 0.38, np.nan_to_num(val), 0.38, yerr=err, capsize=3, color=color, label=name)
        ax.set_xticks(x, [c.replace("_", "\n") for c in r.index], fontsize=7)
        ax.set_ylabel("% of all tests")
        ax.set_title(f"thinking {mode}")
        ax.legend(fontsize=8)
    fig.suptitle(f"Rates per condition ({level_label(float(rates['level'].iloc[0]))} percentile intervals)", fontsize=10)
    return _png(fig)


def truncation_plot(rates: pd.DataFrame) -> bytes | None:
    """Answers that hit the token cap, and those that also yielded no test, per condition and mode."""
    if rates.empty:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    conds = [c for c in CONDITION_NAMES if c in set(rates["condition"])]
    x = np.arange(len(conds))
    modes = [m for m in THINKING_MODES if (rates["thinking"] == m).any()]
    width = 0.8 / (2 * len(modes))
    for i, mode in enumerate(modes):
        r = rates[rates["thinking"] == mode].set_index("condition").reindex(conds)
        for j, (col, hatch) in enumerate((("n_truncated", ""), ("n_truncated_no_tests", "//"))):
            off = (2 * i + j - (2 * len(modes) - 1) / 2) * width
            ax.bar(x + off, r[col].fillna(0).to_numpy(), width, hatch=hatch,
                   color=("#7f8c8d", "#e67e22")[i], edgecolor="black", linewidth=0.4,
                   label=f"{mode}: {'hit the cap' if j == 0 else 'hit the cap, zero tests'}")
    ax.set_xticks(x, [c.replace("_", "\n") for c in conds], fontsize=7)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("answers")
    ax.set_title("Truncation by condition", fontsize=10)
    ax.legend(fontsize=7)
    return _png(fig)


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
    plots = {k: v for k, v in (("rates.png", rates_plot(rates)), ("truncation.png", truncation_plot(rates))) if v}

    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    def render(image_ref: ImageRef) -> str:
        present = sorted({(c, t) for c, t in zip(rates["condition"], rates["thinking"])}) if len(rates) else []
        missing = [f"{c}|{t}" for t in THINKING_MODES for c in CONDITION_NAMES if (c, t) not in present]
        L = ["# evalmislead: study report", "",
             f"Generated {now} from the stored rows. Analysis plan v{plan.version} (`{plan.sha256[:12]}`): "
             f"paired bootstrap over problems, {plan.n_boot:,} resamples, {level_label(plan.level)} percentile "
             f"intervals, seed {plan.seed}. A rate is a cell count over all tests of the condition.", ""]
        if data.study_problems is not None:
            L.append(f"Problems answered: {data.study_problems}.")
        if missing:
            L += ["", f"**Partitions without rows** ({len(missing)} of {len(CONDITION_NAMES) * len(THINKING_MODES)}): "
                  + ", ".join(f"`{m}`" for m in missing) + ". Tables below cover what is stored."]
        for n in list(notes or []) + stale_notes(data, plan):
            L.append(f"- {n}")
        L += ["", "## 1. Rates and counts per condition", ""]
        if rates.empty:
            L.append("_No condition rates stored (materialize `condition_rates`)._")
        for mode in THINKING_MODES:
            if (rates["thinking"] == mode).any() if len(rates) else False:
                L += [f"### Thinking {mode}" + (" (primary)" if mode == plan.primary_thinking else " (report-only)"),
                      "", "Rates with their " + level_label(plan.level) + " percentile intervals (%).", "",
                      md_table(_rates_table(rates, mode)), ""]
        if "rates.png" in plots:
            L += [f"![Rates per condition]({image_ref('rates.png', plots['rates.png'])})", ""]
        L += ["## 2. Primary comparisons", ""]
        comp = data.bootstrap_comparisons
        if comp.empty:
            L.append("_No comparisons stored (materialize `bootstrap_comparisons`)._")
        for mode in THINKING_MODES:
            if len(comp) and (comp["thinking"] == mode).any():
                tag = "verdicts: a difference only where the interval excludes 0" if mode == plan.primary_thinking \
                    else "report-only, no verdicts"
                L += [f"### Thinking {mode} ({tag})", "", md_table(_comparison_table(comp, mode)), ""]
        L += ["## 3. Truncation", ""]
        for mode in THINKING_MODES:
            r = rates[rates["thinking"] == mode] if len(rates) else rates
            if len(r):
                L.append(f"- thinking {mode}: up to {int(r['n_truncated'].max())} answers per condition hit the cap "
                         f"({int(r['n_truncated_no_tests'].sum())} of them with zero tests); "
                         f"{int(r['n_unimportable'].sum())} test files across {len(r)} conditions could not be imported.")
        L += ["", md_table(_truncation_table(rates)) if len(rates) else "_no rows_", ""]
        if "truncation.png" in plots:
            L += [f"![Truncation by condition]({image_ref('truncation.png', plots['truncation.png'])})", ""]
        L += ["## 4. Thinking on vs off on the truncation-matched subset (report-only)", ""]
        sub = data.truncation_matched_subset
        n_sub = int(sub["in_subset"].astype(bool).sum()) if len(sub) else 0
        L.append(f"Problems where both modes produced at least one test in both `buggy_code` and `fixed_code`: "
                 f"**{n_sub}** of {len(sub)}.")
        tc = data.thinking_comparisons
        if n_sub and len(tc):
            L += ["", md_table(_thinking_table(tc))]
        elif not n_sub:
            L += ["", "_Empty subset: thinking-on and thinking-off rows for both conditions are needed._"]
        L += ["", "## 5. Spec labels", "", *_spec_section(data), "",
              "## 6. Reasoning mentions (thinking on, `buggy_code`)", "", *_mentions_section(data), "",
              "## 7. Worked example", "", *_example_section(data), ""]
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


def write(report: Report, out_dir: Path | None = None) -> WrittenReport:
    out = Path(out_dir or report_dir())
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
