"""Analysis functions on a tiny synthetic study whose answers are worked out by hand below."""

import json

import numpy as np
import pandas as pd
import pytest

from evalmislead_assets import analysis as an
from evalmislead_assets.settings import ConfigError

M, E, BP, BF = "misleading", "effective", "both_pass", "both_fail"

# (condition, thinking) -> task number -> (outcomes, finish_reason, import_ok)
STUDY = {
    ("buggy_code", "off"): {0: ([M, M, BP], "stop", True), 1: ([E, BF], "stop", True), 2: ([], "length", False),
                            3: ([E], "stop", True), 4: ([M], "stop", True)},
    ("fixed_code", "off"): {0: ([E, BP], "stop", True), 1: ([BP], "stop", True), 2: ([E, E], "stop", True),
                            3: ([], "stop", False), 4: ([BP], "stop", True)},
    ("buggy_code", "on"): {0: ([M], "stop", True), 1: ([], "length", False), 2: ([M, E], "stop", True),
                           3: ([BP], "stop", True), 4: ([M, M], "stop", True)},
    ("fixed_code", "on"): {0: ([E], "stop", True), 1: ([E], "stop", True), 2: ([BP], "stop", True),
                           3: ([], "length", False), 4: ([E], "stop", True)},
}


def tables(study=STUDY):
    outcomes, gens, gt = [], [], []
    for (cond, thinking), probs in study.items():
        for p, (cells, finish, ok) in probs.items():
            tid = f"Python/{p}"
            key = {"condition": cond, "thinking": thinking, "task_id": tid, "problem_idx": p}
            gens.append({**key, "finish_reason": finish, "error": None})
            gt.append({**key, "n_tests": len(cells), "import_ok": ok})
            outcomes += [{**key, "test_id": f"test_{i}", "outcome": c} for i, c in enumerate(cells)]
    return pd.DataFrame(outcomes), pd.DataFrame(gens), pd.DataFrame(gt)


@pytest.fixture(scope="module")
def plan():
    return an.load_plan()


def row(df, **where):
    sel = np.ones(len(df), dtype=bool)
    for k, v in where.items():
        sel &= df[k].to_numpy() == v
    assert sel.sum() == 1, where
    return df[sel].iloc[0]


def test_condition_rates_by_hand(plan):
    df = an.condition_rates(*tables(), plan)
    assert len(df) == 4 and set(df["plan_sha256"]) == {plan.sha256}
    b = row(df, condition="buggy_code", thinking="off")
    assert (b.n_problems, b.n_answers, b.n_tests) == (5, 5, 7)
    assert (b.n_misleading, b.n_effective, b.n_both_pass, b.n_both_fail) == (3, 2, 1, 1)
    assert b.misleading_rate == pytest.approx(3 / 7) and b.effective_rate == pytest.approx(2 / 7)
    assert (b.problems_with_effective, b.problems_with_misleading) == (2, 2)
    assert (b.n_zero_tests, b.n_truncated, b.n_truncated_no_tests, b.n_unimportable) == (1, 1, 1, 1)
    assert b.misleading_ci_low <= 3 / 7 <= b.misleading_ci_high
    f = row(df, condition="fixed_code", thinking="off")
    assert (f.n_tests, f.n_misleading, f.n_effective, f.problems_with_effective) == (6, 0, 3, 2)
    assert f.misleading_rate == 0 and f.effective_rate == pytest.approx(0.5)
    assert (f.n_truncated, f.n_truncated_no_tests, f.n_unimportable, f.n_zero_tests) == (0, 0, 1, 1)
    bon = row(df, condition="buggy_code", thinking="on")
    assert (bon.n_tests, bon.n_misleading) == (6, 4) and bon.misleading_rate == pytest.approx(2 / 3)
    fon = row(df, condition="fixed_code", thinking="on")
    assert fon.effective_rate == pytest.approx(0.75) and fon.n_truncated_no_tests == 1


def test_condition_with_no_tests_has_null_rate(plan):
    study = {("signature_only", "on"): {0: ([], "length", False), 1: ([], "length", False)}}
    df = an.condition_rates(*tables(study), plan)
    r = row(df, condition="signature_only", thinking="on")
    assert r.n_tests == 0 and r.n_truncated_no_tests == 2 and np.isnan(r.misleading_rate)


