"""analysis/cross_model.py and report/sections/models.py on small synthetic multi-model studies (by hand)."""

import json

import numpy as np
import pandas as pd
import pytest

from evalmislead_assets.analysis import cross_model as cm
from evalmislead_assets.analysis import rates
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.report.sections import models as section
from evalmislead_assets.settings import PROJECT_ROOT
from evalmislead_assets.store import schema

M, E, BP, BF = "misleading", "effective", "both_pass", "both_fail"


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """The shipped plan with n_boot 400 (fast), same level, seed and comparisons."""
    data = json.loads((PROJECT_ROOT / "prompts" / "analysis_plan.json").read_text())
    data["bootstrap"]["n_boot"] = 400
    path = tmp_path_factory.mktemp("plan") / "analysis_plan.json"
    path.write_text(json.dumps(data))
    return load_plan(path)


def frames(study):
    """study: model -> (condition, thinking) -> problem number -> list of cells ([] = answered, zero tests)."""
    outcomes, gens, gt = [], [], []
    for model, cells in study.items():
        for (cond, thinking), probs in cells.items():
            for p, outs in probs.items():
                key = {"model_name": model, "condition": cond, "thinking": thinking, "task_id": f"Python/{p}",
                       "problem_idx": p}
                gens.append({**key, "finish_reason": "stop", "error": None})
                gt.append({**key, "n_tests": len(outs), "import_ok": True, "source": "def test_x(): pass\n",
                           "error": None})
                outcomes += [{**key, "test_id": f"test_{i}", "outcome": c} for i, c in enumerate(outs)]
    return pd.DataFrame(outcomes), pd.DataFrame(gens), pd.DataFrame(gt)


def one(df, **where):
    sel = np.ones(len(df), dtype=bool)
    for k, v in where.items():
        sel &= df[k].to_numpy() == v
    assert sel.sum() == 1, where
    return df[sel].iloc[0]


# Model a writes many tests, model b few: pooled and mean of rates differ.
HAND = {
    "a": {("buggy_code", "off"): {0: [M, BP, BP, BP], 1: [M, BP, BP, BP, BP, BP]},
          ("fixed_code", "off"): {0: [BP, BP], 1: [BP, BP]}},
    "b": {("buggy_code", "off"): {0: [M], 1: [BP]},
          ("fixed_code", "off"): {0: [M, BP], 1: [BP, BP]}},
}

# A richer single model (8 problems, both modes) for interval checks.
RICH = {
    ("buggy_code", "off"): {0: [M, M, BP], 1: [E, BF], 2: [], 3: [E], 4: [M], 5: [M, E, BP], 6: [BP, BP], 7: [M]},
    ("fixed_code", "off"): {0: [E, BP], 1: [BP], 2: [E, E], 3: [], 4: [BP], 5: [E], 6: [M, BP], 7: [E, BP]},
    ("buggy_code", "on"): {0: [M], 1: [], 2: [M, E], 3: [BP], 4: [M, M], 5: [E], 6: [M, BP], 7: [BP]},
    ("fixed_code", "on"): {0: [E], 1: [E], 2: [BP], 3: [], 4: [E], 5: [E, E], 6: [BP], 7: [M]},
}


def test_columns_are_the_single_model_tables_plus_model_name():
    for cols, table in ((cm.MODEL_RATES_COLUMNS, "condition_rates"),
                        (cm.MODEL_COMPARISONS_COLUMNS, "bootstrap_comparisons")):
        assert cols[:2] == ["plan_sha256", "model_name"]
        assert set(cols) - {"model_name"} == set(schema.column_names(table)) - {"model_name"}
    for cols in (cm.MODEL_AVERAGE_COLUMNS, cm.MODEL_SIZES_COLUMNS):
        assert len(set(cols)) == len(cols) and "plan_sha256" in cols
        assert {"level", "n_boot", "seed"} <= set(cols)


def test_per_model_tables_are_the_single_model_functions(plan):
    study = {"a": RICH, "b": HAND["b"]}
    o, g, t = frames(study)
    r = cm.per_model_rates(o, g, t, plan)
    assert list(r.columns) == cm.MODEL_RATES_COLUMNS and list(dict.fromkeys(r["model_name"])) == ["a", "b"]
    mine = r[r["model_name"] == "a"].drop(columns="model_name").reset_index(drop=True)
    alone = rates.condition_rates(*(x[x["model_name"] == "a"].drop(columns="model_name") for x in (o, g, t)), plan)
    pd.testing.assert_frame_equal(mine, alone[mine.columns.tolist()], check_dtype=False)
    c, notes = cm.per_model_comparisons(o, g, t, plan)
    assert list(c.columns) == cm.MODEL_COMPARISONS_COLUMNS
    assert set(c["model_name"]) == {"a", "b"}
    assert any(n.startswith("b: thinking=on") for n in notes)  # b has no thinking-on rows


