"""Problem-level estimands on hand-made rows and on the recorded 1.5B run's per-problem counts: indicators, discordant
pairs, exact McNemar p, paired bootstrap."""

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from evalmislead_assets import settings
from evalmislead_assets.analysis import bootstrap
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.analysis.problem_level import (
    PROBLEM_COMPARISON_SQL,
    mcnemar_exact,
    problem_comparisons,
    problem_rates,
)
from evalmislead_assets.report.sections.problem_level import render

M, E, BP, BF = "misleading", "effective", "both_pass", "both_fail"

# thinking off, 10 problems. buggy_code: misleading in 0-5; fixed_code: misleading in 4, 5, 6;
# problems 7-9: fixed_code gave no test; problem 8: buggy_code gave no test either.
BUGGY = {0: [M, M, M], 1: [M], 2: [M, E], 3: [M, BP], 4: [M], 5: [M, BF], 6: [BP], 7: [E], 8: [], 9: [BP, E]}
FIXED = {0: [BP], 1: [E], 2: [E, BP], 3: [BP], 4: [M], 5: [M, E], 6: [M], 7: [], 8: [], 9: []}


def tables(study=None):
    study = study or {("buggy_code", "off"): BUGGY, ("fixed_code", "off"): FIXED}
    outcomes, gens, gt = [], [], []
    for (cond, thinking), probs in study.items():
        for p, cells in probs.items():
            key = {"condition": cond, "thinking": thinking, "task_id": f"Python/{p}", "problem_idx": p}
            gens.append({**key, "finish_reason": "stop", "error": None})
            gt.append({**key, "n_tests": len(cells), "import_ok": True, "source": "def test_x(): pass\n",
                       "error": None})
            outcomes += [{**key, "test_id": f"t.py::test_{i}", "outcome": c} for i, c in enumerate(cells)]
    return pd.DataFrame(outcomes), pd.DataFrame(gens), pd.DataFrame(gt)


@pytest.fixture(scope="module")
def plan():
    return load_plan(settings.analysis_plan_path())


def test_exact_mcnemar_on_known_discordant_counts():
    # 19 vs 5 discordant pairs (the recorded 1.5B's buggy_code vs fixed_code problems): p = 0.0066
    assert mcnemar_exact(19, 5) == pytest.approx(0.006610751152038574, abs=1e-12)
    assert round(mcnemar_exact(19, 5), 4) == 0.0066
    assert mcnemar_exact(5, 19) == mcnemar_exact(19, 5)  # two-sided: symmetric
    assert mcnemar_exact(5, 0) == pytest.approx(2 * 0.5 ** 5)  # all five pairs one way: 0.0625
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 0) == 1.0  # no discordant pair: no evidence
    assert mcnemar_exact(4, 1) == pytest.approx(binomtest(4, 5, 0.5).pvalue) == pytest.approx(0.375)


def test_problem_comparison_counts_and_p_by_hand(plan):
    out, gens, gt = tables()
    df, notes = problem_comparisons(out, gens, gt, plan)
    assert sorted(df["comparison_id"]) == [1, 2] and set(df["thinking"]) == {"off"}  # model_spec, thinking on: none
    assert any("model_spec" in n for n in notes)
    c1 = df[(df["comparison_id"] == 1) & (df["thinking"] == "off")].iloc[0]
    assert (c1.n_problems, c1.n_problems_with_tests_a, c1.n_problems_with_tests_b, c1.n_problems_with_tests_both) == (
        10, 9, 7, 7)
    assert (c1.problems_a, c1.problems_b, c1.discordant_a, c1.discordant_b) == (6, 3, 4, 1)
    assert c1.share_a == pytest.approx(0.6) and c1.share_b == pytest.approx(0.3)
    assert c1.estimate == pytest.approx(0.3)
    assert c1.mcnemar_p == pytest.approx(0.375)
    assert c1.verdict.startswith("no difference claimed") and c1.alpha == pytest.approx(1 - plan.level)
    assert c1.role == "secondary"
    # the interval is the plan's paired bootstrap of the indicators (mean over problems), same seed
    ia = np.array([1, 1, 1, 1, 1, 1, 0, 0, 0, 0], dtype=float)
    ib = np.array([0, 0, 0, 0, 1, 1, 1, 0, 0, 0], dtype=float)
    iv = bootstrap.paired_difference(ia, np.ones(10), ib, np.ones(10), **plan.boot_kwargs())
    assert (c1.ci_low, c1.ci_high) == (iv.ci_low, iv.ci_high)
    assert c1.ci_low_mc_se >= 0 and c1.ci_high_mc_se >= 0
    # effective (comparison 2): buggy 2, 7, 9; fixed 1, 2, 5 -> discordant 2 (7, 9) vs 2 (1, 5)
    c2 = df[(df["comparison_id"] == 2) & (df["thinking"] == "off")].iloc[0]
    assert (c2.problems_a, c2.problems_b, c2.discordant_a, c2.discordant_b, c2.mcnemar_p) == (3, 3, 2, 2, 1.0)