def test_bootstrap_comparisons_skip_missing_conditions_and_match_reference(plan):
    df, notes = an.bootstrap_comparisons(*tables(), plan)
    # model_spec is not in the run: comparisons 3 and 4 are skipped in both modes, and said so
    assert sorted(df["comparison_id"].unique()) == [1, 2]
    assert len(notes) == 2 and all("model_spec" in n for n in notes)
    r = row(df, thinking="off", comparison_id=1)
    assert r.estimate == pytest.approx(3 / 7 - 0) and r.n_problems == 5
    assert (r.rate_a, r.rate_b, r.n_tests_a, r.n_tests_b) == (pytest.approx(3 / 7), 0, 7, 6)
    assert r.role == "primary" and r.verdict.startswith(("difference", "no difference"))
    assert row(df, thinking="on", comparison_id=1).verdict == "report-only"
    # independent loop over the same per-problem counts and seed
    rng = np.random.default_rng(plan.seed)
    mis_a, den_a = np.array([2, 0, 0, 0, 1]), np.array([3, 2, 0, 1, 1])
    mis_b, den_b = np.array([0, 0, 0, 0, 0]), np.array([2, 1, 2, 0, 1])
    diffs = []

    def rate(num, den):
        return num.sum() / den.sum() if den.sum() else 0.0  # the plan's zero_denominator_rate

    for _ in range(plan.n_boot):
        i = rng.integers(0, 5, 5)
        diffs.append(rate(mis_a[i], den_a[i]) - rate(mis_b[i], den_b[i]))
    a = (1 - plan.level) / 2 * 100
    lo, hi = np.percentile(diffs, [a, 100 - a])
    assert (r.ci_low, r.ci_high) == (pytest.approx(lo), pytest.approx(hi))


def test_truncation_matched_subset_and_thinking_comparison_by_hand(plan):
    outcomes, gens, gt = tables()
    sub = an.truncation_matched_subset(outcomes, gens, gt, plan)
    assert list(sub["task_id"]) == [f"Python/{i}" for i in range(5)]
    assert list(sub.loc[sub["in_subset"], "task_id"]) == ["Python/0", "Python/4"]
    p2 = row(sub, task_id="Python/2")
    assert (p2.n_tests_buggy_off, p2.n_tests_fixed_off, p2.n_tests_buggy_on, p2.n_tests_fixed_on) == (0, 2, 2, 1)
    tc = an.thinking_comparisons(outcomes, sub, plan)
    bm = row(tc, condition="buggy_code", metric="misleading_rate")
    # off: (2+1)/(3+1) = 0.75; on: (1+2)/(1+2) = 1. Resamples: {0,0} -> 1 - 2/3, {4,4} -> 0, mixed -> 0.25;
    # each extreme has probability 1/4, far more than the 0.625 % tails.
    assert (bm.rate_off, bm.rate_on, bm.estimate) == (pytest.approx(0.75), 1.0, pytest.approx(0.25))
    assert (bm.ci_low, bm.ci_high) == (pytest.approx(0.0), pytest.approx(1 / 3))
    assert bm.n_problems == 2 and (bm.n_tests_off, bm.n_tests_on) == (4, 3)
    fe = row(tc, condition="fixed_code", metric="effective_rate")
    assert (fe.rate_off, fe.rate_on, fe.estimate) == (pytest.approx(1 / 3), 1.0, pytest.approx(2 / 3))
    assert (fe.ci_low, fe.ci_high) == (pytest.approx(0.5), pytest.approx(1.0))


def test_subset_is_empty_with_thinking_off_only(plan):
    study = {k: v for k, v in STUDY.items() if k[1] == "off"}
    outcomes, gens, gt = tables(study)
    sub = an.truncation_matched_subset(outcomes, gens, gt, plan)
    assert len(sub) == 5 and not sub["in_subset"].any()
    tc = an.thinking_comparisons(outcomes, sub, plan)
    assert (tc["n_problems"] == 0).all() and tc["estimate"].isna().all()


def test_spec_label_splits_by_hand(plan):
    outcomes, gens, gt = tables()
    labels = pd.DataFrame({"thinking": "off", "task_id": [f"Python/{i}" for i in range(4)],
                           "category": ["transcribes_bug", "restores_correct", "neither", "transcribes_bug"]})
    sp = an.spec_label_splits(outcomes, gens, gt, labels, plan)
    b = sp[(sp["condition"] == "buggy_code") & (sp["thinking"] == "off")].set_index("category")
    assert b.loc["transcribes_bug", "n_problems"] == 2 and b.loc["transcribes_bug", "n_tests"] == 4
    assert b.loc["transcribes_bug", "misleading_rate"] == pytest.approx(0.5)
    assert b.loc["restores_correct", "misleading_rate"] == 0
    assert b.loc["neither", "n_tests"] == 0 and np.isnan(b.loc["neither", "misleading_rate"])
    assert b.loc["unlabelled", "n_misleading"] == 1  # Python/4 has no label
    assert (sp["thinking"] == "off").all()  # no thinking-on labels given