def test_pooled_and_mean_differ_by_hand(plan):
    av = cm.cross_model_average(*frames(HAND), plan)
    assert list(av.columns) == cm.MODEL_AVERAGE_COLUMNS
    b = one(av, kind="rate", condition_a="buggy_code", thinking="off", metric="misleading_rate")
    # a: 2 of 10 tests misleading (0.2); b: 1 of 2 (0.5)
    assert b.pooled == pytest.approx(3 / 12) and b["mean"] == pytest.approx((0.2 + 0.5) / 2)
    assert (b.n_models, b.models, b.n_problems, b.n_tests_a) == (2, "a,b", 2, 12)
    assert b.estimable and b.mean_estimable and b.pooled_ci_low <= b.pooled <= b.pooled_ci_high
    assert all(b[f"{how}_ci_{side}_mc_se"] >= 0 for how in ("pooled", "mean") for side in ("low", "high"))
    f = one(av, kind="rate", condition_a="fixed_code", thinking="off", metric="misleading_rate")
    assert f.pooled == pytest.approx(1 / 8) and f["mean"] == pytest.approx((0 + 0.25) / 2)
    d = one(av, kind="comparison", comparison_id=1, thinking="off")
    assert (d.condition_a, d.condition_b, d.role, d.n_tests_a, d.n_tests_b) == ("buggy_code", "fixed_code",
                                                                                "primary", 12, 8)
    assert d.pooled == pytest.approx(3 / 12 - 1 / 8)
    assert d["mean"] == pytest.approx(((0.2 - 0.0) + (0.5 - 0.25)) / 2)
    e = one(av, kind="comparison", comparison_id=2, thinking="off")
    assert e.pooled == 0 and e["mean"] == 0 and e.estimable  # no effective test anywhere: a real 0, estimable


def test_average_is_paired_over_problems_for_every_model(plan):
    """Identical models: if each model drew its own resample the mean's interval would shrink; paired, it is the
    single model's interval exactly (pooled and mean, rates and comparisons, both thinking modes)."""
    one_model = frames({"a": RICH})
    o, g, t = frames({"a": RICH, "b": RICH})
    g = g.sample(frac=1, random_state=0)  # row order does not matter: problems are aligned by task_id
    av = cm.cross_model_average(o, g, t, plan)
    single = cm.per_model_rates(*one_model, plan)
    comps, _ = cm.per_model_comparisons(*one_model, plan)
    for thinking in ("off", "on"):
        for cond in ("buggy_code", "fixed_code"):
            r = one(single, condition=cond, thinking=thinking)
            for metric in ("misleading", "effective"):
                x = one(av, kind="rate", condition_a=cond, thinking=thinking, metric=f"{metric}_rate")
                # (a model's own rate has a cluster-adjusted Wilson interval since plan 1.3.0; the average's is the
                # bootstrap over problems, identical for pooled and mean when the models are identical)
                for how in ("pooled", "mean"):
                    assert x[how] == pytest.approx(r[f"{metric}_rate"])
                    assert x[f"{how}_ci_low"] <= x[how] <= x[f"{how}_ci_high"]
                assert (x["pooled_ci_low"], x["pooled_ci_high"]) == pytest.approx(
                    (x["mean_ci_low"], x["mean_ci_high"]), abs=1e-12)
        for cid in (1, 2):
            c = one(comps, comparison_id=cid, thinking=thinking)
            x = one(av, kind="comparison", comparison_id=cid, thinking=thinking)
            assert x.n_problems == c.n_problems and x.subset == c.subset
            for how in ("pooled", "mean"):
                assert (x[how], x[f"{how}_ci_low"], x[f"{how}_ci_high"]) == pytest.approx(
                    (c.estimate, c.ci_low, c.ci_high), abs=1e-12)
                assert x[f"{how}_excludes_zero"] == c.excludes_zero
    x = one(av, kind="rate", condition_a="buggy_code", thinking="off", metric="misleading_rate")
    assert x.mean_ci_low < x.mean_ci_high  # a real interval, not a degenerate one


