"""Pure functions over stored rows: per-condition rates, the primary comparisons, the matched subset.

Inputs are DataFrames with the columns of the upstream tables (``test_outcomes``,
``test_generations``, ``generated_tests``); outputs are the rows of the analysis tables
declared in store/schema.py. Nothing here touches DuckDB or Dagster. The plan and the per-problem
counts live in plan.py, the secondary analyses (spec-label splits, reasoning mentions) in
secondary.py and reasoning_mentions.py; import them from there.

Zero tests: a rate over zero tests is not estimable and stored as NaN; a
comparison where either side has zero tests gets no estimate, no interval and the verdict
"not estimable (0 tests in X)". Within a resample, a side whose drawn problems have zero
tests takes the plan's ``zero_denominator_rate``; ``n_zero_denominator`` counts those
resamples and the report shows it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from evalmislead_assets.analysis import bootstrap, provenance
from evalmislead_assets.analysis import plan as analysis_plan
from evalmislead_assets.analysis.plan import (
    CELLS,
    KEY,
    METRICS,
    SUBSET_CONDITIONS,
    Plan,
    answered,
    cells_present,
    per_problem,
    problem_counts,
    universe,
)
from evalmislead_assets.analysis.rate_interval import cluster_wilson
from evalmislead_assets.execution.collection import is_one_version_error
from evalmislead_assets.store.values import is_missing
from evalmislead_assets.study.conditions import is_empty_spec_error

NAN = float("nan")

# ---------------------------------------------------------------- condition_rates


def condition_rates(
    outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, plan: Plan
) -> pd.DataFrame:
    """One row per condition x thinking present: counts, pooled rates with intervals, truncation, imports.

    ``n_unimportable``: answers whose code failed to import or collect against either version
    (``n_collect_one_version`` of them against one version only); answers without code (none
    found, server error, empty model spec) are zero-test answers, not unimportable files.
    ``n_errors``: server/generation errors; ``n_empty_spec``: model_spec answers not requested
    because the spec was empty. Both are in ``n_answers``.
    """
    gens = analysis_plan.frame(generations, KEY + ["problem_idx", "finish_reason", "error"])
    made_by = provenance.of_cells(gens)
    gt = analysis_plan.frame(generated, KEY + ["problem_idx", "n_tests", "import_ok", "error"])
    if "error" not in gt.columns:
        gt = gt.assign(error=None)
    counts = problem_counts(outcomes)
    ans = answered(gens, gt, outcomes)
    rows = []
    for condition, thinking in cells_present(gens, gt, outcomes):
        probs = universe(ans, thinking, [condition])
        pp = per_problem(counts, probs, condition, thinking)
        g = gens[(gens["condition"] == condition) & (gens["thinking"] == thinking)]
        t = gt[(gt["condition"] == condition) & (gt["thinking"] == thinking)]
        no_tests = set(pp.loc[pp["n_tests"] == 0, "task_id"])
        truncated = g[g["finish_reason"].astype(object).eq("length")]
        empty_spec = g["error"].map(is_empty_spec_error).astype(bool)
        errors = g["error"].map(analysis_plan.is_error).astype(bool) & ~empty_spec
        failed = t["import_ok"].map(analysis_plan.is_false).astype(bool)  # NULL is not False
        file_failed = failed & analysis_plan.has_code(t)
        n_tests = int(pp["n_tests"].sum())
        # per-condition rates: cluster-adjusted Wilson (rate_interval.py, plan 1.3.0), which does not collapse
        # to a width of 0 when a cell has few or no events; the comparisons keep the paired bootstrap
        ivs = [cluster_wilson(pp[f"n_{c}"].to_numpy(), pp["n_tests"].to_numpy(), plan.level)
               for c in ("misleading", "effective")] if n_tests else [None, None]
        row = {
            "condition": condition, "thinking": thinking, "n_problems": len(pp), "n_answers": int(g["task_id"].nunique()),
            "n_errors": int(errors.sum()), "n_tests": n_tests,
            **{f"n_{c}": int(pp[f"n_{c}"].sum()) for c in CELLS},
            "misleading_rate": analysis_plan.rate(pp["n_misleading"].sum(), n_tests),
            "effective_rate": analysis_plan.rate(pp["n_effective"].sum(), n_tests),
            "problems_with_effective": int((pp["n_effective"] > 0).sum()),
            "problems_with_misleading": int((pp["n_misleading"] > 0).sum()),
            "n_zero_tests": len(no_tests), "n_truncated": int(truncated["task_id"].nunique()),
            "n_truncated_no_tests": int(truncated["task_id"].isin(no_tests).sum()),
            "n_unimportable": int(file_failed.sum()),
            "n_tests_collected": int(pd.to_numeric(t["n_tests"], errors="coerce").fillna(0).sum()),
            "n_collect_one_version": int((file_failed & t["error"].map(is_one_version_error).astype(bool)).sum()),
            "n_empty_spec": int(empty_spec.sum()),
        }
        for name, iv in zip(("misleading", "effective"), ivs):
            row[f"{name}_ci_low"] = iv.ci_low if iv else NAN
            row[f"{name}_ci_high"] = iv.ci_high if iv else NAN
        row.update(verified_rates(outcomes, gt, condition, thinking, set(pp["task_id"])))
        row.update(_made_by(made_by.get((condition, thinking)), condition, thinking, row))
        row.update({"level": plan.level, "n_boot": plan.n_boot, "seed": plan.seed})
        rows.append(row)
    return analysis_plan.sha_col(pd.DataFrame(rows, columns=analysis_plan.columns("condition_rates")), plan)


def verified_rates(outcomes: pd.DataFrame, generated: pd.DataFrame, condition: str, thinking: str,
                   task_ids: set[str]) -> dict[str, Any]:
    """The verified-subset sensitivity line: the rates over the tests of files inside the verified subset
    (generated_tests.verified), on the same problems as the condition's row. A report-only figure, not a
    comparison of the plan. Files scored before the column existed (verified NULL) count as unknown:
    when every file of the cell is unknown the counts are NULL and the rates NaN (not estimable)."""
    none = {"n_tests_verified": None, "misleading_rate_verified": NAN, "effective_rate_verified": NAN}
    if "verified" not in generated.columns or len(outcomes) == 0:
        return none
    g = generated[(generated["condition"] == condition) & (generated["thinking"] == thinking)
                  & generated["task_id"].isin(task_ids)]
    known = g["verified"].map(lambda v: not is_missing(v)).astype(bool)
    if len(g) and not known.any():
        return none
    verified_ids = set(g.loc[g["verified"].map(lambda v: not is_missing(v) and bool(v)).astype(bool), "task_id"])
    o = outcomes[(outcomes["condition"] == condition) & (outcomes["thinking"] == thinking)
                 & outcomes["task_id"].isin(verified_ids)]
    n = len(o)
    return {"n_tests_verified": n,
            "misleading_rate_verified": analysis_plan.rate((o["outcome"] == "misleading").sum(), n),
            "effective_rate_verified": analysis_plan.rate((o["outcome"] == "effective").sum(), n)}


def _made_by(p: provenance.Provenance | None, condition: str, thinking: str, row: dict[str, Any]) -> dict[str, Any]:
    """The cell's template, reported model and cap; a mixed cell's rates are not estimable, with the reason."""
    cap = p.single("max_tokens") if p else None
    out: dict[str, Any] = {"template_sha256": p.single("template_sha256") if p else None,
                           "reported_model": p.single("model") if p else None,
                           "max_tokens": int(cap) if cap is not None else None}
    mixed = p.mixed() if p else None
    out["provenance_note"] = f"{mixed}: rates not estimable; {provenance.fix_hint(condition, thinking)}" if mixed else None
    if mixed:
        out.update({k: NAN for k in row if k.endswith(("_rate", "_ci_low", "_ci_high", "_rate_verified"))})
    return out


# ---------------------------------------------------------------- bootstrap_comparisons


def bootstrap_comparisons(
    outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, plan: Plan
) -> tuple[pd.DataFrame, list[str]]:
    """The plan's comparisons per thinking mode, paired over the problems both conditions answered.

    Thinking off pairs over every problem both conditions answered. Thinking on (the plan's
    ``comparison_subsets``) pairs over the truncation-matched subset only: with a 16,384-token
    cap many thinking-on answers are cut with zero tests, and far more often in some conditions
    than in others (59 buggy_code vs 41 fixed_code in the published run), so an unmatched
    buggy-vs-fixed difference would mix "which problems produced tests at all" into "what the
    tests assert". On the subset both sides draw on the same problems, and the numbers are
    comparable with thinking_comparisons (same problems). PROTOCOL.md, "Thinking on".

    Comparisons sharing a pair of conditions share their resamples (one call, seeded with the
    plan's seed), so each row is reproducible on its own. Returns (rows, notes on what was skipped).
    """
    counts = problem_counts(outcomes)
    ans = answered(generations, generated, outcomes)
    present = set(cells_present(generations, generated, outcomes))
    matched = truncation_matched_subset(outcomes, generations, generated, plan)
    matched_ids = set(matched.loc[matched["in_subset"].astype(bool), "task_id"]) if len(matched) else set()
    rows, notes = [], []
    made_by = provenance.of_cells(generations)
    for thinking in plan.comparison_thinking_modes:
        subset = plan.comparison_subset(thinking)
        pairs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for c in plan.comparisons:
            pairs.setdefault((c["condition_a"], c["condition_b"]), []).append(c)
        for (a, b), comps in pairs.items():
            missing = [x for x in (a, b) if (x, thinking) not in present]
            if missing:
                notes.append(f"thinking={thinking}: {a} vs {b} skipped, no rows for {', '.join(missing)}")
                continue
            probs = universe(ans, thinking, [a, b])
            if subset == "truncation_matched":
                probs = probs[probs["task_id"].isin(matched_ids)].reset_index(drop=True)
            pa, pb = per_problem(counts, probs, a, thinking), per_problem(counts, probs, b, thinking)
            notes += _outcomes_missing_notes(generated, thinking, [(a, pa), (b, pb)])
            cells = [METRICS[c["metric"]] for c in comps]
            ivs = bootstrap.paired_differences(
                pa[[f"n_{x}" for x in cells]].to_numpy(), np.column_stack([pa["n_tests"]] * len(cells)),
                pb[[f"n_{x}" for x in cells]].to_numpy(), np.column_stack([pb["n_tests"]] * len(cells)),
                **plan.boot_kwargs(),
            )
            primary = thinking == plan.primary_thinking
            zero_sides = [x for x, p in ((a, pa), (b, pb)) if int(p["n_tests"].sum()) == 0]
            apart = provenance.mismatch(a, made_by.get((a, thinking)), b, made_by.get((b, thinking)))
            if apart:
                notes.append(f"thinking={thinking}: {a} vs {b} not comparable ({apart})")
            for comp, cell, iv in zip(comps, cells, ivs):
                estimable = not zero_sides and iv.n_problems > 0 and not apart
                rows.append({
                    "comparison_id": int(comp["id"]), "thinking": thinking,
                    "role": "primary" if primary else "report-only",
                    "metric": comp["metric"], "condition_a": a, "condition_b": b,
                    "rate_a": analysis_plan.rate(pa[f"n_{cell}"].sum(), pa["n_tests"].sum()),
                    "rate_b": analysis_plan.rate(pb[f"n_{cell}"].sum(), pb["n_tests"].sum()),
                    "estimate": iv.estimate if estimable else NAN, "ci_low": iv.ci_low if estimable else NAN,
                    "ci_high": iv.ci_high if estimable else NAN, "level": iv.level,
                    "n_boot": iv.n_boot, "seed": iv.seed, "n_problems": iv.n_problems,
                    "n_tests_a": int(pa["n_tests"].sum()), "n_tests_b": int(pb["n_tests"].sum()),
                    "n_zero_denominator": iv.n_zero_denominator, "excludes_zero": estimable and iv.excludes_zero,
                    "verdict": f"not comparable ({apart})" if apart else
                    verdict(iv.excludes_zero, primary, iv.n_problems, zero_sides, subset),
                    "subset": subset,
                    "ci_low_mc_se": iv.mc_se_low if estimable else NAN,
                    "ci_high_mc_se": iv.mc_se_high if estimable else NAN,
                    **tested_sides(pa, pb),
                })
    out = pd.DataFrame(rows, columns=analysis_plan.columns("bootstrap_comparisons"))
    out = out.sort_values(["thinking", "comparison_id"], kind="stable")
    return analysis_plan.sha_col(out.reset_index(drop=True), plan), notes


def tested_sides(pa: pd.DataFrame, pb: pd.DataFrame) -> dict[str, int]:
    """How many of the paired problems inform each side: those with at least one test in a, in b, in both."""
    ta, tb = pa["n_tests"].to_numpy() > 0, pb["n_tests"].to_numpy() > 0
    return {"n_problems_with_tests_a": int(ta.sum()), "n_problems_with_tests_b": int(tb.sum()),
            "n_problems_with_tests_both": int((ta & tb).sum())}


def _outcomes_missing_notes(generated: pd.DataFrame | None, thinking: str, sides: list[tuple[str, pd.DataFrame]]) -> list[str]:
    """A side with zero executed tests although generated_tests collected some: test_outcomes is missing."""
    if generated is None or len(generated) == 0:
        return []
    out = []
    for cond, p in sides:
        if int(p["n_tests"].sum()):
            continue
        g = generated[(generated["condition"] == cond) & (generated["thinking"] == thinking)]
        collected = int(pd.to_numeric(g["n_tests"], errors="coerce").fillna(0).sum())
        if collected:
            out.append(f"{cond}|{thinking}: test_outcomes has no rows although generated_tests collected "
                       f"{collected} tests; materialize test_outcomes for it (comparisons are not estimable)")
    return sorted(set(out))


def verdict(excludes_zero: bool, primary: bool, n_problems: int, zero_sides: list[str] | tuple[str, ...] = (),
            subset: str = "all") -> str:
    if n_problems == 0:
        return "not estimable (empty truncation-matched subset)" if subset == "truncation_matched" else "no data"
    if zero_sides:
        return f"not estimable (0 tests in {' and '.join(zero_sides)})"
    if not primary:
        return "report-only"
    return "difference (interval excludes 0)" if excludes_zero else "no difference claimed (interval includes 0)"


# ---------------------------------------------------------------- truncation-matched subset


def truncation_matched_subset(
    outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, plan: Plan
) -> pd.DataFrame:
    """One row per problem answered in buggy_code or fixed_code; in_subset when all four cells have tests."""
    counts = problem_counts(outcomes)
    ans = answered(generations, generated, outcomes)
    ans = ans[ans["condition"].isin(SUBSET_CONDITIONS)]
    probs = ans.drop_duplicates("task_id")[["task_id", "problem_idx"]].sort_values(["problem_idx", "task_id"])
    out = probs.reset_index(drop=True)
    for cond, short in zip(SUBSET_CONDITIONS, ("buggy", "fixed")):
        for thinking in ("off", "on"):
            out[f"n_tests_{short}_{thinking}"] = per_problem(counts, out, cond, thinking)["n_tests"].to_numpy()
    cols = ["n_tests_buggy_off", "n_tests_fixed_off", "n_tests_buggy_on", "n_tests_fixed_on"]
    out["in_subset"] = (out[cols] > 0).all(axis=1) if len(out) else pd.Series(dtype=bool)
    out["problem_idx"] = out["problem_idx"].astype("int64")
    return analysis_plan.sha_col(out, plan)


def thinking_comparisons(outcomes: pd.DataFrame, subset: pd.DataFrame, plan: Plan,
                         generations: pd.DataFrame | None = None) -> pd.DataFrame:
    """Thinking on minus off per condition and metric, paired over the truncation-matched problems.

    With ``generations``, a condition whose two modes' answers came from different templates or models (the
    caps differ by design) gets no estimate, and ``note`` says why."""
    made_by = provenance.of_cells(generations) if generations is not None else {}
    tc = plan.section("thinking_comparisons")
    metrics = tc.get("metrics", list(METRICS))
    counts = problem_counts(outcomes)
    probs = subset[subset["in_subset"].astype(bool)][["task_id", "problem_idx"]] if len(subset) else \
        pd.DataFrame(columns=["task_id", "problem_idx"])
    rows = []
    for cond in tc.get("conditions", list(SUBSET_CONDITIONS)):
        off, on = per_problem(counts, probs, cond, "off"), per_problem(counts, probs, cond, "on")
        cells = [METRICS[m] for m in metrics]
        ivs = bootstrap.paired_differences(
            on[[f"n_{x}" for x in cells]].to_numpy(), np.column_stack([on["n_tests"]] * len(cells)),
            off[[f"n_{x}" for x in cells]].to_numpy(), np.column_stack([off["n_tests"]] * len(cells)),
            **plan.boot_kwargs(),
        )
        apart = provenance.mismatch(f"{cond}|on", made_by.get((cond, "on")), f"{cond}|off",
                                    made_by.get((cond, "off")), fields=("template_sha256", "model"))
        estimable = int(off["n_tests"].sum()) > 0 and int(on["n_tests"].sum()) > 0 and not apart
        for metric, cell, iv in zip(metrics, cells, ivs):
            rows.append({
                "condition": cond, "metric": metric,
                "rate_off": analysis_plan.rate(off[f"n_{cell}"].sum(), off["n_tests"].sum()),
                "rate_on": analysis_plan.rate(on[f"n_{cell}"].sum(), on["n_tests"].sum()),
                "estimate": iv.estimate if estimable else NAN, "ci_low": iv.ci_low if estimable else NAN,
                "ci_high": iv.ci_high if estimable else NAN, "level": iv.level,
                "n_boot": iv.n_boot, "seed": iv.seed, "n_problems": iv.n_problems,
                "n_tests_off": int(off["n_tests"].sum()), "n_tests_on": int(on["n_tests"].sum()),
                "n_cell_off": int(off[f"n_{cell}"].sum()), "n_cell_on": int(on[f"n_{cell}"].sum()),
                "n_zero_denominator": iv.n_zero_denominator, "excludes_zero": estimable and iv.excludes_zero,
                "note": f"not comparable ({apart})" if apart else None,
                "ci_low_mc_se": iv.mc_se_low if estimable else NAN, "ci_high_mc_se": iv.mc_se_high if estimable else NAN,
            })
    return analysis_plan.sha_col(pd.DataFrame(rows, columns=analysis_plan.columns("thinking_comparisons")), plan)
