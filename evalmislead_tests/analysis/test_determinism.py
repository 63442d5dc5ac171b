"""The determinism probe: sampling, cache bypass, shares, sensitivity, report section."""

import json
from datetime import datetime

import httpx
import pandas as pd
import pytest
from dagster import DagsterInstance, materialize

from evalmislead_assets.analysis import determinism as det
from evalmislead_assets.analysis.determinism_sensitivity import sensitivity
from evalmislead_assets.assets import determinism as probe_assets
from evalmislead_assets.assets import generation
from evalmislead_assets.llm.types import ChatRequest, ChatResult, build_body, canonical_json
from evalmislead_assets.partitions import partition_key
from evalmislead_assets.report import section_list as report_sections
from evalmislead_assets.report.sections import determinism as determinism_section
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseIOManager, WarehouseResource
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.hashing import sha256_text
from evalmislead_tests.stored import with_stored


class ScriptedLLM(LLMResource):
    """An LLMResource whose client talks to an in-process fake llama-server (httpx.MockTransport).

    `answers` maps a prompt to the reply text (default: "echo: <prompt>"); a prompt in `fail`
    gets HTTP 400. /props reports `total_slots` and `build_info`.
    """

    answers: dict[str, str] = {}
    fail: list[str] = []
    total_slots: int = 4
    build_info: str = "b6000-fake"

    def client(self, transport: httpx.BaseTransport | None = None, model: object = None):
        def handler(request: httpx.Request) -> httpx.Response:
            if request.url.path == "/props":
                return httpx.Response(200, json={"model_alias": "fake-model", "total_slots": self.total_slots,
                                                 "build_info": self.build_info})
            prompt = json.loads(request.content)["messages"][-1]["content"]
            if prompt in self.fail:
                return httpx.Response(400, text="bad request")
            return httpx.Response(200, json={
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": self.answers.get(prompt, f"echo: {prompt}")}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            })

        return super().client(transport=transport or httpx.MockTransport(handler))


def _count(wh: Warehouse, sql: str) -> int:
    return int(wh.query_df(f"SELECT count(*) AS n FROM {sql}")["n"][0])


# ---------------------------------------------------------------- stored answers to probe


def _store(wh: Warehouse, rows: list[tuple[str, str, str, str | None]]) -> pd.DataFrame:
    """test_generations rows for Python/30, one per (condition, prompt, answer, error), with their llm_cache rows."""
    gens, cache = [], []
    for condition, prompt, answer, error in rows:
        req = ChatRequest("test_generations", condition, "off", "Python/30", [{"role": "user", "content": prompt}],
                          64, False)
        body = canonical_json(build_body(req, "fake-model", 1234))
        key = sha256_text(body)
        gens.append({
            "condition": condition, "thinking": "off", "task_id": "Python/30", "problem_idx": 30,
            "model": "fake-model", "request_json": body, "response_text": None if error else answer,
            "reasoning_text": None, "reasoning_present": False, "finish_reason": None if error else "stop",
            "cache_key": key, "error": error, "created_at": datetime(2026, 1, 1), "total_slots": 2,
            "cache_prompt": False, "build_info": "b5000-orig",
        })
        if not error:
            response = {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": answer}}]}
            cache.append({"cache_key": key, "request_json": body, "response_json": canonical_json(response),
                          "server_url": "http://orig:1", "server_props_sha256": None, "latency_s": 1.0,
                          "created_at": datetime(2026, 1, 1)})
    df = pd.DataFrame(gens)
    wh.append_rows("test_generations", df)
    wh.append_rows("llm_cache", pd.DataFrame(cache))
    return df


def _probe(llm: LLMResource, n: int = 10):
    return materialize(
        with_stored([probe_assets.determinism_probe]),
        resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                 "study_settings": StudySettingsResource(), "llm": llm},
        instance=DagsterInstance.ephemeral(), run_config={"ops": {"determinism_probe": {"config": {"n": n}}}},
    )


def _meta(result) -> dict:
    mat = result.asset_materializations_for_node("determinism_probe")[0]
    return {k: v.value for k, v in mat.metadata.items()}


def test_probe_resends_bypassing_the_cache_and_keeps_the_original_cache_rows(seeded_warehouse) -> None:
    wh = seeded_warehouse
    stored = _store(wh, [
        ("buggy_code", "p-same", "No tests from me.", None),
        ("fixed_code", "p-reworded", "No tests here.", None),
        ("signature_only", "p-fails", "Nothing.", None),
        ("human_docstring", "p-errored", "", "HTTP 500: stored error"),  # never drawn: no answer to compare
    ])
    cache_before = wh.read_table("llm_cache", order_by="cache_key")
    llm = ScriptedLLM(urls="http://fake:1", backoff_s=0.01, retries=0,
                      answers={"p-same": "No tests from me.", "p-reworded": "Still no tests, reworded.",
                               "p-fails": "Nothing again."})
    meta = _meta(_probe(llm))

    rows = wh.read_table("determinism_probe", order_by="condition").set_index("condition")
    assert sorted(rows.index) == ["buggy_code", "fixed_code", "signature_only"]
    assert rows.loc["buggy_code", "identical"] and rows.loc["buggy_code", "tests_identical"]
    # different text, same scoring (no test either time)
    assert not rows.loc["fixed_code", "identical"] and rows.loc["fixed_code", "tests_identical"]
    assert rows.loc["fixed_code", "probe_text"] == "Still no tests, reworded."
    assert pd.isna(rows.loc["signature_only", "probe_error"]) and not rows.loc["signature_only", "identical"]
    # settings of both answers
    assert set(rows["probe_total_slots"]) == {4} and set(rows["probe_build_info"]) == {"b6000-fake"}
    assert set(rows["probe_cache_prompt"]) == {False}
    assert set(rows["original_total_slots"]) == {2} and set(rows["original_build_info"]) == {"b5000-orig"}

    assert (meta["n"], meta["requests_drawn"], meta["errors"], meta["requests_sent"]) == (3, 3, 0, 3)
    assert abs(meta["share_identical_text"] - 1 / 3) < 1e-3 and meta["share_identical_scoring"] == 1.0

    # real requests in llm_calls, the same bodies (same cache keys) as stored ...
    calls = wh.read_table("llm_calls")
    assert len(calls) == 3 and set(calls["asset"]) == {"determinism_probe"}
    drawn = stored[stored["error"].isna()]
    assert sorted(calls["cache_key"]) == sorted(drawn["cache_key"])
    # ... and the cache still holds the original answers, nothing added
    cache_after = wh.read_table("llm_cache", order_by="cache_key")
    assert cache_after[["cache_key", "response_json"]].equals(cache_before[["cache_key", "response_json"]])


def test_a_failed_probe_request_is_stored_as_failed_and_the_step_goes_on(seeded_warehouse) -> None:
    """A live request that fails (on a loaded machine: one outlasting its timeout) is a row with probe_error, left
    out of the shares and counted in `errors`; the step succeeds so the report built after it is not lost."""
    _store(seeded_warehouse, [("buggy_code", "p-same", "No tests from me.", None),
                              ("signature_only", "p-fails", "Nothing.", None)])
    llm = ScriptedLLM(urls="http://fake:1", backoff_s=0.01, retries=0, answers={"p-same": "No tests from me."},
                      fail=["p-fails"])
    instance = DagsterInstance.ephemeral()
    result = materialize(
        with_stored([probe_assets.determinism_probe]), raise_on_error=False,
        resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                 "study_settings": StudySettingsResource(), "llm": llm},
        instance=instance, run_config={"ops": {"determinism_probe": {"config": {"n": 10}}}},
    )
    assert result.success
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any("determinism_probe: 1 of 2 requests failed" in m and "HTTP 400" in m and "counted as failed" in m
               for m in messages), messages
    meta = _meta(result)
    assert (meta["requests_drawn"], meta["n"], meta["errors"]) == (2, 1, 1)
    assert meta["share_identical_text"] == 1.0  # over the answered request only
    rows = seeded_warehouse.read_table("determinism_probe", order_by="condition").set_index("condition")
    assert "HTTP 400" in rows.loc["signature_only", "probe_error"]
    assert pd.isna(rows.loc["buggy_code", "probe_error"]) and rows.loc["buggy_code", "identical"]


def test_an_unreachable_server_stores_why_the_probe_did_not_run_and_the_step_succeeds(seeded_warehouse) -> None:
    """The probe is a side measurement: with its server down nothing is sent, every drawn request is stored with
    the reason, the step succeeds (the report after it is built), and the output asks the next run to try again."""
    from evalmislead_assets.dagster_metadata import INCOMPLETE_KEY
    from evalmislead_tests.dagster_services import free_port

    _store(seeded_warehouse, [("buggy_code", "p-one", "No tests from me.", None)])
    down = LLMResource(urls=f"http://127.0.0.1:{free_port()}", retries=0, backoff_s=0.01)
    result = _probe(down)
    assert result.success
    meta = _meta(result)
    assert meta["status"].startswith("not run: ") and "unreachable" in meta["status"]
    assert meta[INCOMPLETE_KEY] is True and meta["n"] == 0 and meta["share_identical_text"] is None
    rows = seeded_warehouse.read_table("determinism_probe")
    assert len(rows) == 1 and rows["probe_error"][0].startswith(det.NOT_RUN_PREFIX)
    assert det.not_run_reason(rows) is not None
    lines = "\n".join(determinism_section.section({"determinism_probe": rows}))
    assert "did not run (" in lines and "unreachable" in lines and "0.0 %" not in lines and "%" not in lines
    assert _count(seeded_warehouse, "llm_calls") == 0


def test_no_stored_answer_means_not_run(seeded_warehouse) -> None:
    meta = _meta(_probe(ScriptedLLM(urls="http://nowhere:1", retries=0)))
    assert meta["status"].startswith("not run") and meta["n"] == 0
    assert meta["share_identical_text"] is None and meta["share_identical_scoring"] is None
    assert _count(seeded_warehouse, "determinism_probe") == 0 and _count(seeded_warehouse, "llm_calls") == 0
    lines = "\n".join(determinism_section.section({"determinism_probe": seeded_warehouse.read_table("determinism_probe")}))
    assert "has not run" in lines and "0.0" not in lines


# ---------------------------------------------------------------- domain functions


def _generations(n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "condition": ["buggy_code", "fixed_code"] * (n // 2), "thinking": "off",
        "task_id": [f"Python/{i // 2}" for i in range(n)], "problem_idx": [i // 2 for i in range(n)],
        "request_json": [f'{{"i":{i}}}' for i in range(n)], "response_text": [f"answer {i}" for i in range(n)],
        "error": [None] * n, "finish_reason": "stop", "cache_key": [f"k{i}" for i in range(n)],
    })


def test_sample_is_seeded_stable_and_skips_failed_answers() -> None:
    gens = _generations(40)
    gens.loc[3, "error"], gens.loc[3, "response_text"] = "HTTP 500", None
    a = det.sample(gens, 10, seed=7)
    assert len(a) == 10 and "k3" not in set(a["cache_key"])
    assert a["cache_key"].tolist() == det.sample(gens.sample(frac=1, random_state=1), 10, seed=7)["cache_key"].tolist()
    assert a["cache_key"].tolist() != det.sample(gens, 10, seed=8)["cache_key"].tolist()
    assert len(det.sample(gens, 100, seed=7)) == 39
    assert det.sample(gens.iloc[0:0], 10, seed=7).empty and det.sample(gens, 0, seed=7).empty


def _result(text: str, error: str | None = None) -> ChatResult:
    return ChatResult(request_json="{}", cache_key="k", text=text, reasoning=None, reasoning_present=False,
                      finish_reason="stop", prompt_tokens=1, completion_tokens=1, latency_s=0.1,
                      server_url="http://s:1", server_props_sha256=None, model="m", from_cache=False, error=error,
                      total_slots=1, cache_prompt=False, build_info="b1")


def test_shares_identical_text_implies_identical_scoring() -> None:
    drawn = _generations(4)
    results = [_result("answer 0"), _result("answer 1, reworded"), _result("answer 2, other tests"),
               _result("answer 3")]
    frame = det.scoring_frame(drawn, results)
    # identical answers are not scored again: their original's scoring is reused
    assert frame["task_id"].tolist() == ["0/orig", "1/orig", "1/probe", "2/orig", "2/probe", "3/orig"]
    scored = {
        "0/orig": [("t.py::a", "misleading")],
        "1/orig": [("t.py::a", "effective")], "1/probe": [("t.py::a", "effective")],
        "2/orig": [("t.py::a", "effective")], "2/probe": [("t.py::a", "misleading"), ("t.py::b", "both_pass")],
        "3/orig": [],
        "3/probe": [("t.py::x", "both_fail")],  # ignored: same text cannot score differently
    }
    df = det.build_rows(drawn, results, scored, seed=1)
    assert df["identical"].tolist() == [True, False, False, True]
    assert df["tests_identical"].tolist() == [True, True, False, True]
    assert df.loc[2, ["original_effective", "probe_misleading", "probe_both_pass", "probe_n_tests"]].tolist() == [1, 1, 1, 2]
    assert df.loc[3, "probe_n_tests"] == 0
    s = det.summarize(df)
    assert (s.n, s.identical, s.tests_identical) == (4, 2, 3)
    assert s.share_identical == 0.5 and s.share_tests_identical == 0.75
    part = det.by_partition(df).set_index("condition")
    assert part.loc["buggy_code"].tolist() == ["off", 2, 1, 1] and part.loc["fixed_code"].tolist() == ["off", 2, 1, 2]


def test_failed_probe_requests_are_left_out_of_the_shares() -> None:
    drawn = _generations(2)
    df = det.build_rows(drawn, [_result("answer 0"), _result("", error="HTTP 400: no")], {"0/orig": [], "1/orig": []}, 1)
    s = det.summarize(df)
    assert (s.drawn, s.n, s.errors, s.share_identical) == (2, 1, 1, 1.0)
    only_errors = det.build_rows(drawn.iloc[:1], [_result("", error="x")], {"0/orig": []}, 1)
    assert det.summarize(only_errors).share_identical is None
    text = "\n".join(determinism_section.section({"determinism_probe": only_errors}))
    assert "got no answer" in text and "0.0" not in text


def _probe_rows(rows: list[dict]) -> pd.DataFrame:
    base = {"thinking": "off", "task_id": "Python/0", "probe_error": None, "tests_identical": False,
            "identical": False}
    return pd.DataFrame([{**base, **r} for r in rows])


def _outcomes(counts: dict[tuple[str, str, str], dict[str, int]]) -> pd.DataFrame:
    """Stored test_outcomes rows: (condition, thinking, task_id) -> {cell: count}."""
    rows = [{"condition": c, "thinking": th, "task_id": task, "test_id": f"t{cell}{i}", "outcome": cell}
            for (c, th, task), cells in counts.items() for cell, n in cells.items() for i in range(n)]
    return pd.DataFrame(rows, columns=["condition", "thinking", "task_id", "test_id", "outcome"])


def _answered(conditions: tuple[str, ...], thinking: str, tasks: list[str]) -> pd.DataFrame:
    return pd.DataFrame([{"condition": c, "thinking": thinking, "task_id": t} for c in conditions for t in tasks])


def _comparison(**kw) -> dict:
    return {"comparison_id": 1, "thinking": "off", "role": "primary", "metric": "misleading_rate",
            "condition_a": "buggy_code", "condition_b": "fixed_code", "subset": "all", "level": 0.9875, **kw}


def test_sensitivity_swaps_the_probed_answers_into_each_comparison() -> None:
    comparisons = pd.DataFrame([
        _comparison(rate_a=0.5, rate_b=0.1, n_tests_a=10, n_tests_b=10, estimate=0.4, ci_low=0.1, ci_high=0.7),
        _comparison(comparison_id=3, condition_a="model_spec", condition_b="signature_only", rate_a=0.2,
                    rate_b=0.2, n_tests_a=5, n_tests_b=5, estimate=0.0, ci_low=-0.1, ci_high=0.1),
    ])
    stored = _outcomes({("buggy_code", "off", "Python/0"): {"misleading": 2},
                        ("fixed_code", "off", "Python/0"): {"effective": 1}})
    probe = _probe_rows([
        # buggy_code: 2 misleading of 2 stored tests became 0 of 3
        {"condition": "buggy_code", "original_misleading": 2, "original_n_tests": 2, "probe_misleading": 0,
         "probe_n_tests": 3},
        # an errored probe request changes nothing
        {"condition": "fixed_code", "original_misleading": 1, "original_n_tests": 1, "probe_misleading": None,
         "probe_n_tests": None, "probe_error": "HTTP 500"},
    ])
    answered = _answered(("buggy_code", "fixed_code", "model_spec", "signature_only"), "off", ["Python/0"])
    sens = sensitivity(probe, comparisons, stored, answered).set_index("comparison_id")
    expected_shift = (3 / 11 - 0.1) - 0.4
    assert sens.loc[1, "shift"] == pytest.approx(expected_shift)
    assert sens.loc[1, "estimate_swapped"] == pytest.approx(0.4 + expected_shift)
    assert (sens.loc[1, "n_probed"], sens.loc[1, "n_changed"]) == (1, 1)
    assert pd.isna(sens.loc[3, "shift"]) and sens.loc[3, "n_probed"] == 0
    lines = determinism_section.sensitivity_lines(sens.reset_index())
    assert "not measured" in lines[1] and "shift -22.7" in lines[0] and "[98.75 %: +10.0, +70.0]" in lines[0]


def test_sensitivity_counts_only_the_problems_of_the_comparison() -> None:
    """Thinking on pairs over the truncation-matched subset: a probed answer outside it moves nothing."""
    comparisons = pd.DataFrame([_comparison(thinking="on", role="report-only", subset="truncation_matched",
                                            rate_a=0.0, rate_b=0.0, n_tests_a=2, n_tests_b=2, estimate=0.0,
                                            ci_low=0.0, ci_high=0.0)])
    stored = _outcomes({("buggy_code", "on", "Python/0"): {"both_pass": 2},
                        ("fixed_code", "on", "Python/0"): {"effective": 2},
                        ("buggy_code", "on", "Python/5"): {"both_pass": 1}})
    matched = pd.DataFrame({"task_id": ["Python/0", "Python/5"], "in_subset": [True, False]})
    answered = _answered(("buggy_code", "fixed_code"), "on", ["Python/0", "Python/5"])
    # Python/5 is outside the subset; its re-generation has 2 misleading tests of 2 (+50 points if swapped in)
    probe = _probe_rows([{"thinking": "on", "condition": "buggy_code", "task_id": "Python/5", "original_n_tests": 1,
                          "original_misleading": 0, "probe_n_tests": 2, "probe_misleading": 2}])
    sens = sensitivity(probe, comparisons, stored, answered, matched)
    row = sens.iloc[0]
    assert (row["n_probed"], row["n_outside"]) == (0, 1) and pd.isna(row["shift"])
    line = determinism_section.sensitivity_lines(sens)[0]
    assert "truncation-matched subset" in line and "1 probed answers of these conditions are outside" in line
    # the same answer inside the subset is swapped in: (2 misleading of 3 tests) - 0
    inside = sensitivity(probe, comparisons, stored, answered, matched.assign(in_subset=True))
    assert inside["n_probed"].iloc[0] == 1 and inside["shift"].iloc[0] == pytest.approx(2 / 3)
    # the subset not stored: not measured, said so (never the unrestricted figure)
    missing = sensitivity(probe, comparisons, stored, answered, pd.DataFrame())
    assert pd.isna(missing["shift"].iloc[0]) and missing["not_measured"].iloc[0] == "truncation_matched_subset is not stored"


def test_sensitivity_compares_against_the_stored_outcomes_not_a_re_scoring() -> None:
    """The estimate came from test_outcomes: the swap replaces those counts, whatever the re-scoring gave."""
    comparisons = pd.DataFrame([_comparison(rate_a=0.5, rate_b=0.0, n_tests_a=4, n_tests_b=4, estimate=0.5,
                                            ci_low=0.1, ci_high=0.9)])
    stored = _outcomes({("buggy_code", "off", "Python/0"): {"misleading": 2},
                        ("buggy_code", "off", "Python/1"): {"both_pass": 2},
                        ("fixed_code", "off", "Python/0"): {"effective": 4}})
    answered = _answered(("buggy_code", "fixed_code"), "off", ["Python/0", "Python/1"])
    probe = _probe_rows([
        # a new text scoring like the stored answer (2 misleading of 2); the original's re-scoring said 0 of 2
        {"condition": "buggy_code", "original_n_tests": 2, "original_misleading": 0, "probe_n_tests": 2,
         "probe_misleading": 2},
        # byte-identical: the stored outcomes stand, even though its re-scoring differs from them
        {"condition": "buggy_code", "task_id": "Python/1", "identical": True, "original_n_tests": 2,
         "original_misleading": 1, "probe_n_tests": 2, "probe_misleading": 1},
    ])
    sens = sensitivity(probe, comparisons, stored, answered)
    assert sens["n_probed"].iloc[0] == 2 and sens["n_changed"].iloc[0] == 0
    assert sens["shift"].iloc[0] == pytest.approx(0.0) and sens["estimate_swapped"].iloc[0] == pytest.approx(0.5)
    no_outcomes = sensitivity(probe, comparisons, None, answered)
    assert pd.isna(no_outcomes["shift"].iloc[0]) and "test_outcomes" in no_outcomes["not_measured"].iloc[0]


def test_sensitivity_of_a_comparison_that_is_not_estimable_is_not_measured() -> None:
    """A side with 0 tests has a NULL rate and estimate: the probe gives no shift, never a 0.0 or a crash."""
    nan = float("nan")
    comparisons = pd.DataFrame([_comparison(rate_a=nan, rate_b=0.25, n_tests_a=0, n_tests_b=4, estimate=nan,
                                            ci_low=nan, ci_high=nan)])
    probe = _probe_rows([
        {"condition": "buggy_code", "original_misleading": 0, "original_n_tests": 0, "probe_misleading": 1,
         "probe_n_tests": 2},
    ])
    stored = _outcomes({("fixed_code", "off", "Python/0"): {"misleading": 1, "both_pass": 3}})
    sens = sensitivity(probe, comparisons, stored, _answered(("buggy_code", "fixed_code"), "off", ["Python/0"]))
    assert sens["n_probed"].iloc[0] == 1 and pd.isna(sens["shift"].iloc[0])
    assert pd.isna(sens["estimate_swapped"].iloc[0])
    assert "not measured" in determinism_section.sensitivity_lines(sens)[0]


def test_report_section_is_registered_and_shows_the_figures() -> None:
    (section,) = [s for s in report_sections.sections() if s.title == "Run-to-run noise (determinism probe)"]
    assert "determinism_probe" in section.tables and "determinism_probe" in report_sections.tables()
    assert "has not run" in "\n".join(section.render({}))
    drawn = _generations(4)
    df = det.build_rows(drawn, [_result("answer 0"), _result("x"), _result("answer 2"), _result("answer 3")],
                        {"0/orig": [], "1/orig": [], "1/probe": [("t", "effective")], "2/orig": [], "3/orig": []}, 1)
    text = "\n".join(section.render({"determinism_probe": df, "bootstrap_comparisons": pd.DataFrame()}))
    assert "**3 of 4** (75.0 %)" in text and "(same test ids, same outcomes): **3 of 4**" in text
    assert "no comparison stored" in text
    # what each comparison paired over and its stored outcomes reach the section
    assert {"test_outcomes", "generated_tests", "truncation_matched_subset"} <= set(section.tables)
    comparisons = pd.DataFrame([_comparison(rate_a=0.0, rate_b=0.0, n_tests_a=1, n_tests_b=1, estimate=0.0,
                                            ci_low=0.0, ci_high=0.0, condition_b="buggy_code",
                                            condition_a="fixed_code")])
    frames = {"determinism_probe": df, "bootstrap_comparisons": comparisons,
              "test_outcomes": _outcomes({("fixed_code", "off", "Python/1"): {"both_fail": 1},
                                          ("buggy_code", "off", "Python/1"): {"both_fail": 1}}),
              "generated_tests": _answered(("buggy_code", "fixed_code"), "off", list(drawn["task_id"]))}
    text = "\n".join(section.render({t: frames.get(t, pd.DataFrame()) for t in section.tables}))
    assert "stored outcomes" in text
    assert "with the 4 probed answers of its problems re-generated (1 with cell counts other than the stored ones)" in text


def test_asset_is_in_the_definitions() -> None:
    from evalmislead_assets.definitions import defs

    assert defs.get_assets_def("determinism_probe").group_names_by_key


# ---------------------------------------------------------------- against the real server


@pytest.mark.slow
def test_probe_against_a_real_llama_server(seeded_warehouse, llama_server, monkeypatch) -> None:
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "0,2,30")
    monkeypatch.setenv("EVALMISLEAD_MAX_TOKENS_OFF", "48")
    monkeypatch.setenv("EVALMISLEAD_PROBE_N", "3")
    resources = {"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                 "study_settings": StudySettingsResource(),
                 "llm": LLMResource(urls=llama_server, backoff_s=0.2)}
    materialize(with_stored([generation.model_specs, generation.test_generations]), selection=[generation.test_generations],
                partition_key=partition_key("buggy_code", "off"), resources=resources,
                instance=DagsterInstance.ephemeral())
    gens = wh.read_table("test_generations")
    assert len(gens) == 3 and set(gens["total_slots"]) == {2} and set(gens["cache_prompt"]) == {False}
    assert all(json.loads(b)["cache_prompt"] is False for b in gens["request_json"])
    cache_before = wh.read_table("llm_cache", order_by="cache_key")

    result = materialize(with_stored([probe_assets.determinism_probe]), resources=resources, instance=DagsterInstance.ephemeral())
    meta = _meta(result)
    rows = wh.read_table("determinism_probe")
    assert len(rows) == 3 and meta["n"] == 3 and meta["errors"] == 0
    assert set(rows["probe_total_slots"]) == {2} and set(rows["probe_cache_prompt"]) == {False}
    assert set(rows["original_total_slots"]) == {2}
    assert rows["probe_text"].notna().all() and rows["identical"].notna().all()
    assert meta["share_identical_text"] == pytest.approx(rows["identical"].astype(bool).mean(), abs=1e-4)
    assert 0.0 <= meta["share_identical_text"] <= meta["share_identical_scoring"] <= 1.0
    calls = wh.read_table("llm_calls")
    assert (calls["asset"] == "determinism_probe").sum() == 3
    cache_after = wh.read_table("llm_cache", order_by="cache_key")
    assert cache_after[["cache_key", "response_json"]].equals(cache_before[["cache_key", "response_json"]])
