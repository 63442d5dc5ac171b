"""Problem-level estimands: the share of problems with at least one misleading / effective test.

A secondary analysis beside the preregistered pooled rates (prompts/analysis_plan_changes.md, amendment of
2026-12-07). The pooled test-level rate counts every test; an answer caught in a repetition loop can write
dozens of copies of one misleading test and carry a condition's rate, while the problems behind the rate are
few. The problem indicator counts each problem once: does the condition's answer to it hold at least one test
of the cell?

- ``problem_rates``: per condition x thinking, the problems run (answered, with or without tests), those with
  at least one scored test, and those with at least one misleading / effective test, as shares of both
  denominators; the share of the problems run with a Wilson score interval (problems are independent, one
  indicator each) at the plan's level. A condition none of whose problems has a test gets no share (NaN).
- ``problem_comparisons``: the plan's four comparisons on these indicators, paired over the problems both
  conditions answered (thinking on: the truncation-matched subset, as the primary comparisons): the exact
  McNemar test (a two-sided binomial test of the discordant pairs, p against 1 - level = 0.0125, the
  Bonferroni threshold of the four) and the paired bootstrap of the difference in shares with the plan's
  seed, resamples and level (percentile interval, with the Monte Carlo error of each bound). A problem
  without tests has indicator 0 on that side: it is in the denominator, as in the pooled rates.

``PROBLEM_COMPARISON_SQL`` recomputes the counts and discordant pairs of thinking off from the stored rows;
the report prints it. Nothing here touches DuckDB files or Dagster.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from evalmislead_assets.analysis import bootstrap, provenance
from evalmislead_assets.analysis import plan as analysis_plan
from evalmislead_assets.analysis.plan import (
    KEY,
    METRICS,
    Plan,
    answered,
    cells_present,
    per_problem,
    problem_counts,
    universe,
)
from evalmislead_assets.analysis.rate_interval import cluster_wilson

NAN = float("nan")


def mcnemar_exact(discordant_a: int, discordant_b: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of discordant_a successes in all discordant pairs at 1/2.

    1.0 when there is no discordant pair (no evidence either way)."""
    n = int(discordant_a) + int(discordant_b)
    if n == 0:
        return 1.0
    from scipy.stats import binomtest  # here, not at import: scipy.stats costs every run worker 1.5 s to load

    return float(binomtest(int(discordant_a), n, 0.5, alternative="two-sided").pvalue)


def _wilson(successes: int, n: int, level: float) -> tuple[float, float]:
    if n == 0:
        return NAN, NAN
    iv = cluster_wilson(np.array([1.0] * successes + [0.0] * (n - successes)), np.ones(n), level)
    return iv.ci_low, iv.ci_high


# ---------------------------------------------------------------- problem_rates


