"""One model's languages side by side, paired on problem_idx (analysis/language_comparison.py)."""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.analysis.language_comparison import COLUMNS, language_comparisons
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.settings import analysis_plan_path


def _frames(rows: list[tuple[str, int, list[str]]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(language, problem_idx, outcomes of its tests) per buggy_code|off answer."""
    gen = pd.DataFrame([{"language": lang, "condition": "buggy_code", "thinking": "off", "problem_idx": i}
                        for lang, i, _ in rows])
    out = pd.DataFrame([{"language": lang, "condition": "buggy_code", "thinking": "off", "problem_idx": i,
                         "outcome": o} for lang, i, outs in rows for o in outs],
                       columns=["language", "condition", "thinking", "problem_idx", "outcome"])
    return out, gen


def test_languages_are_paired_on_problem_idx_with_the_plans_bootstrap() -> None:
    plan = load_plan(analysis_plan_path())
    out, gen = _frames([("python", 0, ["misleading", "effective"]), ("python", 1, ["misleading"]),
                        ("python", 2, ["misleading"]),  # no Java answer for problem 2: not paired
                        ("java", 0, ["effective", "effective"]), ("java", 1, [])])  # an answer with zero tests
    df = language_comparisons(out, gen, ["python", "java"], "m", plan)
    assert list(df.columns) == COLUMNS
    mis = df[df["metric"] == "misleading_rate"].iloc[0]
    assert (mis["language_a"], mis["language_b"], mis["n_problems"]) == ("python", "java", 2)
    assert mis["rate_a"] == 2 / 3 and mis["rate_b"] == 0 and mis["estimate"] == 2 / 3
    assert mis["ci_low"] <= mis["estimate"] <= mis["ci_high"] and mis["level"] == plan.level
    assert mis["ci_low_mc_se"] >= 0 and mis["ci_high_mc_se"] >= 0  # each bound with its Monte Carlo error
    eff = df[df["metric"] == "effective_rate"].iloc[0]
    assert eff["rate_a"] == 1 / 3 and eff["rate_b"] == 1.0 and eff["n_tests_b"] == 2
    rest = df[df["metric"].isin(["line_coverage", "mutation_score"])]
    assert len(rest) == 2 and not rest["estimable"].any() and rest["estimate"].isna().all()
    assert rest["note"].str.contains("not estimable for java: no (?:JaCoCo|PIT) offline").all()


def test_no_paired_problem_or_no_test_is_not_estimable_never_zero() -> None:
    plan = load_plan(analysis_plan_path())
    out, gen = _frames([("python", 0, ["misleading"]), ("js", 1, ["effective"])])
    df = language_comparisons(out, gen, ["python", "js"], "m", plan)
    rates = df[df["metric"].str.endswith("_rate")]
    assert not rates["estimable"].any() and rates["estimate"].isna().all() and rates["rate_a"].isna().all()
    assert rates["note"].str.startswith("not estimable: no problem answered in both python and js").all()
    out, gen = _frames([("python", 0, ["misleading"]), ("js", 0, [])])
    rates = language_comparisons(out, gen, ["python", "js"], "m", plan)
    rates = rates[rates["metric"].str.endswith("_rate")]
    assert rates["note"].str.startswith("not estimable: no test in js on the 1 paired problems").all()
    assert rates["estimate"].isna().all()


def test_no_rows_give_an_empty_table() -> None:
    out, gen = _frames([])
    gen = pd.DataFrame(columns=["language", "condition", "thinking", "problem_idx"])
    df = language_comparisons(out, gen, ["python", "java"], "m", load_plan(analysis_plan_path()))
    assert df.empty and list(df.columns) == COLUMNS
