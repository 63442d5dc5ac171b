"""Analysis assets materialized with dagster from synthetic upstream tables stored in a tmp DuckDB."""

import numpy as np
import pandas as pd
import pytest
from dagster import materialize

from evalmislead_assets import settings
from evalmislead_assets.analysis.plan import METRICS, load_plan
from evalmislead_assets.assets import analysis as assets
from evalmislead_assets.llm.types import ChatResult
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseIOManager, WarehouseResource
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.stored import with_stored

CELLS = ["misleading", "effective", "both_pass", "both_fail"]
PROBS = {"buggy_code": [0.25, 0.25, 0.4, 0.1], "fixed_code": [0.03, 0.45, 0.45, 0.07],
         "model_spec": [0.2, 0.3, 0.4, 0.1]}


def store_upstream(wh: Warehouse, modes=("off",), n_problems=30, seed=0) -> None:
    """Random but fixed upstream rows; a few answers truncated with no test, some unimportable."""
    rng = np.random.default_rng(seed)
    for thinking in modes:
        for cond, p in PROBS.items():
            outcomes, gens, gt = [], [], []
            for i in range(n_problems):
                key = {"condition": cond, "thinking": thinking, "task_id": f"Python/{i}", "problem_idx": i}
                truncated = rng.random() < 0.15
                n = 0 if truncated else int(rng.integers(0, 9))
                gens.append({**key, "finish_reason": "length" if truncated else "stop", "error": None,
                             "response_text": "", "reasoning_text": "This looks like a bug." if i % 3 == 0 else ""})
                gt.append({**key, "n_tests": n, "import_ok": n > 0, "source": "", "test_ids": []})
                outcomes += [{**key, "test_id": f"test_{k}", "outcome": rng.choice(CELLS, p=p),
                              "buggy_status": "passed", "fixed_status": "failed"} for k in range(n)]
            where = {"condition": cond, "thinking": thinking}
            wh.replace_rows("test_generations", pd.DataFrame(gens), where=where)
            wh.replace_rows("generated_tests", pd.DataFrame(gt), where=where)
            wh.replace_rows("test_outcomes", pd.DataFrame(outcomes), where=where)


def store_problems_and_specs(wh: Warehouse, n: int, examples: dict[int, str] | None = None) -> None:
    """n problems of one function `f` (buggy: x - 1, fixed: x + 1) and a thinking-off spec for each;
    ``examples``: a line of examples appended to the spec of the problem at that index."""
    problems = pd.DataFrame({
        "task_id": [f"Python/{i}" for i in range(n)], "problem_idx": list(range(n)), "entry_point": "f",
        "buggy_code": "def f(x):\n    return x - 1\n", "fixed_code": "def f(x):\n    return x + 1\n",
    })
    wh.replace_rows("problems", problems)
    wh.replace_rows("model_specs", pd.DataFrame({
        "thinking": "off", "task_id": problems["task_id"], "problem_idx": problems["problem_idx"],
        "spec_text": [f"Return x minus one.\n{(examples or {}).get(i, '')}" for i in range(n)],
    }))


