"""Report section "Problem level": problems with at least one misleading / effective test, and the plan's four
comparisons on these indicators (exact McNemar test, paired bootstrap), from ``problem_rates`` and
``problem_comparisons`` (analysis/problem_level.py). Registered in section_list; the SQL printed under the
tables recomputes the counts and discordant pairs from the stored rows."""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalmislead_assets.analysis.problem_level import PROBLEM_COMPARISON_SQL
from evalmislead_assets.report.formatting import ci, level_label, mc_se, mc_stability_note, md_table, missing, points

TITLE = "Problem level: problems with at least one misleading or effective test (secondary)"
TABLES = ("problem_rates", "problem_comparisons")

INTRO = ("A secondary analysis added by the plan amendment of 2026-12-07 (prompts/analysis_plan_changes.md), beside "
         "the preregistered pooled rates, which stay the primary figures. A pooled rate counts every test, so one "
         "answer that repeats a test dozens of times can carry a condition's rate; here each problem counts once: "
         "does the condition's answer to it hold at least one misleading (effective) test? A problem whose answer "
         "gave no test counts as 0; both denominators are shown.")


def _share(k: Any, n: Any, tested: Any = 1) -> str:
    if not missing(tested) and int(tested) == 0:
        return "0 tests: not estimable"
    return "–" if missing(k) or missing(n) or int(n) == 0 else f"{int(k)} / {int(n)} ({100 * int(k) / int(n):.1f} %)"


def _p(p: Any) -> str:
    if missing(p):
        return "–"
    return f"{float(p):.4f}" if float(p) >= 0.0001 else f"{float(p):.1e}"


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    rates = frames.get("problem_rates", pd.DataFrame())
    comp = frames.get("problem_comparisons", pd.DataFrame())
    out = [INTRO, ""]
    if rates is None or rates.empty:
        return out + ["Not computed: `problem_rates` has no rows (materialize `problem_rates`)."]
    level = float(rates["level"].dropna().iloc[0]) if rates["level"].notna().any() else None
    lab = level_label(level) if level is not None else ""
    out += [f"Per condition (share of the problems run, with its {lab} Wilson interval over problems; and of the "
            "problems whose answer gave at least one test):", "", md_table(pd.DataFrame([{
                "condition": x["condition"], "thinking": x["thinking"], "problems run": x["n_problems"],
                "with tests": x["n_problems_with_tests"],
                "with a misleading test: of run":
                    f"{_share(x['problems_with_misleading'], x['n_problems'], x['n_problems_with_tests'])} "
                    f"{ci(x['misleading_share_ci_low'], x['misleading_share_ci_high'], False)}",
                "misleading: of those with tests": _share(x["problems_with_misleading"], x["n_problems_with_tests"]),
                "with an effective test: of run":
                    f"{_share(x['problems_with_effective'], x['n_problems'], x['n_problems_with_tests'])} "
                    f"{ci(x['effective_share_ci_low'], x['effective_share_ci_high'], False)}",
                "effective: of those with tests": _share(x["problems_with_effective"], x["n_problems_with_tests"]),
            } for _, x in rates.sort_values(["thinking", "condition"], kind="stable").iterrows()])), ""]
    if comp is None or comp.empty:
        return out + ["No comparison on problem indicators (materialize `problem_comparisons`)."]
    alpha = float(comp["alpha"].dropna().iloc[0]) if comp["alpha"].notna().any() else None
    out += [f"The plan's four comparisons on the problem indicators, paired over the problems both conditions "
            f"answered (thinking on: the truncation-matched subset): a = problems where condition a has the cell, "
            f"discordant = problems with it in one condition only; the exact McNemar test (two-sided binomial test "
            f"of the discordant pairs) against alpha = {alpha:g} (Bonferroni over four), and the paired bootstrap "
            f"of the difference in shares (plan seed and resamples, {lab} percentile interval).", ""]
    for mode in ("off", "on"):
        c = comp[comp["thinking"] == mode]
        if c.empty:
            continue
        out += [f"Thinking {mode}:", "", md_table(pd.DataFrame([{
            "#": x["comparison_id"], "cell": x["metric"].replace("_rate", ""),
            "a − b": f"{x['condition_a']} − {x['condition_b']}",
            "problems paired": x["n_problems"],
            "with tests a / b / both": f"{x['n_problems_with_tests_a']} / {x['n_problems_with_tests_b']} / "
                                       f"{x['n_problems_with_tests_both']}",
            "a vs b (problems)": f"{x['problems_a']} vs {x['problems_b']}",
            "discordant a / b": f"{x['discordant_a']} / {x['discordant_b']}",
            "exact McNemar p": _p(x["mcnemar_p"]),
            "difference (points)": points(x["estimate"]), f"{lab} CI": ci(x["ci_low"], x["ci_high"]),
            "MC error of the bounds (SE, points)": mc_se(x["ci_low_mc_se"], x["ci_high_mc_se"]),
            "verdict": x["verdict"],
        } for _, x in c.iterrows()])), ""]
    note = mc_stability_note(pd.concat([comp["ci_low_mc_se"], comp["ci_high_mc_se"]]), comp["n_boot"].iloc[0])
    if note:
        out += [note, ""]
    out += ["SQL of the counts and discordant pairs, thinking off (every ordered pair of conditions; the plan's "
            "comparison is the row of its two conditions):", "", "```sql", PROBLEM_COMPARISON_SQL, "```"]
    return out