def problem_rates(outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """One row per condition x thinking present: problems run, with tests, with a misleading / effective test."""
    gens = analysis_plan.frame(generations, KEY + ["problem_idx"])
    gt = analysis_plan.frame(generated, KEY + ["problem_idx"])
    counts = problem_counts(outcomes)
    ans = answered(gens, gt, outcomes)
    rows = []
    for condition, thinking in cells_present(gens, gt, outcomes):
        pp = per_problem(counts, universe(ans, thinking, [condition]), condition, thinking)
        n, tested = len(pp), int((pp["n_tests"] > 0).sum())
        row: dict[str, Any] = {"condition": condition, "thinking": thinking, "n_problems": n,
                               "n_problems_with_tests": tested}
        for cell in ("misleading", "effective"):
            k = int((pp[f"n_{cell}"] > 0).sum())
            # no problem with a test (e.g. test_outcomes not materialized yet): not estimable, not 0
            lo, hi = _wilson(k, n, plan.level) if tested else (NAN, NAN)
            row.update({f"problems_with_{cell}": k, f"{cell}_share": analysis_plan.rate(k, n) if tested else NAN,
                        f"{cell}_share_ci_low": lo, f"{cell}_share_ci_high": hi,
                        f"{cell}_share_of_tested": analysis_plan.rate(k, tested)})
        row["level"] = plan.level
        rows.append(row)
    return analysis_plan.sha_col(pd.DataFrame(rows, columns=analysis_plan.columns("problem_rates")), plan)


# ---------------------------------------------------------------- problem_comparisons


def problem_comparisons(
    outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, plan: Plan,
) -> tuple[pd.DataFrame, list[str]]:
    """The plan's comparisons on problem indicators, per thinking mode; (rows, notes on what was skipped).

    The problems paired are those of the primary comparisons (rates.bootstrap_comparisons): every problem both
    conditions answered, and for a mode whose plan subset is truncation_matched only the matched problems."""
    from evalmislead_assets.analysis.rates import truncation_matched_subset

    counts = problem_counts(outcomes)
    ans = answered(generations, generated, outcomes)
    present = set(cells_present(generations, generated, outcomes))
    matched = truncation_matched_subset(outcomes, generations, generated, plan)
    matched_ids = set(matched.loc[matched["in_subset"].astype(bool), "task_id"]) if len(matched) else set()
    made_by = provenance.of_cells(generations)
    alpha = 1.0 - plan.level
    rows, notes = [], []
    for thinking in plan.comparison_thinking_modes:
        subset = plan.comparison_subset(thinking)
        primary = thinking == plan.primary_thinking
        for comp in plan.comparisons:
            a, b, cell = comp["condition_a"], comp["condition_b"], METRICS[comp["metric"]]
            missing = [x for x in (a, b) if (x, thinking) not in present]
            if missing:
                notes.append(f"thinking={thinking}: comparison {comp['id']} ({a} vs {b}) skipped, no rows for "
                             f"{', '.join(missing)}")
                continue
            probs = universe(ans, thinking, [a, b])
            if subset == "truncation_matched":
                probs = probs[probs["task_id"].isin(matched_ids)].reset_index(drop=True)
            pa, pb = per_problem(counts, probs, a, thinking), per_problem(counts, probs, b, thinking)
            ia = (pa[f"n_{cell}"].to_numpy() > 0).astype(float)
            ib = (pb[f"n_{cell}"].to_numpy() > 0).astype(float)
            ones = np.ones(len(ia))
            iv = bootstrap.paired_difference(ia, ones, ib, ones, **plan.boot_kwargs())
            da, db = int(((ia > 0) & (ib == 0)).sum()), int(((ib > 0) & (ia == 0)).sum())
            p = mcnemar_exact(da, db)
            ta, tb = pa["n_tests"].to_numpy() > 0, pb["n_tests"].to_numpy() > 0
            apart = provenance.mismatch(a, made_by.get((a, thinking)), b, made_by.get((b, thinking)))
            n = len(ia)
            note = None
            if n == 0:
                note = "no paired problem" + (" (empty truncation-matched subset)" if subset == "truncation_matched" else "")
            elif not ta.any() or not tb.any():
                note = f"0 tests in {' and '.join(x for x, t in ((a, ta), (b, tb)) if not t.any())}"
            elif apart:
                note = f"not comparable ({apart})"
            ok = note is None
            rows.append({
                "comparison_id": int(comp["id"]), "thinking": thinking,
                "role": "secondary" if primary else "report-only", "metric": comp["metric"],
                "condition_a": a, "condition_b": b, "subset": subset, "n_problems": n,
                "n_problems_with_tests_a": int(ta.sum()), "n_problems_with_tests_b": int(tb.sum()),
                "n_problems_with_tests_both": int((ta & tb).sum()),
                "problems_a": int(ia.sum()), "problems_b": int(ib.sum()),
                "share_a": analysis_plan.rate(ia.sum(), n), "share_b": analysis_plan.rate(ib.sum(), n),
                "estimate": iv.estimate if ok else NAN, "ci_low": iv.ci_low if ok else NAN,
                "ci_high": iv.ci_high if ok else NAN, "ci_low_mc_se": iv.mc_se_low if ok else NAN,
                "ci_high_mc_se": iv.mc_se_high if ok else NAN,
                "discordant_a": da, "discordant_b": db, "mcnemar_p": p if ok else NAN, "alpha": alpha,
                "excludes_zero": ok and iv.excludes_zero,
                "verdict": verdict(p, iv.excludes_zero, alpha, primary) if ok else f"not estimable ({note})",
                "level": plan.level, "n_boot": plan.n_boot, "seed": plan.seed, "note": note,
            })
    out = pd.DataFrame(rows, columns=analysis_plan.columns("problem_comparisons"))
    out = out.sort_values(["thinking", "comparison_id"], kind="stable").reset_index(drop=True)
    return analysis_plan.sha_col(out, plan), notes


def verdict(p: float, excludes_zero: bool, alpha: float, primary: bool) -> str:
    """A difference when the exact McNemar p is below alpha; says so when the paired-bootstrap interval disagrees."""
    if not primary:
        return "report-only"
    if p < alpha:
        return "difference (McNemar p < alpha; interval excludes 0)" if excludes_zero else \
            "difference by McNemar (p < alpha), interval includes 0"
    return "no difference claimed (McNemar p >= alpha)" + ("; interval excludes 0" if excludes_zero else "")


# The counts and discordant pairs of every ordered pair of conditions (thinking off, every problem both answered),
# from the stored rows: the report prints it beside the table.
PROBLEM_COMPARISON_SQL = """\
WITH answered AS (
  SELECT DISTINCT condition, thinking, task_id FROM test_generations WHERE thinking = 'off'
), flags AS (
  SELECT a.condition, a.task_id, count(o.test_id) AS n_tests,
         coalesce(bool_or(o.outcome = 'misleading'), false) AS has_misleading,
         coalesce(bool_or(o.outcome = 'effective'), false) AS has_effective
  FROM answered a LEFT JOIN test_outcomes o
    ON o.condition = a.condition AND o.thinking = a.thinking AND o.task_id = a.task_id
  GROUP BY a.condition, a.task_id
)
SELECT a.condition AS condition_a, b.condition AS condition_b, count(*) AS n_problems,
       count(*) FILTER (WHERE a.n_tests > 0) AS n_problems_with_tests_a,
       count(*) FILTER (WHERE b.n_tests > 0) AS n_problems_with_tests_b,
       count(*) FILTER (WHERE a.n_tests > 0 AND b.n_tests > 0) AS n_problems_with_tests_both,
       count(*) FILTER (WHERE a.has_misleading) AS misleading_a,
       count(*) FILTER (WHERE b.has_misleading) AS misleading_b,
       count(*) FILTER (WHERE a.has_misleading AND NOT b.has_misleading) AS misleading_discordant_a,
       count(*) FILTER (WHERE b.has_misleading AND NOT a.has_misleading) AS misleading_discordant_b,
       count(*) FILTER (WHERE a.has_effective) AS effective_a,
       count(*) FILTER (WHERE b.has_effective) AS effective_b,
       count(*) FILTER (WHERE a.has_effective AND NOT b.has_effective) AS effective_discordant_a,
       count(*) FILTER (WHERE b.has_effective AND NOT a.has_effective) AS effective_discordant_b
FROM flags a JOIN flags b ON a.task_id = b.task_id AND a.condition <> b.condition
GROUP BY a.condition, b.condition ORDER BY a.condition, b.condition"""
