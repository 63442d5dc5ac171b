"""Analysis functions on a tiny synthetic study whose answers are worked out by hand below."""

import json

import numpy as np
import pandas as pd
import pytest

from evalmislead_assets import settings
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.analysis.rates import (
    bootstrap_comparisons,
    condition_rates,
    thinking_comparisons,
    truncation_matched_subset,
)
from evalmislead_assets.analysis.reasoning_mentions import find_mentions, load_keywords
from evalmislead_assets.analysis.secondary import keywords_path, reasoning_mentions, spec_label_splits
from evalmislead_assets.errors import ConfigError

M, E, BP, BF = "misleading", "effective", "both_pass", "both_fail"

# (condition, thinking) -> task number -> (outcomes, finish_reason, import_ok)
# import_ok None: the answer had no code (never reached collection; stored as import_ok False, source NULL)
STUDY = {
    ("buggy_code", "off"): {0: ([M, M, BP], "stop", True), 1: ([E, BF], "stop", True), 2: ([], "length", None),
                            3: ([E], "stop", True), 4: ([M], "stop", True)},
    ("fixed_code", "off"): {0: ([E, BP], "stop", True), 1: ([BP], "stop", True), 2: ([E, E], "stop", True),
                            3: ([], "stop", False), 4: ([BP], "stop", True)},
    ("buggy_code", "on"): {0: ([M], "stop", True), 1: ([], "length", None), 2: ([M, E], "stop", True),
                           3: ([BP], "stop", True), 4: ([M, M], "stop", True)},
    ("fixed_code", "on"): {0: ([E], "stop", True), 1: ([E], "stop", True), 2: ([BP], "stop", True),
                           3: ([], "length", None), 4: ([E], "stop", True)},
}


def tables(study=STUDY, errors=None):
    """``errors``: (condition, thinking, task number) -> (test_generations.error, generated_tests.error)."""
    errors = errors or {}
    outcomes, gens, gt = [], [], []
    for (cond, thinking), probs in study.items():
        for p, (cells, finish, ok) in probs.items():
            tid = f"Python/{p}"
            key = {"condition": cond, "thinking": thinking, "task_id": tid, "problem_idx": p}
            gen_error, gt_error = errors.get((cond, thinking, p), (None, None))
            if ok is None and gt_error is None:
                gt_error = f"generation failed: {gen_error}" if gen_error else "no code found in the answer"
            gens.append({**key, "finish_reason": finish, "error": gen_error})
            gt.append({**key, "n_tests": len(cells), "import_ok": bool(ok),
                       "source": None if ok is None else "def test_x(): pass\n",
                       "error": gt_error})
            outcomes += [{**key, "test_id": f"test_{i}", "outcome": c} for i, c in enumerate(cells)]
    return pd.DataFrame(outcomes), pd.DataFrame(gens), pd.DataFrame(gt)


@pytest.fixture(scope="module")
def plan():
    return load_plan(settings.analysis_plan_path())


def row(df, **where):
    sel = np.ones(len(df), dtype=bool)
    for k, v in where.items():
        sel &= df[k].to_numpy() == v
    assert sel.sum() == 1, where
    return df[sel].iloc[0]


def test_condition_rates_by_hand(plan):
    df = condition_rates(*tables(), plan)
    assert len(df) == 4 and set(df["plan_sha256"]) == {plan.sha256}
    b = row(df, condition="buggy_code", thinking="off")
    assert (b.n_problems, b.n_answers, b.n_tests) == (5, 5, 7)
    assert (b.n_misleading, b.n_effective, b.n_both_pass, b.n_both_fail) == (3, 2, 1, 1)
    assert b.misleading_rate == pytest.approx(3 / 7) and b.effective_rate == pytest.approx(2 / 7)
    assert (b.problems_with_effective, b.problems_with_misleading) == (2, 2)
    # Python/2 was cut at the cap with no code: zero tests, but not an unimportable file
    assert (b.n_zero_tests, b.n_truncated, b.n_truncated_no_tests, b.n_unimportable) == (1, 1, 1, 0)
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
    df = condition_rates(*tables(study), plan)
    r = row(df, condition="signature_only", thinking="on")
    assert r.n_tests == 0 and r.n_truncated_no_tests == 2 and np.isnan(r.misleading_rate)


