"""The report's tables and core sections, from stored rows (formatting only; no queries)."""

from __future__ import annotations

import ast
import re
from typing import Any

import pandas as pd

from evalmislead_assets.analysis.spec_labels import bug_diff, category_counts
from evalmislead_assets.report.formatting import (
    ci,
    level_label,
    mc_se,
    md_table,
    missing,
    pct,
    points,
    rate_or_not_estimable,
    rate_with_ci,
)
from evalmislead_assets.store.values import is_missing
from evalmislead_assets.study.conditions import CONDITIONS, THINKING_MODES

EXAMPLE_TASK = "Python/30"
MAX_EXAMPLE_TESTS = 25
ZERO_DEN = "resamples with 0 tests"


def rates_table(rates: pd.DataFrame, thinking: str) -> pd.DataFrame:
    r = rates[rates["thinking"] == thinking]
    rows = []
    for _, x in r.iterrows():
        rows.append({
            "condition": x["condition"], "role": CONDITIONS[x["condition"]].role if x["condition"] in CONDITIONS else "",
            "answers": x["n_answers"], "tests": x["n_tests"], "misleading": x["n_misleading"],
            "effective": x["n_effective"], "both pass": x["n_both_pass"], "both fail": x["n_both_fail"],
            "runner limit": x.get("n_limit") if not missing(x.get("n_limit")) else "not recorded",
            "misleading rate": rate_with_ci(x["misleading_rate"], x["misleading_ci_low"], x["misleading_ci_high"],
                                            x["n_tests"]),
            "effective rate": rate_with_ci(x["effective_rate"], x["effective_ci_low"], x["effective_ci_high"],
                                           x["n_tests"]),
            "problems with an effective test": f"{x['problems_with_effective']}/{x['n_problems']}",
            "problems with a misleading test": f"{x['problems_with_misleading']}/{x['n_problems']}",
        })
    return pd.DataFrame(rows)


def made_with_table(rates: pd.DataFrame) -> pd.DataFrame:
    """What made each condition's answers: template hash, the model the server answered as, the
    output cap, the problem count, and why a cell's rates are not estimable when its rows mix them."""
    if rates.empty or "template_sha256" not in rates:
        return pd.DataFrame()
    shown = lambda v, n=None: "mixed or unknown" if is_missing(v) else (str(v)[:n] if n else str(v))  # noqa: E731
    return pd.DataFrame([{
        "condition": x["condition"], "thinking": x["thinking"], "problems": x["n_problems"],
        "template": shown(x["template_sha256"], 12), "model": shown(x["reported_model"]),
        "cap": shown(x["max_tokens"] if is_missing(x["max_tokens"]) else int(x["max_tokens"])),
        "note": "" if is_missing(x["provenance_note"]) else x["provenance_note"],
    } for _, x in rates.sort_values(["thinking", "condition"]).iterrows()])


def comparison_table(comp: pd.DataFrame, thinking: str) -> pd.DataFrame:
    c = comp[comp["thinking"] == thinking]
    return pd.DataFrame([{
        "#": x["comparison_id"], "metric": x["metric"].replace("_", " "),
        "a − b": f"{x['condition_a']} − {x['condition_b']}",
        "a": rate_or_not_estimable(x["rate_a"], x["n_tests_a"]), "b": rate_or_not_estimable(x["rate_b"], x["n_tests_b"]),
        "difference (points)": points(x["estimate"]), f"{level_label(x['level'])} CI": ci(x["ci_low"], x["ci_high"]),
        "MC error of the bounds (SE, points)": mc_se(x.get("ci_low_mc_se"), x.get("ci_high_mc_se")),
        "problems": x["n_problems"], "problems with tests a / b / both": _tested(x),
        "tests a / b": f"{x['n_tests_a']} / {x['n_tests_b']}",
        ZERO_DEN: f"{x['n_zero_denominator']} of {x['n_boot']:,}", "verdict": x["verdict"],
    } for _, x in c.iterrows()])


def _tested(x: pd.Series) -> str:
    """How many of the paired problems inform each side: with a test in a, in b, in both ('–': not stored)."""
    vals = [x.get(f"n_problems_with_tests_{s}") for s in ("a", "b", "both")]
    return "–" if any(missing(v) for v in vals) else " / ".join(str(int(v)) for v in vals)


def comparison_subset_note(comp: pd.DataFrame, thinking: str) -> str:
    """How a mode's comparisons were paired: '' for all answered problems, else the subset and its size."""
    c = comp[comp["thinking"] == thinking]
    if c.empty or "subset" not in c.columns or not (c["subset"] == "truncation_matched").any():
        return ""
    n = int(c["n_problems"].max())
    return f"on the truncation-matched subset: {n} problem{'s' if n != 1 else ''}"