def test_paired_draws_correlate_models(plan):
    """Two different models on one resample: the mean's interval is the percentile interval of the mean of both
    models' resampled rates under the same draws (recomputed here with bootstrap.resample_counts)."""
    other = {k: {p: list(reversed(v)) + [BP] for p, v in probs.items()} for k, probs in RICH.items()}
    av = cm.cross_model_average(*frames({"a": RICH, "b": other}), plan)
    x = one(av, kind="rate", condition_a="buggy_code", thinking="off", metric="misleading_rate")
    from evalmislead_assets.analysis import bootstrap as st
    w = st.resample_counts(8, plan.n_boot, np.random.default_rng(plan.seed)).astype(float)
    cells = RICH[("buggy_code", "off")]
    num = np.array([[cells[p].count(M), other[("buggy_code", "off")][p].count(M)] for p in range(8)], float)
    den = np.array([[len(cells[p]), len(other[("buggy_code", "off")][p])] for p in range(8)], float)
    mean = st.pooled_rate(w @ num, w @ den).mean(1)
    pooled = st.pooled_rate((w @ num).sum(1), (w @ den).sum(1))
    assert (x.mean_ci_low, x.mean_ci_high) == pytest.approx(tuple(st.percentile_interval(mean, plan.level)))
    assert (x.pooled_ci_low, x.pooled_ci_high) == pytest.approx(tuple(st.percentile_interval(pooled, plan.level)))


def test_only_problems_common_to_every_model_are_paired(plan):
    study = {"a": RICH, "b": {k: {p: v for p, v in probs.items() if p != 5} for k, probs in RICH.items()},
             "c": {("buggy_code", "off"): RICH[("buggy_code", "off")]}}
    av = cm.cross_model_average(*frames(study), plan)
    x = one(av, kind="rate", condition_a="buggy_code", thinking="off", metric="misleading_rate")
    assert (x.n_models, x.models, x.n_problems) == (3, "a,b,c", 7)  # problem 5 missing in b
    f = one(av, kind="rate", condition_a="fixed_code", thinking="off", metric="misleading_rate")
    assert (f.n_models, f.models, f.models_missing) == (2, "a,b", "c")  # c has no fixed_code rows
    d = one(av, kind="comparison", comparison_id=1, thinking="off")
    assert (d.n_models, d.models_missing, d.n_problems) == (2, "c", 7)
    # by hand: a and b over problems 0-4, 6, 7 only
    keep = [p for p in range(8) if p != 5]
    n_m = sum(RICH[("buggy_code", "off")][p].count(M) for p in keep)
    n_t = sum(len(RICH[("buggy_code", "off")][p]) for p in keep)
    assert x.pooled == pytest.approx(3 * n_m / (3 * n_t)) and x.n_tests_a == 3 * n_t


def test_empty_cell_is_not_estimable_never_zero(plan):
    study = {
        "a": {("buggy_code", "off"): {0: [M], 1: [BP]}, ("signature_only", "off"): {0: [], 1: []},
              ("human_docstring", "off"): {0: [E], 1: [BP]}},
        "b": {("buggy_code", "off"): {0: [BP], 1: [BP]}, ("signature_only", "off"): {0: [], 1: []},
              ("human_docstring", "off"): {0: [], 1: []}},
    }
    av = cm.cross_model_average(*frames(study), plan)
    s = one(av, kind="rate", condition_a="signature_only", thinking="off", metric="misleading_rate")
    assert not s.estimable and not s.mean_estimable and s.n_problems == 2 and s.n_tests_a == 0
    assert all(np.isnan(s[c]) for c in ("pooled", "pooled_ci_low", "pooled_ci_high", "mean", "mean_ci_low",
                                        "mean_ci_high"))
    assert not s.pooled_excludes_zero and "0 tests" in s.note
    h = one(av, kind="rate", condition_a="human_docstring", thinking="off", metric="effective_rate")
    assert h.estimable and h.pooled == pytest.approx(0.5)  # b has none, a has 1 of 2
    assert not h.mean_estimable and np.isnan(h["mean"]) and np.isnan(h.mean_ci_low) and "mean not estimable" in h.note
    spec = one(av, kind="comparison", comparison_id=3, thinking="off")  # nobody ran model_spec
    assert not spec.estimable and spec.n_models == 0 and np.isnan(spec.pooled) and np.isnan(spec.pooled_ci_low)
    md = "\n".join(section.render(_frames(study, plan)))
    assert "not estimable" in md