def test_bootstrap_comparisons_skip_missing_conditions_and_match_reference(plan):
    df, notes = bootstrap_comparisons(*tables(), plan)
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
    sub = truncation_matched_subset(outcomes, gens, gt, plan)
    assert list(sub["task_id"]) == [f"Python/{i}" for i in range(5)]
    assert list(sub.loc[sub["in_subset"], "task_id"]) == ["Python/0", "Python/4"]
    p2 = row(sub, task_id="Python/2")
    assert (p2.n_tests_buggy_off, p2.n_tests_fixed_off, p2.n_tests_buggy_on, p2.n_tests_fixed_on) == (0, 2, 2, 1)
    tc = thinking_comparisons(outcomes, sub, plan)
    bm = row(tc, condition="buggy_code", metric="misleading_rate")
    # off: (2+1)/(3+1) = 0.75; on: (1+2)/(1+2) = 1. Resamples: {0,0} -> 1 - 2/3, {4,4} -> 0, mixed -> 0.25;
    # each extreme has probability 1/4, far more than the 0.625 % tails.
    assert (bm.rate_off, bm.rate_on, bm.estimate) == (pytest.approx(0.75), 1.0, pytest.approx(0.25))
    assert (bm.ci_low, bm.ci_high) == (pytest.approx(0.0), pytest.approx(1 / 3))
    assert bm.n_problems == 2 and (bm.n_tests_off, bm.n_tests_on) == (4, 3)
    fe = row(tc, condition="fixed_code", metric="effective_rate")
    assert (fe.rate_off, fe.rate_on, fe.estimate) == (pytest.approx(1 / 3), 1.0, pytest.approx(2 / 3))
    assert (fe.ci_low, fe.ci_high) == (pytest.approx(0.5), pytest.approx(1.0))
    # the same template and model in both modes (caps differ by design): compared as before
    gens = gens.assign(template_sha256="a" * 64, model="m", max_tokens=gens["thinking"].map({"off": 4096, "on": 16384}))
    same = thinking_comparisons(outcomes, sub, plan, gens)
    assert same["estimate"].tolist() == tc["estimate"].tolist() and same["note"].isna().all()
    # buggy_code's thinking-on answers made with an edited template: no estimate for it, and why
    edited = gens.assign(template_sha256=gens["template_sha256"].where(
        ~((gens["condition"] == "buggy_code") & (gens["thinking"] == "on")), "b" * 64))
    tc2 = thinking_comparisons(outcomes, sub, plan, edited)
    b2 = row(tc2, condition="buggy_code", metric="misleading_rate")
    assert np.isnan(b2.estimate) and not b2.excludes_zero
    assert b2.note == "not comparable (prompt template differs: buggy_code|on bbbbbbbbbbbb, buggy_code|off aaaaaaaaaaaa)"
    assert row(tc2, condition="fixed_code", metric="effective_rate").estimate == pytest.approx(2 / 3)


def test_subset_is_empty_with_thinking_off_only(plan):
    study = {k: v for k, v in STUDY.items() if k[1] == "off"}
    outcomes, gens, gt = tables(study)
    sub = truncation_matched_subset(outcomes, gens, gt, plan)
    assert len(sub) == 5 and not sub["in_subset"].any()
    tc = thinking_comparisons(outcomes, sub, plan)
    assert (tc["n_problems"] == 0).all() and tc["estimate"].isna().all()


