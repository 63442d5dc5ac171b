"""One model's languages side by side: the language_comparisons table.

For each pair of the study's languages (in the study file's order: a before b), thinking mode and condition:
the problems both languages answered (the same ``problem_idx``: HumanEvalPack's problems are the same 164 in
every language) are the pairs; the misleading and the effective rate of each language, pooled over those
problems (a cell's count over all tests, the protocol's denominator), and a minus b with the protocol's paired
bootstrap over problems (``analysis.bootstrap.paired_differences``: one resample drives both languages' rates),
at the plan's level (98.75 %). No paired problem, or no test on one side: the row says "not estimable" and has
no number. Coverage and mutation have no number for Java and JavaScript (no tool offline): one row per pair,
thinking mode and condition says so, with the reason.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from evalmislead_assets.analysis.bootstrap import paired_differences
from evalmislead_assets.analysis.plan import Plan
from evalmislead_assets.store import schema

TABLE = "language_comparisons"
COLUMNS = [c for c, _ in schema.TABLES[TABLE]]
METRICS = {"misleading_rate": "misleading", "effective_rate": "effective"}
#: coverage and mutation, per language without them: why there is no number (never a 0)
NOT_MEASURED = {
    "java": {"line_coverage": "no JaCoCo offline", "mutation_score": "no PIT offline"},
    "js": {"line_coverage": "no c8/V8 coverage offline", "mutation_score": "no Stryker offline"},
}


def _per_problem(outcomes: pd.DataFrame, generated: pd.DataFrame) -> pd.DataFrame:
    """(language, thinking, condition, problem_idx) -> tests, misleading, effective; an answer with zero tests
    is a problem with 0 tests (it counts in the pairing), a problem with no answer is absent."""
    keys = ["language", "thinking", "condition", "problem_idx"]
    answered = generated[keys].drop_duplicates()
    o = outcomes.assign(misleading=outcomes["outcome"] == "misleading", effective=outcomes["outcome"] == "effective")
    counts = o.groupby(keys).agg(tests=("outcome", "size"), misleading=("misleading", "sum"),
                                 effective=("effective", "sum")).reset_index()
    out = answered.merge(counts, on=keys, how="left").fillna({"tests": 0, "misleading": 0, "effective": 0})
    return out.astype({"tests": int, "misleading": int, "effective": int, "problem_idx": int})


def _row(plan: Plan, model: str, thinking: str, condition: str, metric: str, a: str, b: str,
         **values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {c: None for c in COLUMNS}
    base.update(plan_sha256=plan.sha256, model_name=model, thinking=thinking, condition=condition, metric=metric,
                language_a=a, language_b=b, level=plan.level, n_boot=plan.n_boot, seed=plan.seed)
    base.update(values)
    return base


def _rates(plan: Plan, model: str, thinking: str, condition: str, a: str, b: str,
           pa: pd.DataFrame, pb: pd.DataFrame) -> list[dict[str, Any]]:
    paired = pa.merge(pb, on="problem_idx", suffixes=("_a", "_b")).sort_values("problem_idx")
    n = len(paired)
    tests_a, tests_b = int(paired["tests_a"].sum()), int(paired["tests_b"].sum())
    note = None
    if n == 0:
        note = f"not estimable: no problem answered in both {a} and {b}"
    elif tests_a == 0 or tests_b == 0:
        empty = [lang for lang, t in ((a, tests_a), (b, tests_b)) if t == 0]
        note = f"not estimable: no test in {' and '.join(empty)} on the {n} paired problems"
    if note:
        return [_row(plan, model, thinking, condition, metric, a, b, n_problems=n, n_tests_a=tests_a,
                     n_tests_b=tests_b, estimable=False, note=note) for metric in METRICS]
    cells = list(METRICS.values())
    num_a = paired[[f"{c}_a" for c in cells]].to_numpy(float)
    num_b = paired[[f"{c}_b" for c in cells]].to_numpy(float)
    den_a = np.repeat(paired[["tests_a"]].to_numpy(float), len(cells), axis=1)
    den_b = np.repeat(paired[["tests_b"]].to_numpy(float), len(cells), axis=1)
    intervals = paired_differences(num_a, den_a, num_b, den_b, **plan.boot_kwargs())
    rows = []
    for j, (metric, cell) in enumerate(METRICS.items()):
        iv = intervals[j]
        cell_a, cell_b = int(paired[f"{cell}_a"].sum()), int(paired[f"{cell}_b"].sum())
        rows.append(_row(plan, model, thinking, condition, metric, a, b, rate_a=cell_a / tests_a,
                         rate_b=cell_b / tests_b, estimate=iv.estimate, ci_low=iv.ci_low, ci_high=iv.ci_high,
                         excludes_zero=iv.excludes_zero, n_problems=n, n_tests_a=tests_a, n_tests_b=tests_b,
                         n_cell_a=cell_a, n_cell_b=cell_b, n_zero_denominator=iv.n_zero_denominator,
                         estimable=True, ci_low_mc_se=iv.mc_se_low, ci_high_mc_se=iv.mc_se_high))
    return rows


def _not_measured(plan: Plan, model: str, thinking: str, condition: str, a: str, b: str) -> list[dict[str, Any]]:
    rows = []
    for metric in ("line_coverage", "mutation_score"):
        why = [f"{lang}: {NOT_MEASURED[lang][metric]}" for lang in (a, b) if lang in NOT_MEASURED]
        if why:
            rows.append(_row(plan, model, thinking, condition, metric, a, b, estimable=False,
                             note="not estimable for " + "; ".join(why)))
    return rows


def language_comparisons(outcomes: pd.DataFrame, generated: pd.DataFrame, languages: list[str], model: str,
                         plan: Plan) -> pd.DataFrame:
    """Every pair of ``languages`` for one model: rows of the language_comparisons table.

    ``outcomes``: test_outcomes rows (language, condition, thinking, problem_idx, outcome); ``generated``:
    generated_tests rows (language, condition, thinking, problem_idx), one per answer."""
    per = _per_problem(outcomes, generated)
    rows: list[dict[str, Any]] = []
    cells = per[["thinking", "condition"]].drop_duplicates().sort_values(["thinking", "condition"])
    for a, b in combinations(languages, 2):
        for thinking, condition in cells.itertuples(index=False):
            here = per[(per["thinking"] == thinking) & (per["condition"] == condition)]
            pa, pb = here[here["language"] == a], here[here["language"] == b]
            if pa.empty and pb.empty:
                continue
            cols = ["problem_idx", "tests", "misleading", "effective"]
            rows += _rates(plan, model, thinking, condition, a, b, pa[cols], pb[cols])
            rows += _not_measured(plan, model, thinking, condition, a, b)
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("n_problems", "n_tests_a", "n_tests_b", "n_cell_a", "n_cell_b", "n_zero_denominator", "n_boot"):
        df[c] = df[c].astype("Int64")
    for c in ("excludes_zero", "estimable"):
        df[c] = df[c].astype("boolean")
    return df