def test_missing_model_name_is_an_error(plan):
    o, g, t = frames(HAND)
    with pytest.raises(ValueError, match="model_name"):
        cm.cross_model_average(o.drop(columns="model_name"), g, t, plan)
    g.loc[0, "model_name"] = None
    with pytest.raises(ValueError, match="NULL"):
        cm.per_model_rates(o, g, t, plan)


def test_size_table_orders_by_parameter_count(plan):
    study = {m: RICH for m in ("fam-7b", "fam-0.5b", "fam-1.5b", "other")}
    r = cm.per_model_rates(*frames(study), plan)
    sizes = {"fam-7b": "7B", "fam-0.5b": "500M", "fam-1.5b": 1.5}
    s = cm.size_table(r, sizes)
    assert list(s.columns) == cm.MODEL_SIZES_COLUMNS
    assert list(dict.fromkeys(s["model_name"])) == ["fam-0.5b", "fam-1.5b", "fam-7b"]
    assert list(dict.fromkeys(s["size_rank"])) == [1, 2, 3]
    assert list(s["n_params_billion"].unique()) == pytest.approx([0.5, 1.5, 7.0])
    assert set(s["thinking"]) == {"off"} and list(s["condition"][:2]) == ["buggy_code", "fixed_code"]
    b = one(s, model_name="fam-7b", condition="buggy_code")
    assert b.misleading_rate == pytest.approx(one(r, model_name="fam-7b", condition="buggy_code",
                                                  thinking="off").misleading_rate)
    assert set(cm.size_table(r, sizes, thinking="on", conditions=["fixed_code"])["condition"]) == {"fixed_code"}
    with pytest.raises(ValueError):
        cm.parse_size("large")


def _frames(study, plan, sizes=None):
    o, g, t = frames(study)
    r = cm.per_model_rates(o, g, t, plan)
    return {"model_rates": r, "model_comparisons": cm.per_model_comparisons(o, g, t, plan)[0],
            "model_average": cm.cross_model_average(o, g, t, plan),
            "model_sizes": cm.size_table(r, sizes or {})}


def test_render_shows_rates_average_and_sizes(plan):
    md = section.render_markdown(_frames(HAND, plan, {"b": "1.5B", "a": "0.5B"}))
    assert md.startswith("## Models side by side")
    assert "2 models: `a`, `b`" in md
    assert "20.0 %" in md and "50.0 %" in md  # per-model buggy_code misleading rates
    assert "25.0 %" in md and "35.0 %" in md  # pooled 3/12, mean (0.2 + 0.5) / 2
    assert "+12.5" in md and "+22.5" in md  # buggy − fixed misleading: pooled and mean, in points
    assert "mean of models" in md and "not estimable" in md  # model_spec comparisons: nobody ran it
    sizes = md.split("**By model size**")[1]
    assert sizes.index("| 0.5B") < sizes.index("| 1.5B")


def test_render_one_model_and_nothing_stored(plan):
    md = "\n".join(section.render(_frames({"solo": RICH}, plan)))
    assert "equals that model" in md and "mean of models" not in md
    assert "No size table" in md
    empty = "\n".join(section.render({}))
    assert "No per-model rows" in empty and "%" not in empty


def test_equal_sizes_share_a_rank(plan):
    """Two models of the same size (1B and 1000M) share a rank."""
    r = cm.per_model_rates(*frames({m: HAND["a"] for m in ("p", "q", "r")}), plan)
    s = cm.size_table(r, {"p": "1B", "q": "1000M", "r": "3B"})
    assert dict(zip(s["model_name"], s["size_rank"])) == {"p": 1, "q": 1, "r": 3}


def test_a_difference_that_is_zero_in_every_resample_does_not_exclude_zero(plan):
    """The mean of 0.1, 0.2, 0.3 minus the mean of 0.3, 0.2, 0.1 is 3.7e-17 in floats: it must not read as > 0."""
    def cells(k):
        return [M] * k + [BP] * (10 - k)
    study = {m: {("buggy_code", "off"): {1: cells(k)}, ("fixed_code", "off"): {1: cells(4 - k)}}
             for m, k in (("x", 1), ("y", 2), ("z", 3))}
    av = cm.cross_model_average(*frames(study), plan)
    c = one(av, kind="comparison", thinking="off", metric="misleading_rate", condition_a="buggy_code")
    assert abs(c["mean"]) < 1e-15 and c.mean_ci_low > 0  # float noise, in every resample ...
    assert not c.mean_excludes_zero and not c.pooled_excludes_zero  # ... which never reads as a difference
    assert c.mean_a == pytest.approx(0.2) and c.mean_b == pytest.approx(0.2)  # sides on the paired problems