@pytest.fixture()
def wh(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALMISLEAD_REPORT_DIR", str(tmp_path / "report"))
    monkeypatch.setenv("EVALMISLEAD_REVIEW_CSV", str(tmp_path / "review.csv"))
    return Warehouse(tmp_path / "study.duckdb")


def loop_bootstrap(per_a, per_b, cell, n_boot, level, seed):
    rng = np.random.default_rng(seed)
    n = len(per_a)
    na, da = per_a[cell].to_numpy(), per_a["n"].to_numpy()
    nb, db = per_b[cell].to_numpy(), per_b["n"].to_numpy()
    diffs = np.empty(n_boot)
    for b in range(n_boot):
        i = rng.integers(0, n, n)
        diffs[b] = (na[i].sum() / da[i].sum() if da[i].sum() else 0.0) - (nb[i].sum() / db[i].sum() if db[i].sum() else 0.0)
    a = 100 * (1 - level) / 2
    return np.percentile(diffs, [a, 100 - a])


def _resources(wh: Warehouse) -> dict:
    return {"warehouse": WarehouseResource(path=str(wh.path)), "io_manager": WarehouseIOManager(path=str(wh.path)),
            "study_settings": StudySettingsResource()}


@pytest.mark.slow
def test_condition_rates_and_bootstrap_from_stored_rows(wh):
    store_upstream(wh, modes=("off",))
    res = materialize(with_stored([assets.condition_rates, assets.bootstrap_comparisons]), resources=_resources(wh))
    assert res.success
    plan = load_plan(settings.analysis_plan_path())
    rates = wh.read_table("condition_rates")
    # exact rates, recomputed by SQL straight from the stored outcomes
    expect = wh.query_df(
        "SELECT condition, count(*) AS n, count(*) FILTER (WHERE outcome='misleading') AS m, "
        "count(*) FILTER (WHERE outcome='effective') AS e, count(DISTINCT task_id) FILTER (WHERE outcome='effective') "
        "AS pe FROM test_outcomes WHERE thinking='off' GROUP BY condition")
    for _, x in expect.iterrows():
        r = rates[(rates["condition"] == x["condition"]) & (rates["thinking"] == "off")].iloc[0]
        assert (r["n_tests"], r["n_misleading"], r["n_effective"], r["problems_with_effective"]) == \
            (x["n"], x["m"], x["e"], x["pe"])
        assert r["misleading_rate"] == x["m"] / x["n"] and r["effective_rate"] == x["e"] / x["n"]
        assert r["n_problems"] == 30 and r["plan_sha256"] == plan.sha256
    trunc = wh.query_df("SELECT condition, count(*) AS k FROM test_generations WHERE finish_reason='length' "
                        "GROUP BY condition").set_index("condition")["k"]
    assert rates.set_index("condition")["n_truncated_no_tests"].to_dict() == trunc.to_dict()

    comp = wh.read_table("bootstrap_comparisons")
    assert sorted(comp["comparison_id"]) == [1, 2, 3, 4] and set(comp["thinking"]) == {"off"}
    per = wh.query_df(
        "SELECT g.condition, g.task_id, g.problem_idx, count(o.test_id) AS n, "
        "count(*) FILTER (WHERE o.outcome='misleading') AS misleading, "
        "count(*) FILTER (WHERE o.outcome='effective') AS effective "
        "FROM test_generations g LEFT JOIN test_outcomes o USING (condition, thinking, task_id) "
        "WHERE g.thinking='off' GROUP BY ALL ORDER BY g.problem_idx")
    for _, c in comp.iterrows():
        pa = per[per["condition"] == c["condition_a"]].reset_index(drop=True)
        pb = per[per["condition"] == c["condition_b"]].reset_index(drop=True)
        cell = METRICS[c["metric"]]
        assert c["estimate"] == pytest.approx(pa[cell].sum() / pa["n"].sum() - pb[cell].sum() / pb["n"].sum())
        lo, hi = loop_bootstrap(pa, pb, cell, plan.n_boot, plan.level, plan.seed)
        assert (c["ci_low"], c["ci_high"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
        assert c["excludes_zero"] == bool(lo > 0 or hi < 0)
        # an independent seed agrees within Monte Carlo error
        lo2, hi2 = loop_bootstrap(pa, pb, cell, 4000, plan.level, 99)
        assert abs(lo2 - lo) < 0.03 and abs(hi2 - hi) < 0.03
        assert c["plan_sha256"] == plan.sha256 and c["n_problems"] == 30 and c["n_boot"] == plan.n_boot

    meta = res.asset_materializations_for_node("bootstrap_comparisons")[0].metadata
    assert "buggy_code|on" in meta["partitions_missing"].value
    assert meta["thinking_modes_present"].value == ["off"]


def test_condition_rates_asset_counts_only_files_with_code_as_unimportable(wh):
    """Answers without code are not unimportable files; one-version collection is counted."""
    from evalmislead_assets.execution.collection import merge
    from evalmislead_assets.sandbox.host import Collected

    store_upstream(wh, modes=("off",), n_problems=10)
    wh.execute("UPDATE generated_tests SET source = NULL, error = 'no code found in the answer' WHERE n_tests = 0")
    one = merge(Collected(["t"], None, 0.0), Collected([], "NameError: y", 0.0)).error
    wh.execute("UPDATE generated_tests SET source = 'import x', import_ok = false, n_tests = 0, error = ? "
               "WHERE condition = 'buggy_code' AND task_id = 'Python/1'", [one])
    wh.execute("UPDATE generated_tests SET source = 'import x', import_ok = false, n_tests = 0, "
               "error = 'SyntaxError' WHERE condition = 'buggy_code' AND task_id = 'Python/2'")
    assert materialize(with_stored([assets.condition_rates]), resources=_resources(wh)).success
    r = wh.read_table("condition_rates").set_index("condition")
    assert (r.loc["buggy_code", "n_unimportable"], r.loc["buggy_code", "n_collect_one_version"]) == (2, 1)
    assert (r.loc["fixed_code", "n_unimportable"], r.loc["fixed_code", "n_collect_one_version"]) == (0, 0)


@pytest.mark.slow
def test_rematerializing_replaces_rows(wh):
    store_upstream(wh, modes=("off",), n_problems=10)
    r = _resources(wh)
    assert materialize(with_stored([assets.condition_rates]), resources=r).success
    store_upstream(wh, modes=("off", "on"), n_problems=10, seed=1)
    assert materialize(with_stored([assets.condition_rates]), resources=r).success
    rates = wh.read_table("condition_rates")
    assert len(rates) == 6 and not rates.duplicated(["condition", "thinking"]).any()


class FakeJudge(LLMResource):
    """A judge that labels every spec 'transcribes the bug', with no server."""

    def run_batch(self, warehouse, requests, log=None):
        return [ChatResult(request_json="{}", cache_key=f"k{i}", text="TRANSCRIBES_BUG: yes\nSTATES_CORRECT: no",
                           reasoning=None, reasoning_present=False, finish_reason="stop", prompt_tokens=1,
                           completion_tokens=1, latency_s=0.0, server_url=None, server_props_sha256=None,
                           model="fake-judge", from_cache=False, error=None) for i, _ in enumerate(requests)]


@pytest.mark.slow
def test_whole_analysis_chain_to_the_report(wh):
    store_upstream(wh, modes=("off", "on"), n_problems=12)
    store_problems_and_specs(wh, 12)
    res = materialize(
        with_stored([assets.condition_rates, assets.bootstrap_comparisons, assets.truncation_matched_subset,
         assets.thinking_comparisons, assets.spec_labels, assets.reasoning_mentions, assets.study_report]),
        resources={**_resources(wh), "judge_llm": FakeJudge()},
    )
    assert res.success
    labels = wh.read_table("spec_labels")
    assert len(labels) == 12 and (labels["category"] == "transcribes_bug").all()
    splits = wh.read_table("spec_label_splits")
    for split_by in ("category", "transcribes_bug"):  # each grouping covers every problem once
        assert splits.loc[splits["split_by"] == split_by, "n_problems"].sum() == 24  # buggy_code, model_spec; off
    assert len(wh.read_table("reasoning_mentions")) == 12
    assert wh.read_table("truncation_matched_subset")["in_subset"].any()
    meta = res.asset_materializations_for_node("study_report")[0].metadata
    html = open(meta["html"].value, encoding="utf-8").read()
    assert "Primary comparisons" in html and "data:image/png;base64," in html
    assert "data:image/png;base64," in meta["report"].value
    md = open(meta["markdown"].value, encoding="utf-8").read()
    assert "](plots/rates.png)" in md and "truncation-matched subset" in md


DEFS = '''
from dagster import Definitions
from evalmislead_assets.assets import analysis
from dagster import AssetSpec
from evalmislead_assets.partitions import condition_thinking_partitions
from evalmislead_assets.resources import LLMResource, WarehouseIOManager, WarehouseResource

# the upstream tables are only stored (the test wrote them): specs loaded by the IO manager
stored = [AssetSpec(t, partitions_def=condition_thinking_partitions)
          for t in ("test_outcomes", "test_generations", "generated_tests")]
defs = Definitions(
    assets=[analysis.condition_rates, analysis.bootstrap_comparisons, *stored],
    resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(), "judge_llm": LLMResource()},
)
'''


@pytest.mark.slow
def test_dagster_cli_materializes_rates_and_comparisons(wh, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    store_upstream(wh, modes=("off",), n_problems=15)
    (tmp_path / "defs.py").write_text(DEFS, encoding="utf-8")
    env = {**os.environ, "EVALMISLEAD_DB": str(wh.path), "DAGSTER_HOME": str(tmp_path / "dh")}
    (tmp_path / "dh").mkdir()
    dagster = Path(sys.executable).with_name("dagster")
    proc = subprocess.run(
        [str(dagster), "asset", "materialize", "-f", str(tmp_path / "defs.py"),
         "--select", "condition_rates,bootstrap_comparisons"],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(wh.read_table("condition_rates")) == 3
    assert len(wh.read_table("bootstrap_comparisons")) == 4


def test_a_failing_judge_server_fails_spec_labels_instead_of_storing_null_labels(wh):
    from evalmislead_tests.fake_llm_server import FakeLLMServer

    store_upstream(wh, modes=("off",), n_problems=3)
    store_problems_and_specs(wh, 3)
    with FakeLLMServer("status:500") as fake:
        res = materialize(with_stored([assets.spec_labels]), raise_on_error=False, resources={
            **_resources(wh), "judge_llm": LLMResource(urls=fake.url, retries=1, backoff_s=0.1)})
    assert not res.success
    (failure,) = [e for e in res.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message.strip()
    assert "spec_labels (judge): 3 of 3 requests failed" in message and "HTTP 500" in message, message
    assert not res.asset_materializations_for_node("spec_labels")


def _materialized(res, node: str) -> dict[str, dict]:
    return {m.asset_key.to_user_string(): m.metadata for m in res.asset_materializations_for_node(node)}


@pytest.mark.slow
def test_reasoning_mentions_stores_its_side_tables_as_assets(wh):
    """One step, three assets: each table stored by the IO manager (this model's rows), each with its metadata."""
    from evalmislead_assets import study_models

    store_upstream(wh, modes=("on",), n_problems=6)
    res = materialize(with_stored([assets.reasoning_mentions]), resources=_resources(wh))
    assert res.success
    meta = _materialized(res, "reasoning_mentions")
    assert set(meta) == {"reasoning_mentions", "reasoning_mention_matches", "reasoning_mention_summary"}
    answers, matches, summary = (wh.read_table(t) for t in meta)
    mentioning = set(answers.loc[answers["mentions"], "task_id"])
    assert mentioning == {"Python/0", "Python/3"}  # "This looks like a bug." every third answer
    assert set(matches["task_id"]) == mentioning and (matches["match"] == "bug").all()
    with_tests = answers[answers["n_tests"] > 0]
    groups = summary.set_index("mention_group")["n_problems"]
    assert (groups["mentions"], groups["no_mention"], groups["all_with_tests"]) == (
        with_tests["mentions"].sum(), (~with_tests["mentions"]).sum(), len(with_tests))
    model = study_models.study().models[0].name
    for df in (answers, matches, summary):
        assert (df["model_name"] == model).all()
    assert meta["reasoning_mentions"]["mentioning"].value == 2
    assert meta["reasoning_mention_matches"]["matches"].value == len(matches) == 2
    assert meta["reasoning_mention_matches"]["dagster/row_count"].value == 2
    assert "misleading_rate" in meta["reasoning_mention_summary"]["summary"].value
    # a re-run replaces each table's rows, no duplicates
    assert materialize(with_stored([assets.reasoning_mentions]), resources=_resources(wh)).success
    assert len(wh.read_table("reasoning_mention_matches")) == 2


def test_spec_labels_stores_agreement_and_splits_as_assets(wh):
    store_upstream(wh, modes=("off",), n_problems=4)
    # the execution judge: Python/0's example is the buggy version's value, Python/1's the fixed one's
    store_problems_and_specs(wh, 4, examples={0: "- f(1) -> 0", 1: ">>> f(1)\n2"})
    res = materialize(with_stored([assets.spec_labels]), resources={**_resources(wh), "judge_llm": FakeJudge()})
    assert res.success
    meta = _materialized(res, "spec_labels")
    assert set(meta) == {"spec_labels", "spec_label_agreement", "spec_label_splits"}
    labels = wh.read_table("spec_labels").set_index("task_id")
    assert labels["exec_category"].tolist()[:2] == ["transcribes_bug", "restores_correct"]
    assert labels["exec_category"].iloc[2:].isna().all() and labels["exec_n_examples"].tolist() == [1, 1, 0, 0]
    # the LLM judge says transcribes_bug everywhere; the execution judge wins where it has evidence
    assert labels["category"].tolist() == ["transcribes_bug", "restores_correct", "transcribes_bug", "transcribes_bug"]
    assert labels["label_source"].tolist() == ["execution+judge", "execution", "judge", "judge"]
    assert labels["judges_agree"].tolist()[:2] == [True, False] and labels["judges_agree"].iloc[2:].isna().all()
    assert "no_evidence" in meta["spec_labels"]["execution_judge"].value
    agree = wh.read_table("spec_label_agreement").set_index("label")
    assert (agree.loc["execution_vs_judge", "n_reviewed"], agree.loc["execution_vs_judge", "n_agree"]) == (2, 1)
    splits = wh.read_table("spec_label_splits")
    assert set(splits["split_by"]) == {"category", "transcribes_bug", "execution"} and len(splits)
    by_exec = splits[splits["split_by"] == "execution"].set_index("category")["n_problems"].to_dict()
    assert by_exec == {"no_evidence": 2, "restores_correct": 1, "transcribes_bug": 1}
    assert meta["spec_label_splits"]["rows"].value == len(splits)
    assert "transcribes_bug" in meta["spec_labels"]["categories"].value
    assert meta["spec_label_agreement"]["rows"].value == len(wh.read_table("spec_label_agreement"))
    assert wh.read_table("spec_labels")["plan_sha256"].eq(load_plan(settings.analysis_plan_path()).sha256).all()


SENT_CAPS: list[int] = []


class CapRecordingJudge(FakeJudge):
    """FakeJudge that records each request's output cap (module-level: resources are frozen)."""

    def run_batch(self, warehouse, requests, log=None):
        SENT_CAPS.extend(r.max_tokens for r in requests)
        return super().run_batch(warehouse, requests, log)


@pytest.mark.slow
def test_the_judge_cap_comes_from_run_config_else_the_environment(wh, monkeypatch):
    """EVALMISLEAD_JUDGE_MAX_TOKENS reaches judge_specs as a value; the launchpad's judge_max_tokens wins."""
    from dagster import RunConfig

    store_upstream(wh, modes=("off",), n_problems=2)
    store_problems_and_specs(wh, 2)
    res = {**_resources(wh), "judge_llm": CapRecordingJudge()}
    runs = [({}, None, settings.DEFAULT_JUDGE_MAX_TOKENS), ({"EVALMISLEAD_JUDGE_MAX_TOKENS": "64"}, None, 64),
            ({"EVALMISLEAD_JUDGE_MAX_TOKENS": "64"}, 32, 32)]
    for env, configured, expected in runs:
        monkeypatch.delenv("EVALMISLEAD_JUDGE_MAX_TOKENS", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        config = RunConfig(ops={"spec_labels": assets.SpecLabelsConfig(judge_max_tokens=configured)})
        SENT_CAPS.clear()
        assert materialize(with_stored([assets.spec_labels]), resources=res, run_config=config).success
        assert SENT_CAPS and set(SENT_CAPS) == {expected}, (env, configured, SENT_CAPS)


def test_the_judge_templates_code_version_hashes_the_file_spec_labels_reads(tmp_path, monkeypatch):
    """EVALMISLEAD_PROMPTS_DIR: an edited judge prompt there marks spec_labels stale; the plan's folder
    is not where the judge template is read from."""
    import shutil

    from evalmislead_assets.analysis.spec_labels import JUDGE_TEMPLATE
    from evalmislead_assets.assets.analysis_inputs import plan_code_version

    monkeypatch.delenv("EVALMISLEAD_PROMPTS_DIR", raising=False)
    before = plan_code_version(template=f"{JUDGE_TEMPLATE}.md")
    prompts = tmp_path / "prompts"
    shutil.copytree(settings.prompts_dir(), prompts)
    monkeypatch.setenv("EVALMISLEAD_PROMPTS_DIR", str(prompts))
    assert plan_code_version(template=f"{JUDGE_TEMPLATE}.md") == before  # the same bytes, the same version
    with open(prompts / f"{JUDGE_TEMPLATE}.md", "a", encoding="utf-8") as fh:
        fh.write("\nOne more instruction.\n")
    changed = plan_code_version(template=f"{JUDGE_TEMPLATE}.md")
    assert changed != before and changed.rsplit("+", 1)[0] == before.rsplit("+", 1)[0]  # the plan part stays


def test_problem_level_and_repetition_tables_from_stored_rows(wh):
    from evalmislead_assets.analysis.problem_level import problem_comparisons

    store_upstream(wh, modes=("off",))
    res = materialize(with_stored([assets.problem_rates, assets.problem_comparisons, assets.repetition_rates]),
                      resources=_resources(wh))
    assert res.success
    plan = load_plan(settings.analysis_plan_path())
    stored = wh.read_table("problem_comparisons").sort_values("comparison_id").reset_index(drop=True)
    direct, _ = problem_comparisons(wh.read_table("test_outcomes"), wh.read_table("test_generations"),
                                    wh.read_table("generated_tests"), plan)
    assert list(stored["comparison_id"]) == [1, 2, 3, 4]
    for col in ("problems_a", "problems_b", "discordant_a", "discordant_b", "n_problems_with_tests_both"):
        assert list(stored[col]) == list(direct[col])
    np.testing.assert_allclose(stored["mcnemar_p"], direct["mcnemar_p"])
    rates = wh.read_table("problem_rates")
    assert set(rates["condition"]) == set(PROBS) and (rates["n_problems"] == 30).all()
    assert len(wh.read_table("test_repeats")) == len(wh.read_table("test_outcomes"))
    assert len(wh.read_table("answer_repeats")) == 90  # every answer, with or without tests
    rep = wh.read_table("repetition_rates")
    assert set(rep["condition"]) == set(PROBS) and rep["model_name"].notna().all()


def test_a_note_about_a_thinking_mode_the_study_never_ran_is_not_a_warning() -> None:
    from evalmislead_assets.assets.analysis_inputs import say_notes

    warned: list[str] = []
    told: list[str] = []
    notes = ["thinking=off: model_spec vs buggy_code skipped, no rows for model_spec",
             "thinking=on: buggy_code vs fixed_code skipped, no rows for buggy_code, fixed_code",
             "m-a: thinking=on: model_spec vs buggy_code skipped, no rows for model_spec, buggy_code",
             "a note that names no mode"]
    off_only = pd.DataFrame({"thinking": ["off", "off"]})
    say_notes(warned.append, told.append, notes, off_only)
    assert warned == [notes[0], notes[3]] and told == notes[1:3]
    # a study that ran thinking on: a gap there is a warning
    warned.clear()
    told.clear()
    say_notes(warned.append, told.append, notes, pd.DataFrame({"thinking": ["off", "on"]}))
    assert warned == notes and told == []