def test_reasoning_mentions_by_hand(plan, tmp_path):
    kw_file = tmp_path / "kw.txt"
    kw_file.write_text("# comment\n\\bbug\\b\n\\bwrong\\b\nname says\n", encoding="utf-8")
    kw = an.load_keywords(kw_file)
    outcomes, gens, _ = tables()
    reasoning = {
        "Python/0": ("The function name says positive but it returns negatives: a bug?", None),
        "Python/1": ("let me think about the loop for a long", None),
        "Python/2": (None, "<think>I think the comparison is wrong here</think>\n```python\nx\n```"),
        "Python/3": ("Simple function, sums the list.", None),
        "Python/4": ("", "no thoughts"),
    }
    g = gens[(gens["condition"] == "buggy_code") & (gens["thinking"] == "on")].copy()
    g["reasoning_text"] = g["task_id"].map(lambda t: reasoning[t][0])
    g["response_text"] = g["task_id"].map(lambda t: reasoning[t][1])
    answers, matches, summary = an.reasoning_mentions(g, outcomes, kw, plan)
    a = answers.set_index("task_id")
    assert list(a.index[a["mentions"]]) == ["Python/0", "Python/2"]
    assert a.loc["Python/0", "n_matches"] == 2
    assert json.loads(a.loc["Python/0", "matched_keywords"]) == ["\\bbug\\b", "name says"]
    assert not a.loc["Python/4", "has_reasoning"] and a.loc["Python/2", "has_reasoning"]
    assert "comparison is wrong" in a.loc["Python/2", "first_snippet"]
    assert set(matches["match"]) == {"bug", "name says", "wrong"}
    s = summary.set_index("mention_group")
    # Python/1 produced no test: outside the summary
    assert s.loc["all_with_tests", "n_problems"] == 4
    assert tuple(s.loc["mentions", ["n_problems", "n_problems_with_misleading", "n_tests", "n_misleading"]]) == (2, 2, 3, 2)
    assert tuple(s.loc["no_mention", ["n_problems", "n_problems_with_misleading", "n_tests", "n_misleading"]]) == (2, 1, 3, 2)
    assert s.loc["mentions", "misleading_rate"] == pytest.approx(2 / 3)


def test_shipped_keywords_catch_typical_phrases(plan):
    kw = an.load_keywords(an.keywords_path(plan))
    hit = "Wait, the name get_positive suggests positives, but the code actually returns negatives. Maybe a bug."
    miss = "I will write tests for empty lists, single elements and long lists."
    assert an.find_mentions(hit, kw) and not an.find_mentions(miss, kw)


def test_plan_file_is_valid_and_hash_is_of_its_bytes(plan, tmp_path):
    assert plan.level == 0.9875 and plan.n_boot == 10_000 and len(plan.comparisons) == 4
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({**plan.data, "bootstrap": {**plan.data["bootstrap"], "level": 98.75}}))
    with pytest.raises(ConfigError, match="level"):
        an.load_plan(bad)
    other = tmp_path / "plan2.json"
    other.write_text(json.dumps(plan.data))
    assert an.load_plan(other).sha256 != plan.sha256  # whitespace differs: a different file, a different hash


def test_views_answer_common_questions_in_one_line(tmp_path):
    from evalmislead_assets.storage import Warehouse

    wh = Warehouse(tmp_path / "v.duckdb")
    outcomes, gens, gt = tables()
    for (cond, thinking) in STUDY:
        where = {"condition": cond, "thinking": thinking}
        for name, df in (("test_outcomes", outcomes), ("test_generations", gens), ("generated_tests", gt)):
            wh.replace_rows(name, df[(df["condition"] == cond) & (df["thinking"] == thinking)], where=where)
    q = wh.query_df
    assert q("SELECT count(*) AS n FROM misleading_tests WHERE thinking = 'off'")["n"][0] == 3
    live = q("SELECT * FROM live_rates WHERE condition = 'buggy_code' AND thinking = 'off'").iloc[0]
    assert (live["n_tests"], live["n_misleading"], live["misleading_pct"]) == (7, 3, 42.9)
    trunc = q("SELECT condition, thinking, task_id, n_tests FROM truncated_answers ORDER BY ALL")
    assert trunc.values.tolist() == [["buggy_code", "off", "Python/2", 0], ["buggy_code", "on", "Python/1", 0],
                                     ["fixed_code", "on", "Python/3", 0]]
    a = q("SELECT * FROM answers WHERE condition = 'buggy_code' AND thinking = 'off' ORDER BY problem_idx")
    assert a["n_tests"].tolist() == [3, 2, 0, 1, 1] and a["n_misleading"].tolist() == [2, 0, 0, 0, 1]
    assert q("SELECT count(*) AS n FROM unimportable_tests")["n"][0] == 4
    assert q("SELECT count(*) AS n FROM test_results")["n"][0] == len(outcomes)
    cells = q("SELECT * FROM problem_cells WHERE task_id = 'Python/0' AND condition = 'buggy_code' AND thinking = 'off'")
    assert (cells["n_tests"][0], cells["n_misleading"][0], cells["n_both_pass"][0]) == (3, 2, 1)