def test_spec_label_splits_by_hand(plan):
    outcomes, gens, gt = tables()
    labels = pd.DataFrame({"thinking": "off", "task_id": [f"Python/{i}" for i in range(4)],
                           "category": ["transcribes_bug", "restores_correct", "neither", "transcribes_bug"]})
    sp = spec_label_splits(outcomes, gens, gt, labels, plan)
    b = sp[(sp["condition"] == "buggy_code") & (sp["thinking"] == "off")].set_index("category")
    assert b.loc["transcribes_bug", "n_problems"] == 2 and b.loc["transcribes_bug", "n_tests"] == 4
    assert b.loc["transcribes_bug", "misleading_rate"] == pytest.approx(0.5)
    assert b.loc["restores_correct", "misleading_rate"] == 0
    assert b.loc["neither", "n_tests"] == 0 and np.isnan(b.loc["neither", "misleading_rate"])
    assert b.loc["unlabelled", "n_misleading"] == 1  # Python/4 has no label
    assert (sp["thinking"] == "off").all()  # no thinking-on labels given


def test_spec_label_splits_by_the_execution_judge_count_the_problems_without_evidence(plan):
    outcomes, gens, gt = tables()
    labels = pd.DataFrame({"thinking": "off", "task_id": [f"Python/{i}" for i in range(4)],
                           "category": ["transcribes_bug", "restores_correct", "neither", "transcribes_bug"],
                           "exec_category": ["transcribes_bug", None, None, "restores_correct"],
                           "exec_n_examples": [2, 0, 3, 1]})
    sp = spec_label_splits(outcomes, gens, gt, labels, plan)
    b = sp[(sp["condition"] == "buggy_code") & (sp["split_by"] == "execution")].set_index("category")
    # Python/1 and Python/2 have no evidence, Python/4 no label row at all
    assert b["n_problems"].to_dict() == {"no_evidence": 3, "restores_correct": 1, "transcribes_bug": 1}
    assert b["n_tests"].sum() == sp[(sp["condition"] == "buggy_code") & (sp["split_by"] == "category")]["n_tests"].sum()
    # a table stored before the execution judge (no example counts) gets no execution rows
    old = labels.assign(exec_category=None, exec_n_examples=None)
    assert "execution" not in set(spec_label_splits(outcomes, gens, gt, old, plan)["split_by"])


def test_reasoning_mentions_by_hand(plan, tmp_path):
    kw_file = tmp_path / "kw.txt"
    kw_file.write_text("# comment\n\\bbug\\b\n\\bwrong\\b\nname says\n", encoding="utf-8")
    kw = load_keywords(kw_file)
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
    answers, matches, summary = reasoning_mentions(g, outcomes, kw, plan)
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
    kw = load_keywords(keywords_path(plan))
    hit = "Wait, the name get_positive suggests positives, but the code actually returns negatives. Maybe a bug."
    miss = "I will write tests for empty lists, single elements and long lists."
    assert find_mentions(hit, kw) and not find_mentions(miss, kw)


# Sentences as they appear in thinking-on reasoning. A mention means noticing *this* code's bug.
NOTICES_THE_BUG = [
    "The function name is get_positive, but the code returns the negative numbers instead of the positive ones.",
    "Hmm, the implementation seems wrong: it filters e < 0.",
    "So the function appears to be buggy, since it uses < instead of >.",
    "It should return the positive numbers but it returns the negative ones.",
    "This doesn't match its name at all.",
    "Despite its name, get_positive keeps only values below zero.",
    "There is a bug in the code: the comparison is reversed.",
    "The code is actually incorrect for empty strings.",
    "The behaviour does not match the function name, which suggests positives.",
    "The docstring says sorted ascending, but the code sorts in descending order.",
    "There's an off-by-one error in the implementation: range(1, n) skips n.",
]
ORDINARY_REASONING = [
    "Wait, that's wrong, let me recompute: 3 + 4 is 7.",
    "I made a mistake in the expected value; the sum is 10, not 12.",
    "Good tests catch bugs, so I'll include edge cases.",
    "These tests help find bugs in the function, including boundary cases.",
    "Let me recompute, that is incorrect: the list has four elements.",
    "Actually, no, I think I should return to the first test and make it simpler.",
    "I will write tests for empty lists, single elements and long lists.",
    "Wait, the expected output should be [1, 2] but I wrote [2, 1] in my test; let me fix that.",
    "The tests should cover branches to catch any bug in the implementation.",
    "If the function were buggy, these tests would fail.",
]