def truncation_table(rates: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([{
        "condition": x["condition"], "thinking": x["thinking"], "answers": x["n_answers"],
        "hit the cap": x["n_truncated"], "hit the cap, zero tests": x["n_truncated_no_tests"],
        "zero tests (any cause)": x["n_zero_tests"], "unimportable files": x["n_unimportable"],
        "of them collected on one version only": _int(x.get("n_collect_one_version")),
        "server errors": x["n_errors"], "empty model spec (not sent)": _int(x.get("n_empty_spec")),
    } for _, x in rates.iterrows()])


def _int(v: Any) -> int:
    return 0 if missing(v) else int(v)


def truncation_lines(rates: pd.DataFrame) -> list[str]:
    """Per thinking mode: cap hits, and test files (answers with code) that could not be imported or collected."""
    out = []
    for mode in THINKING_MODES:
        r = rates[rates["thinking"] == mode] if len(rates) else rates
        if len(r):
            one = int(r["n_collect_one_version"].fillna(0).sum()) if "n_collect_one_version" in r.columns else 0
            out.append(
                f"- thinking {mode}: up to {int(r['n_truncated'].max())} answers per condition hit the cap "
                f"({int(r['n_truncated_no_tests'].sum())} of them with zero tests); "
                f"{int(r['n_unimportable'].sum())} test files across {len(r)} conditions could not be imported or "
                f"collected ({one} of them against one version only; each counts zero tests). Answers without code "
                f"(none found, server errors, empty model specs) are not counted as files.")
    return out


def thinking_table(tc: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([{
        "condition": x["condition"], "metric": x["metric"].replace("_", " "),
        "thinking off": rate_or_not_estimable(x["rate_off"], x["n_tests_off"]),
        "thinking on": rate_or_not_estimable(x["rate_on"], x["n_tests_on"]), "on − off (points)": points(x["estimate"]),
        f"{level_label(x['level'])} CI": ci(x["ci_low"], x["ci_high"]),
        "MC error of the bounds (SE, points)": mc_se(x.get("ci_low_mc_se"), x.get("ci_high_mc_se")),
        "tests off / on": f"{x['n_tests_off']} / {x['n_tests_on']}",
        ZERO_DEN: f"{x['n_zero_denominator']} of {x['n_boot']:,}",
        **({"note": "" if is_missing(x["note"]) else x["note"]} if "note" in tc and tc["note"].notna().any() else {}),
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


def example_section(data) -> list[str]:  # data: report.ReportData
    p = data.example_problem
    if not p:
        return ["_No executed tests are stored yet._"]
    task = p.get("task_id")
    why = ("task 30 is in the run" if task == EXAMPLE_TASK
           else "task 30 is not in the run; this is the problem with the most misleading `buggy_code` tests")
    out = [f"`{p.get('entry_point', '?')}` ({task}; {why})."]
    if p.get("buggy_code") and p.get("fixed_code"):
        out += ["", "The bug (buggy → fixed):", "", "```diff", bug_diff(p["buggy_code"], p["fixed_code"]), "```"]
    o = data.example_outcomes
    for thinking in THINKING_MODES:
        for cond in ("buggy_code", "fixed_code"):
            sub = o[(o["condition"] == cond) & (o["thinking"] == thinking)] if len(o) else o
            if sub.empty:
                continue
            counts = sub["outcome"].value_counts().to_dict()
            summary = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(counts.items()))
            out += ["", f"**{cond}, thinking {thinking}**: {len(sub)} test{'' if len(sub) == 1 else 's'} ({summary}).", ""]
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


def spec_section(data) -> list[str]:
    lab = data.spec_labels
    if lab.empty:
        return ["_No spec labels stored (materialize `spec_labels`)._"]
    out = []
    cc = category_counts(lab).pivot(index="thinking", columns="category", values="n_specs").fillna(0).astype(int)
    cols = ["transcribes_bug", "restores_correct", "neither"] + (["unlabelled"] if "unlabelled" in cc.columns else [])
    cc = cc.reindex(columns=cols, fill_value=0).reset_index()
    out += ["Specs per category (human labels first, then the execution judge where it has evidence, then the "
            "LLM judge):", "", md_table(cc)]
    src = lab["label_source"].fillna("none").value_counts().to_dict()
    unparsed = int(lab["judge_error"].notna().sum())
    out += ["", f"Label sources: {', '.join(f'{k} {v}' for k, v in sorted(src.items()))}; "
                f"specs with a judge error or unparseable answer: {unparsed}."]
    out += _execution_judge_lines(lab)
    ag = data.spec_label_agreement
    pairs = ag["label"].isin(EXEC_PAIRS) if len(ag) else pd.Series(dtype=bool)
    if len(ag) and pairs.any():
        out += ["", "The execution judge against the LLM judge (every spec) and the human review (reviewed specs), "
                    "on the category, where both give one:", "", _agreement_table(ag[pairs])]
        ag = ag[~pairs]
    if len(ag) and ag["n_reviewed"].sum() > 0:
        out += ["", "Agreement of the human review with the LLM judge (specs labelled by both):", "",
                _agreement_table(ag)]
    else:
        review = f"`{data.review_csv}`" if data.review_csv else "the review CSV (EVALMISLEAD_REVIEW_CSV)"
        out += ["", f"_No human labels imported yet: fill in {review} and re-materialize `spec_labels`._"]
    sp = data.spec_label_splits
    if len(sp):
        by = sp["split_by"].fillna("category") if "split_by" in sp.columns else pd.Series("category", index=sp.index)
        for split, title in (("transcribes_bug", "by label (a), does the spec transcribe the bug (as PROTOCOL.md "
                                                 "words the split)"),
                             ("category", "by the spec's category"),
                             ("execution", "by the execution judge alone (no_evidence: the problems whose spec's "
                                           "examples side with neither version)")):
            part = sp[by == split]
            if part.empty:
                continue
            out += ["", f"Misleading rate of the tests split {title} (same thinking mode):", "",
                    md_table(pd.DataFrame([{
                        "thinking": x["thinking"], "condition": x["condition"], "spec label": x["category"],
                        "problems": x["n_problems"], "tests": x["n_tests"], "misleading": x["n_misleading"],
                        "misleading rate": rate_or_not_estimable(x["misleading_rate"], x["n_tests"]),
                        "effective rate": rate_or_not_estimable(x["effective_rate"], x["n_tests"]),
                    } for _, x in part.iterrows()]))]
    return out


EXEC_PAIRS = ("execution_vs_judge", "execution_vs_human")


def _agreement_table(ag: pd.DataFrame) -> str:
    return md_table(pd.DataFrame([{
        "thinking": x["thinking"], "label": x["label"], "compared": x["n_reviewed"], "agree": x["n_agree"],
        "agreement": pct(x["agreement"], 0), "Cohen's κ": "–" if missing(x["kappa"]) else f"{x['kappa']:.2f}",
    } for _, x in ag.iterrows()]))


def _execution_judge_lines(lab: pd.DataFrame) -> list[str]:
    """The execution judge's counts per thinking mode, and how many specs it gives no label."""
    if "exec_n_examples" not in lab.columns or not lab["exec_n_examples"].notna().any():
        return []
    out = ["", "Execution judge (the examples each spec states, run against the buggy and the fixed version; "
               "a label only where they side with one version):"]
    for thinking, g in lab.groupby("thinking", sort=True):
        cat = g["exec_category"]
        none = int(cat.isna().sum())
        no_examples = int((g["exec_n_examples"].fillna(0) == 0).sum())
        out.append(f"- thinking {thinking}: transcribes_bug {int((cat == 'transcribes_bug').sum())}, "
                   f"restores_correct {int((cat == 'restores_correct').sum())}, no evidence {none} of {len(g)} "
                   f"specs ({no_examples} without an example it can read); where it has none the label is the "
                   "human's or the LLM judge's.")
    return out


def _matcher_note(rm: pd.DataFrame) -> str:
    shas = sorted({str(x)[:12] for x in rm.get("keywords_sha256", pd.Series(dtype=object)).dropna()})
    return ("A mention is a match of the keyword matcher (`prompts/reasoning_keywords.txt`, sha256 "
            f"{', '.join(shas) or 'unknown'}…; an exclusion drops only the self-correction or test-design clause it "
            "matches). Its precision and recall were measured on a labelled set of reasoning sentences, not on "
            "this run's traces (docs/analysis.md, \"Reasoning mentions\": for the shipped file, on sentences it was "
            "not tuned on, it found about two in three mentions, and nearly all it found were mentions; an edited file is "
            "re-measured with `pytest -s evalmislead_tests/analysis/test_mentions.py`). A missed mention counts in the "
            "no-mention group, so the count above is, if anything, low.")


def mentions_section(data) -> list[str]:
    s = data.reasoning_mention_summary
    if s.empty or data.reasoning_mentions.empty:
        return ["_No reasoning-mention rows (needs thinking-on `buggy_code` answers)._"]
    by = s.set_index("mention_group")
    m, nm, allg = by.loc["mentions"], by.loc["no_mention"], by.loc["all_with_tests"]
    out = [
        f"{int(m['n_problems'])} of {int(allg['n_problems'])} problems with tests mentioned the bug or a "
        f"name/behaviour mismatch in their reasoning; {int(m['n_problems_with_misleading'])} of those still got a "
        "misleading test; "
        f"misleading rate {rate_or_not_estimable(m['misleading_rate'], m['n_tests'])} among them vs "
        f"{rate_or_not_estimable(nm['misleading_rate'], nm['n_tests'])} elsewhere.",
        "", md_table(pd.DataFrame([{
            "group": g, "problems": x["n_problems"], "with a misleading test": x["n_problems_with_misleading"],
            "tests": x["n_tests"], "misleading": x["n_misleading"],
            "misleading rate": rate_or_not_estimable(x["misleading_rate"], x["n_tests"]),
        } for g, x in by.iterrows()])),
        "", _matcher_note(data.reasoning_mentions),
    ]
    rm = data.reasoning_mentions
    if len(rm):
        ex = rm[rm["mentions"].astype(bool)].head(5)
        if len(ex):
            out += ["", "First mentions (snippets):", ""]
            out += [f"- {x['task_id']}: “{str(x['first_snippet'])[:240]}”" for _, x in ex.iterrows()]
    return out