def test_a_large_problem_level_difference_is_claimed(plan):
    buggy = {p: [M] for p in range(30)}
    fixed = {p: ([M] if p < 2 else [BP]) for p in range(30)}
    out, gens, gt = tables({("buggy_code", "off"): buggy, ("fixed_code", "off"): fixed})
    c1 = problem_comparisons(out, gens, gt, plan)[0].iloc[0]
    assert (c1.discordant_a, c1.discordant_b) == (28, 0)
    assert c1.mcnemar_p == pytest.approx(2 * 0.5 ** 28)
    assert c1.excludes_zero and c1.verdict.startswith("difference (McNemar p < alpha")


def test_a_side_without_tests_is_not_estimable(plan):
    out, gens, gt = tables({("buggy_code", "off"): BUGGY, ("fixed_code", "off"): {p: [] for p in BUGGY}})
    c1 = problem_comparisons(out, gens, gt, plan)[0].iloc[0]
    assert c1.n_problems_with_tests_b == 0 and np.isnan(c1.estimate) and np.isnan(c1.mcnemar_p)
    assert c1.verdict == "not estimable (0 tests in fixed_code)"


def test_problem_rates_state_both_denominators(plan):
    out, gens, gt = tables()
    r = problem_rates(out, gens, gt, plan).set_index("condition")
    b, f = r.loc["buggy_code"], r.loc["fixed_code"]
    assert (b.n_problems, b.n_problems_with_tests, b.problems_with_misleading, b.problems_with_effective) == (10, 9, 6, 3)
    assert b.misleading_share == pytest.approx(0.6) and b.misleading_share_of_tested == pytest.approx(6 / 9)
    assert b.misleading_share_ci_low < 0.6 < b.misleading_share_ci_high
    assert (f.n_problems, f.n_problems_with_tests, f.problems_with_misleading) == (10, 7, 3)
    assert f.effective_share_of_tested == pytest.approx(3 / 7)
    # a condition none of whose problems has a test: not estimable, never 0
    out, gens, gt = tables({("buggy_code", "off"): BUGGY, ("fixed_code", "off"): {p: [] for p in BUGGY}})
    f = problem_rates(out, gens, gt, plan).set_index("condition").loc["fixed_code"]
    assert f.n_problems == 10 and f.n_problems_with_tests == 0
    assert np.isnan(f.misleading_share) and np.isnan(f.misleading_share_ci_high) and np.isnan(f.effective_share_of_tested)
    assert "0 tests: not estimable" in "\n".join(render({"problem_rates": problem_rates(out, gens, gt, plan),
                                                          "problem_comparisons": pd.DataFrame()}))