@pytest.mark.parametrize("sentence", NOTICES_THE_BUG)
def test_shipped_keywords_find_a_noticed_bug(plan, sentence):
    kw = load_keywords(keywords_path(plan))
    assert find_mentions(f"Let me read the code. {sentence} Now the tests.", kw), sentence


@pytest.mark.parametrize("sentence", ORDINARY_REASONING)
def test_shipped_keywords_ignore_self_correction_and_test_design(plan, sentence):
    kw = load_keywords(keywords_path(plan))
    assert find_mentions(f"Let me read the code. {sentence} Now the tests.", kw) == [], sentence


def test_exclusions_drop_only_the_sentence_they_are_in(tmp_path):
    f = tmp_path / "kw.txt"
    f.write_text("\\bbug in the code\\b\nexclude: \\bfind any\\b\n", encoding="utf-8")
    kw = load_keywords(f)
    assert len(kw.patterns) == 1 and len(kw.exclusions) == 1
    text = "Tests should find any bug in the code. Oh: there is a bug in the code, it negates."
    found = find_mentions(text, kw)
    assert [m["position"] for m in found] == [text.rindex("bug in the code")]
    f.write_text("\\bbug\\b\nexclude: (unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="line 2"):
        load_keywords(f)


def test_plan_file_is_valid_and_hash_is_of_its_bytes(plan, tmp_path):
    assert plan.level == 0.9875 and plan.n_boot == 10_000 and len(plan.comparisons) == 4
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({**plan.data, "bootstrap": {**plan.data["bootstrap"], "level": 98.75}}))
    with pytest.raises(ConfigError, match="level"):
        load_plan(bad)
    other = tmp_path / "plan2.json"
    other.write_text(json.dumps(plan.data))
    assert load_plan(other).sha256 != plan.sha256  # whitespace differs: a different file, a different hash


def test_views_answer_common_questions_in_one_line(tmp_path):
    from evalmislead_assets.store.database import Warehouse

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
    # only fixed_code|off Python/3 had code that failed to import; answers without code are not counted
    assert q("SELECT task_id FROM unimportable_tests")["task_id"].tolist() == ["Python/3"]
    assert q("SELECT count(*) AS n FROM test_results")["n"][0] == len(outcomes)
    cells = q("SELECT * FROM problem_cells WHERE task_id = 'Python/0' AND condition = 'buggy_code' AND thinking = 'off'")
    assert (cells["n_tests"][0], cells["n_misleading"][0], cells["n_both_pass"][0]) == (3, 2, 1)


def test_counts_of_answers_that_never_reached_collection_are_separate(plan):
    """No code, server error and empty model spec are zero-test answers, not unimportable files."""
    from evalmislead_assets.execution.collection import merge
    from evalmislead_assets.sandbox.host import Collected

    one_version = merge(Collected(["test_a"], None, 0.0), Collected([], "AssertionError: at import", 0.0)).error
    study = {("model_spec", "off"): {0: ([M], "stop", True), 1: ([], "stop", None), 2: ([], "length", None),
                                     3: ([], "stop", False), 4: ([], "stop", False), 5: ([], None, None)}}
    errors = {("model_spec", "off", 1): ("HTTP 500: server error", None),
              ("model_spec", "off", 4): (None, one_version),
              ("model_spec", "off", 5): ("empty model spec", None)}
    r = row(condition_rates(*tables(study, errors), plan), condition="model_spec", thinking="off")
    assert (r.n_answers, r.n_tests, r.n_zero_tests) == (6, 1, 5)
    assert r.n_unimportable == 2  # Python/3 (import error) and Python/4 (collects on one version only)
    assert r.n_collect_one_version == 1
    assert (r.n_errors, r.n_empty_spec) == (1, 1)


