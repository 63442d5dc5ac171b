"""Secondary analyses over stored rows: misleading rate split by spec label, reasoning mentions.

Pure functions (no DuckDB, no Dagster). The mention matcher
itself is in ``reasoning_mentions``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from evalmislead_assets.analysis import plan as analysis_plan
from evalmislead_assets.analysis.plan import (
    KEY,
    Plan,
    answered,
    frame,
    per_problem,
    problem_counts,
    rate,
    sha_col,
    universe,
)
from evalmislead_assets.analysis.reasoning_mentions import Keywords, find_mentions, reasoning_of
from evalmislead_assets.store.values import is_missing
from evalmislead_assets.study.conditions import THINKING_MODES

# ---------------------------------------------------------------- spec label splits


def _label_a(labels: pd.DataFrame) -> pd.Series:
    """Label (a) per row as 'yes'/'no'/None: the final ``transcribes_bug`` label, else read off the category."""
    if "transcribes_bug" in labels.columns:
        vals = labels["transcribes_bug"].astype(object)
    else:
        vals = labels["category"].astype(object).map(
            lambda c: True if c == "transcribes_bug" else (False if c in ("restores_correct", "neither") else None))
    return vals.map(lambda v: None if is_missing(v) else ("yes" if bool(v) else "no"))


def spec_label_splits(
    outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, labels: pd.DataFrame, plan: Plan
) -> pd.DataFrame:
    """Rates of each split condition's tests grouped by the spec's label (same thinking mode).

    Groupings (``split_by``): by category (transcribes_bug / restores_correct / neither;
    problems without one form 'unlabelled'), and by label (a) alone as PROTOCOL.md words the
    split: ``transcribes_bug=yes`` / ``transcribes_bug=no`` (``=unlabelled`` where (a) is missing).
    Where the execution judge ran (``exec_n_examples`` stored for some spec), also by its category
    alone (``split_by = execution``): transcribes_bug / restores_correct / ``no_evidence``, so the
    problems it gives no label are counted in their own row.
    ``labels``: thinking, task_id, category and, where known, transcribes_bug and the exec_* columns.
    """
    conds = plan.section("spec_labels").get("split_conditions", ["buggy_code"])
    counts = problem_counts(outcomes)
    ans = answered(generations, generated, outcomes)
    lab = frame(labels, ["thinking", "task_id", "category"])
    lab = lab.assign(label_a=_label_a(lab)) if len(lab) else lab.assign(label_a=pd.Series(dtype=object))
    executed = "exec_n_examples" in lab.columns and bool(lab["exec_n_examples"].notna().any())
    lab = lab.assign(exec_split=lab["exec_category"].astype(object) if executed else None)
    groupings = [("category", "category"), ("transcribes_bug", "label_a")] + ([("execution", "exec_split")]
                                                                               if executed else [])
    rows = []
    for thinking in THINKING_MODES:
        lt = lab[lab["thinking"] == thinking][["task_id", "category", "label_a", "exec_split"]].drop_duplicates(
            "task_id")
        if lt.empty:
            continue
        for cond in conds:
            probs = universe(ans, thinking, [cond])
            if probs.empty:
                continue
            pp = per_problem(counts, probs, cond, thinking).merge(lt, on="task_id", how="left")
            pp["category"] = pp["category"].astype(object).where(pp["category"].notna(), "unlabelled")
            pp["label_a"] = "transcribes_bug=" + pp["label_a"].astype(object).where(pp["label_a"].notna(), "unlabelled")
            pp["exec_split"] = pp["exec_split"].astype(object).where(pp["exec_split"].notna(), "no_evidence")
            for split_by, column in groupings:
                for cat, g in pp.groupby(column, sort=True):
                    rows.append({
                        "thinking": thinking, "condition": cond, "category": cat, "n_problems": len(g),
                        "n_tests": int(g["n_tests"].sum()), "n_misleading": int(g["n_misleading"].sum()),
                        "misleading_rate": rate(g["n_misleading"].sum(), g["n_tests"].sum()),
                        "n_effective": int(g["n_effective"].sum()),
                        "effective_rate": rate(g["n_effective"].sum(), g["n_tests"].sum()),
                        "split_by": split_by,
                    })
    cols = analysis_plan.columns("spec_label_splits")
    return sha_col(pd.DataFrame(rows, columns=cols), plan)


# ---------------------------------------------------------------- reasoning mentions


def keywords_path(plan: Plan) -> Path:
    name = plan.section("reasoning_mentions").get("keywords_file", "reasoning_keywords.txt")
    return plan.path.parent / name


def reasoning_mentions(
    generations: pd.DataFrame, outcomes: pd.DataFrame, keywords: Keywords, plan: Plan, max_matches: int = 20
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(per answer, per match, summary) for the plan's condition and thinking mode.

    The summary covers problems whose answer produced at least one test: a problem without
    tests cannot get a misleading test whatever its reasoning says.
    """
    sec = plan.section("reasoning_mentions")
    cond, thinking = sec.get("condition", "buggy_code"), sec.get("thinking", "on")
    snip = int(sec.get("snippet_chars", 80))
    gens = frame(generations, KEY + ["problem_idx", "reasoning_text", "response_text"])
    g = gens[(gens["condition"] == cond) & (gens["thinking"] == thinking)].drop_duplicates("task_id")
    counts = problem_counts(outcomes)
    probs = answered(g).sort_values(["problem_idx", "task_id"])
    pp = per_problem(counts, probs, cond, thinking)
    merged = pp.merge(g[["task_id", "reasoning_text", "response_text"]], on="task_id", how="left")
    answers, matches = [], []
    for _, c in merged.iterrows():
        text = reasoning_of(c["reasoning_text"], c["response_text"])
        found = find_mentions(text, keywords, snip)
        answers.append({
            "keywords_sha256": keywords.sha256, "condition": cond, "thinking": thinking, "task_id": c["task_id"],
            "problem_idx": int(c["problem_idx"]), "has_reasoning": bool(text), "reasoning_chars": len(text),
            "mentions": bool(found), "n_matches": len(found),
            "matched_keywords": json.dumps(sorted({f["keyword"] for f in found})),
            "first_snippet": found[0]["snippet"] if found else None,
            "n_tests": int(c["n_tests"]), "n_misleading": int(c["n_misleading"]),
            "has_misleading": bool(c["n_misleading"] > 0),
        })
        for f in found[:max_matches]:
            matches.append({"keywords_sha256": keywords.sha256, "thinking": thinking, "task_id": c["task_id"], **f})
    ans_cols = analysis_plan.columns("reasoning_mentions")
    m_cols = analysis_plan.columns("reasoning_mention_matches")
    per_answer = pd.DataFrame(answers, columns=ans_cols)
    summary = []
    with_tests = per_answer[per_answer["n_tests"] > 0]
    for group, sel in (("mentions", with_tests["mentions"].astype(bool)),
                       ("no_mention", ~with_tests["mentions"].astype(bool)),
                       ("all_with_tests", pd.Series(True, index=with_tests.index))):
        s = with_tests[sel]
        summary.append({
            "keywords_sha256": keywords.sha256, "condition": cond, "thinking": thinking, "mention_group": group,
            "n_problems": len(s), "n_problems_with_misleading": int(s["has_misleading"].astype(bool).sum()),
            "n_tests": int(s["n_tests"].sum()), "n_misleading": int(s["n_misleading"].sum()),
            "misleading_rate": rate(s["n_misleading"].sum(), s["n_tests"].sum()),
        })
    s_cols = analysis_plan.columns("reasoning_mention_summary")
    return (sha_col(per_answer, plan), sha_col(pd.DataFrame(matches, columns=m_cols), plan),
            sha_col(pd.DataFrame(summary, columns=s_cols), plan))