def test_printed_sql_gives_the_same_counts(plan):
    out, gens, gt = tables()
    con = duckdb.connect(":memory:")
    con.register("test_outcomes", out)
    con.register("test_generations", gens)
    sql = con.execute(PROBLEM_COMPARISON_SQL).df()
    s = sql[(sql["condition_a"] == "buggy_code") & (sql["condition_b"] == "fixed_code")].iloc[0]
    c1 = problem_comparisons(out, gens, gt, plan)[0].iloc[0]
    assert (s.n_problems, s.n_problems_with_tests_a, s.n_problems_with_tests_b, s.n_problems_with_tests_both) == (
        c1.n_problems, c1.n_problems_with_tests_a, c1.n_problems_with_tests_b, c1.n_problems_with_tests_both)
    assert (s.misleading_a, s.misleading_b, s.misleading_discordant_a, s.misleading_discordant_b) == (
        c1.problems_a, c1.problems_b, c1.discordant_a, c1.discordant_b)


def test_section_shows_counts_p_and_sql(plan):
    out, gens, gt = tables()
    frames = {"problem_rates": problem_rates(out, gens, gt, plan),
              "problem_comparisons": problem_comparisons(out, gens, gt, plan)[0]}
    text = "\n".join(render(frames))
    assert "6 vs 3" in text and "4 / 1" in text and "0.3750" in text and PROBLEM_COMPARISON_SQL in text
    assert "6 / 10 (60.0 %)" in text and "6 / 9 (66.7 %)" in text
    empty = "\n".join(render({"problem_rates": pd.DataFrame(), "problem_comparisons": pd.DataFrame()}))
    assert "Not computed" in empty


# Per-problem counts of the recorded 1.5B run (buggy_code and fixed_code, thinking off), extracted from a replay of
# the bundled pack (`evalmislead run --replay --conditions buggy_code,fixed_code,...`): 164 problems, 480 and
# 546 tests, 56 and 33 misleading.
RECORDED = Path(__file__).resolve().parents[1] / "data" / "recorded_1p5b_buggy_fixed_counts.csv"


def _recorded_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    counts = pd.read_csv(RECORDED)
    outcomes, gens, gt = [], [], []
    for _, r in counts.iterrows():
        for cond, side in (("buggy_code", "buggy"), ("fixed_code", "fixed")):
            key = {"condition": cond, "thinking": "off", "task_id": r["task_id"], "problem_idx": int(r["problem_idx"])}
            n, m, e = int(r[f"{side}_tests"]), int(r[f"{side}_misleading"]), int(r[f"{side}_effective"])
            cells = [M] * m + [E] * e + [BP] * (n - m - e)
            gens.append({**key, "finish_reason": "stop", "error": None})
            gt.append({**key, "n_tests": n, "import_ok": n > 0, "source": "x", "error": None})
            outcomes += [{**key, "test_id": f"t.py::test_{i}", "outcome": c} for i, c in enumerate(cells)]
    return pd.DataFrame(outcomes), pd.DataFrame(gens), pd.DataFrame(gt)


def test_recorded_run_c1_on_problem_indicators(plan):
    from evalmislead_assets.analysis.rates import bootstrap_comparisons

    out, gens, gt = _recorded_tables()
    c1 = problem_comparisons(out, gens, gt, plan)[0].set_index("comparison_id").loc[1]
    assert (c1.n_problems, c1.problems_a, c1.problems_b, c1.discordant_a, c1.discordant_b) == (164, 22, 8, 19, 5)
    assert (c1.n_problems_with_tests_a, c1.n_problems_with_tests_b, c1.n_problems_with_tests_both) == (92, 91, 68)
    assert round(c1.mcnemar_p, 4) == 0.0066 and c1.mcnemar_p < c1.alpha
    assert (round(100 * c1.ci_low, 1), round(100 * c1.ci_high, 1)) == (1.2, 15.9)  # the plan's seed and resamples
    # the preregistered test-level C1 on the same rows: +5.6 [-7.0, +22.3], interval includes 0
    t1 = bootstrap_comparisons(out, gens, gt, plan)[0].set_index("comparison_id").loc[1]
    assert (round(100 * t1.estimate, 1), round(100 * t1.ci_low, 1), round(100 * t1.ci_high, 1)) == (5.6, -7.0, 22.3)
    assert (t1.n_problems, t1.n_problems_with_tests_both) == (164, 68)
    assert 0 < t1.ci_low_mc_se < 0.01 and 0 < t1.ci_high_mc_se < 0.01  # well under a point at 10,000 resamples