def test_comparison_with_a_side_without_tests_is_not_estimable(plan):
    outcomes, gens, gt = tables()
    missing = (outcomes["condition"] == "buggy_code") & (outcomes["thinking"] == "off")
    df, notes = bootstrap_comparisons(outcomes[~missing], gens, gt, plan)
    for cid in (1, 2):
        r = row(df, thinking="off", comparison_id=cid)
        assert r.n_tests_a == 0 and r.n_tests_b == 6
        assert np.isnan(r.rate_a) and np.isnan(r.estimate) and np.isnan(r.ci_low) and np.isnan(r.ci_high)
        assert not r.excludes_zero and r.verdict == "not estimable (0 tests in buggy_code)"
    assert any("buggy_code|off" in n and "test_outcomes" in n for n in notes)
    rates = condition_rates(outcomes[~missing], gens, gt, plan)
    b = row(rates, condition="buggy_code", thinking="off")
    assert b.n_tests == 0 and np.isnan(b.misleading_rate) and np.isnan(b.misleading_ci_low)


def test_n_zero_denominator_counts_resamples_where_a_side_has_no_test(plan):
    study = {("buggy_code", "off"): {i: ([M] if i == 0 else [], "stop", True) for i in range(5)},
             ("fixed_code", "off"): {i: ([E], "stop", True) for i in range(5)}}
    df, _ = bootstrap_comparisons(*tables(study), plan)
    r = row(df, thinking="off", comparison_id=1)
    rng = np.random.default_rng(plan.seed)
    expect = sum(int(0 not in rng.integers(0, 5, 5)) for _ in range(plan.n_boot))
    assert r.n_zero_denominator == expect and 0 < expect < plan.n_boot


def test_thinking_on_comparisons_run_on_the_truncation_matched_subset(plan):
    df, _ = bootstrap_comparisons(*tables(), plan)
    off = row(df, thinking="off", comparison_id=1)
    assert off.subset == "all" and off.n_problems == 5
    on = row(df, thinking="on", comparison_id=1)
    # matched subset: Python/0 and Python/4. buggy on: 3 misleading of 3 tests; fixed on: 0 of 2
    assert on.subset == "truncation_matched" and on.n_problems == 2
    assert (on.rate_a, on.rate_b, on.n_tests_a, on.n_tests_b) == (1.0, 0.0, 3, 2)
    assert on.role == "report-only" and on.verdict == "report-only"


def test_thinking_on_comparisons_need_both_modes_for_the_subset(plan):
    study = {k: v for k, v in STUDY.items() if k[1] == "on"}
    df, _ = bootstrap_comparisons(*tables(study), plan)
    on = row(df, thinking="on", comparison_id=1)
    assert on.n_problems == 0 and np.isnan(on.estimate)
    assert on.verdict == "not estimable (empty truncation-matched subset)"


def test_spec_label_splits_by_label_a(plan):
    outcomes, gens, gt = tables()
    labels = pd.DataFrame({
        "thinking": "off", "task_id": [f"Python/{i}" for i in range(5)],
        "category": ["transcribes_bug", "restores_correct", "neither", "transcribes_bug", None],
        "transcribes_bug": [True, False, False, True, False],  # Python/4: (a) no, (b) unknown
    })
    sp = spec_label_splits(outcomes, gens, gt, labels, plan)
    b = sp[(sp["condition"] == "buggy_code") & (sp["thinking"] == "off")].set_index("category")
    assert set(b.loc[["transcribes_bug", "restores_correct", "neither", "unlabelled"], "split_by"]) == {"category"}
    yes, no = b.loc["transcribes_bug=yes"], b.loc["transcribes_bug=no"]
    assert yes.split_by == no.split_by == "transcribes_bug"
    assert (yes.n_problems, yes.n_tests, yes.n_misleading) == (2, 4, 2) and yes.misleading_rate == pytest.approx(0.5)
    assert (no.n_problems, no.n_tests, no.n_misleading) == (3, 3, 1) and no.misleading_rate == pytest.approx(1 / 3)
    assert "transcribes_bug=unlabelled" not in b.index  # every problem has label (a) here


def test_rates_over_verified_tests_are_a_sensitivity_line_beside_the_rates(plan):
    """condition_rates gives each rate over the tests of verified files only, on the same problems;
    files stored before the check (verified NULL) make the line 'not checked', never a number."""
    outcomes, gens, gt = tables()
    # buggy_code|off: Python/0 (M, M, BP) is outside the subset; Python/1 (E, BF), /3 (E), /4 (M) inside
    gt["verified"] = ~((gt["condition"] == "buggy_code") & (gt["thinking"] == "off") & (gt["task_id"] == "Python/0"))
    b = row(condition_rates(outcomes, gens, gt, plan), condition="buggy_code", thinking="off")
    assert (b.n_tests, b.n_tests_verified) == (7, 4)
    assert b.misleading_rate == pytest.approx(3 / 7) and b.misleading_rate_verified == pytest.approx(1 / 4)
    assert b.effective_rate_verified == pytest.approx(2 / 4)
    f = row(condition_rates(outcomes, gens, gt, plan), condition="fixed_code", thinking="off")
    assert f.n_tests_verified == f.n_tests and f.effective_rate_verified == pytest.approx(f.effective_rate)
    gt["verified"] = None
    old = row(condition_rates(outcomes, gens, gt, plan), condition="buggy_code", thinking="off")
    assert pd.isna(old.n_tests_verified) and np.isnan(old.misleading_rate_verified)
    none_verified = gt.assign(verified=False)
    r = row(condition_rates(outcomes, gens, none_verified, plan), condition="buggy_code", thinking="off")
    assert r.n_tests_verified == 0 and np.isnan(r.misleading_rate_verified)


def test_a_test_that_ended_on_a_runner_cap_is_counted_apart_and_stays_in_the_denominator(plan):
    """A ``limit`` outcome (a runner cap decided a version's run) is a test of the study, in no cell."""
    study = {("buggy_code", "off"): {0: ([M, "limit", "limit"], "stop", True), 1: ([E], "stop", True)}}
    b = row(condition_rates(*tables(study), plan), condition="buggy_code", thinking="off")
    assert (b.n_tests, b.n_misleading, b.n_effective, b.n_both_pass, b.n_both_fail, b.n_limit) == (4, 1, 1, 0, 0, 2)
    assert b.misleading_rate == pytest.approx(1 / 4) and b.effective_rate == pytest.approx(1 / 4)


def test_the_report_counts_limit_tests_per_condition() -> None:
    from evalmislead_assets.report.sections import runner_limits

    outcomes = pd.DataFrame([
        {"condition": "buggy_code", "thinking": "off", "buggy_status": "passed", "fixed_status": "limit:output",
         "outcome": "limit"},
        {"condition": "buggy_code", "thinking": "off", "buggy_status": "passed", "fixed_status": "failed",
         "outcome": "misleading"},
        {"condition": "fixed_code", "thinking": "off", "buggy_status": "limit:memory", "fixed_status": "limit:memory",
         "outcome": "limit"},
    ])
    table = runner_limits.counts(outcomes).set_index("condition")
    assert table.loc["buggy_code", ["tests", "ended on a limit", "limit on buggy", "limit on fixed"]].tolist() == [2, 1, 0, 1]
    assert table.loc["fixed_code", ["tests", "ended on a limit", "limit on buggy", "limit on fixed"]].tolist() == [1, 1, 1, 1]
    text = "\n".join(runner_limits.render({"test_outcomes": outcomes}))
    assert "`limit:memory` 2, `limit:output` 1" in text
    assert "Not computed" in "\n".join(runner_limits.render({}))
