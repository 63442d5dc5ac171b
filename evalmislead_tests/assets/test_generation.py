"""model_specs and test_generations through Dagster, against a real llama-server (SmolLM2, small caps)."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    MultiToSingleDimensionPartitionMapping,
    materialize,
)

from evalmislead_assets import settings
from evalmislead_assets.assets import generation
from evalmislead_assets.assets.generation import THINKING_CHECK
from evalmislead_assets.llm import prompts
from evalmislead_assets.llm.llama_server import EmbeddedServer, smollm2_model
from evalmislead_assets.partitions import partition_key
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseIOManager, WarehouseResource
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.stored import with_stored

THINK_GRAMMAR = 'root ::= "<think>" [a-z ]{5,30} "</think>" [a-z .]{1,20}'
QWEN_STYLE_TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "qwen3_style_chat_template.jinja"


def _run(url: str, asset, key, config: dict | None = None, retries: int = 4, raise_on_error: bool = True):
    resources = {"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                 "study_settings": StudySettingsResource(),
                 "llm": LLMResource(urls=url, retries=retries, backoff_s=0.2)}
    return materialize(
        with_stored([generation.model_specs, generation.test_generations]), selection=[asset], partition_key=key,
        resources=resources,
        instance=DagsterInstance.ephemeral(), raise_on_error=raise_on_error,
        run_config={"ops": {asset.op.name: {"config": config or {}}}},
    )


def _metadata(result, asset) -> dict:
    mat = result.asset_materializations_for_node(asset.op.name)[0]
    return {k: v.value for k, v in mat.metadata.items()}


def _check(result) -> tuple[bool, str]:
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == THINKING_CHECK]
    return evaluation.passed, evaluation.description


def _count(wh: Warehouse, sql: str) -> int:
    return int(wh.query_df(f"SELECT count(*) AS n FROM {sql}")["n"][0])


def test_lineage_and_partitions() -> None:
    assert str(partition_key("buggy_code", "off")) == "buggy_code|off"
    assert len(generation.test_generations.partitions_def.get_partition_keys()) == 12
    assert generation.model_specs.partitions_def.get_partition_keys() == ["off", "on"]
    dep = generation.test_generations.get_partition_mapping(AssetKey("model_specs"))
    assert isinstance(dep, MultiToSingleDimensionPartitionMapping) and dep.partition_dimension_name == "thinking"
    assert AssetKey("problem_validation") in generation.test_generations.dependency_keys
    assert AssetKey("problem_validation") in generation.model_specs.dependency_keys
    assert {c.name for c in generation.test_generations.check_specs} == {THINKING_CHECK}


def test_model_spec_condition_without_specs_fails_clearly(seeded_warehouse, monkeypatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30")
    result = _run("http://127.0.0.1:9", generation.test_generations, partition_key("model_spec", "off"), raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "model_specs partition 'off' has no spec for Python/30" in failure.step_failure_data.error.message
    assert _count(seeded_warehouse, "llm_calls") == 0


@pytest.mark.slow
def test_generation_stores_answers_with_provenance_and_reruns_from_cache(
    seeded_warehouse, llama_server, monkeypatch
) -> None:
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30,0")
    monkeypatch.setenv("EVALMISLEAD_MAX_TOKENS_OFF", "40")
    for condition in ("buggy_code", "fixed_code"):
        result = _run(llama_server, generation.test_generations, partition_key(condition, "off"))
        meta = _metadata(result, generation.test_generations)
        assert meta["answers"] == 2 and meta["errors"] == 0 and meta["requests_sent"] == 2 and meta["cache_hits"] == 0
        assert meta["max_tokens"] == 40 and meta["completion_tokens"] > 0
        assert meta["problems"] == 2 and meta["problem_set"] == "0,30"  # the UI shows the partition's problems
        assert _check(result)[0]

    rows = wh.read_table("test_generations", order_by="condition, problem_idx")
    assert rows[["condition", "task_id"]].values.tolist() == [
        ["buggy_code", "Python/0"], ["buggy_code", "Python/30"], ["fixed_code", "Python/0"], ["fixed_code", "Python/30"],
    ]
    template_sha = prompts.load_template(prompts.TEST_TEMPLATE, settings.prompts_dir()).sha256
    props_shas = set(wh.read_table("server_props")["server_props_sha256"])
    for row in rows.to_dict("records"):
        body = json.loads(row["request_json"])
        assert body["temperature"] == 0 and body["max_tokens"] == 40 and body["seed"] == 1234
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        assert body["model"] == row["model"] == "SmolLM2-135M-Instruct-Q4_1"
        content = body["messages"][0]["content"]
        assert row["prompt_sha256"] == prompts.sha256_text(content) and row["template_sha256"] == template_sha
        assert row["response_text"] and row["finish_reason"] in ("stop", "length")
        assert row["prompt_tokens"] > 0 and 0 < row["completion_tokens"] <= 40 and row["latency_s"] > 0
        assert row["server_url"] == llama_server and row["server_props_sha256"] in props_shas
        assert row["error"] is None and not row["reasoning_present"]
    get_positive = rows[(rows.task_id == "Python/30")].set_index("condition")["request_json"]
    assert "e < 0" in get_positive["buggy_code"] and "e > 0" in get_positive["fixed_code"]

    calls = wh.read_table("llm_calls")
    assert len(calls) == 4 and set(calls["status_code"]) == {200} and set(calls["asset"]) == {"test_generations"}
    assert sorted(zip(calls["condition"], calls["thinking"], calls["task_id"])) == sorted(
        zip(rows["condition"], rows["thinking"], rows["task_id"])
    )

    again = _run(llama_server, generation.test_generations, partition_key("buggy_code", "off"))
    meta = _metadata(again, generation.test_generations)
    assert meta["cache_hits"] == 2 and meta["requests_sent"] == 0
    assert _count(wh, "llm_calls") == 4
    assert _count(wh, "test_generations") == 4  # replaced, not appended
    rerun = wh.read_table("test_generations", where={"condition": "buggy_code"}, order_by="problem_idx")
    assert rerun["response_text"].tolist() == rows[rows.condition == "buggy_code"]["response_text"].tolist()


@pytest.mark.slow
def test_model_spec_condition_reads_specs_of_its_thinking_mode(seeded_warehouse, llama_server, monkeypatch) -> None:
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30")
    specs = _run(llama_server, generation.model_specs, "off", {"max_tokens": 48})
    assert _metadata(specs, generation.model_specs)["answers"] == 1
    spec_row = wh.read_table("model_specs").iloc[0]
    assert spec_row["thinking"] == "off" and spec_row["spec_text"] == prompts.extract_spec(spec_row["response_text"])
    spec_body = json.loads(spec_row["request_json"])
    assert "return [e for e in l if e < 0]" in spec_body["messages"][0]["content"]
    assert spec_row["template_sha256"] == prompts.load_template(prompts.SPEC_TEMPLATE, settings.prompts_dir()).sha256

    _run(llama_server, generation.test_generations, partition_key("model_spec", "off"), {"max_tokens": 24})
    row = wh.read_table("test_generations").iloc[0]
    content = json.loads(row["request_json"])["messages"][0]["content"]
    assert json.loads(row["request_json"])["max_tokens"] == 24
    assert "return [e for e in l" not in content
    first_spec_line = spec_row["spec_text"].strip().splitlines()[0].replace('"""', "'''").strip()
    assert first_spec_line in content


@pytest.mark.slow
def test_server_killed_mid_run_fails_clearly_keeps_rows_and_resumes(seeded_warehouse, monkeypatch, tmp_path) -> None:
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "0,2,13,30")
    config = {"max_tokens": 64}
    key = partition_key("fixed_code", "off")
    srv = EmbeddedServer(parallel=1, ctx_per_slot=1024, log_path=tmp_path / "a.log", model=smollm2_model()).start()
    stop = threading.Event()

    def kill_after_first_answer() -> None:
        while not stop.is_set():
            if wh.query_df("SELECT count(*) AS n FROM llm_cache")["n"][0] >= 1:
                os.killpg(srv.pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_after_first_answer)
    killer.start()
    try:
        result = _run(srv.url, generation.test_generations, key, config, retries=1, raise_on_error=False)
    finally:
        stop.set()
        killer.join()
        srv.stop()
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message.strip()
    assert "unreachable" in message and srv.url in message and "re-run resumes" in message and "\n" not in message

    stored = _count(wh, "llm_cache")
    assert 1 <= stored < 4
    assert _count(wh, "test_generations") == 0  # the partition is written only when complete
    calls_before = wh.read_table("llm_calls")
    assert (calls_before["status_code"] == 200).sum() == stored and calls_before["status_code"].isna().any()

    with EmbeddedServer(parallel=1, ctx_per_slot=1024, log_path=tmp_path / "b.log", model=smollm2_model()) as fresh:
        rerun = _run(fresh.url, generation.test_generations, key, config)
    meta = _metadata(rerun, generation.test_generations)
    assert meta["cache_hits"] == stored and meta["requests_sent"] == 4 - stored and meta["answers"] == 4
    calls = wh.read_table("llm_calls")
    assert (calls["status_code"] == 200).sum() == 4  # no answer was generated twice
    assert _count(wh, "test_generations") == 4


@pytest.mark.slow
def test_thinking_on_stores_reasoning_content(seeded_warehouse, monkeypatch, tmp_path) -> None:
    """A server whose chat template is reasoning-capable returns `reasoning_content`; it is stored."""
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30,0")
    args = ["--chat-template-file", str(QWEN_STYLE_TEMPLATE)]
    with EmbeddedServer(parallel=2, ctx_per_slot=1024, extra_args=args, log_path=tmp_path / "s.log",
                        model=smollm2_model()) as srv:
        result = _run(srv.url, generation.test_generations, partition_key("buggy_code", "on"),
                      {"max_tokens": 64, "grammar": THINK_GRAMMAR})
    rows = wh.read_table("test_generations")
    assert len(rows) == 2 and set(rows["thinking"]) == {"on"}
    for row in rows.to_dict("records"):
        body = json.loads(row["request_json"])
        assert body["chat_template_kwargs"] == {"enable_thinking": True} and body["grammar"] == THINK_GRAMMAR
        assert row["reasoning_present"] and row["reasoning_text"].strip()
        assert "<think>" not in row["response_text"] and "</think>" not in row["response_text"]
    raw = wh.query_df("SELECT response_json FROM llm_cache")["response_json"]
    assert all(json.loads(r)["choices"][0]["message"].get("reasoning_content") for r in raw)
    passed, description = _check(result)
    assert passed and "2 of 2 thinking-on answers carry reasoning" in description


@pytest.mark.slow
def test_thinking_flag_is_not_trusted(seeded_warehouse, llama_server, monkeypatch) -> None:
    """Inline <think> in a thinking-off answer is split off and fails the check; a thinking-on run with no reasoning fails too."""
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30,0")
    off = _run(llama_server, generation.test_generations, partition_key("signature_only", "off"),
               {"max_tokens": 64, "grammar": THINK_GRAMMAR})
    assert off.success  # the answers are kept; the check carries the alarm
    passed, description = _check(off)
    assert not passed and "2 of 2 thinking-off answers carry reasoning" in description
    rows = wh.read_table("test_generations", where={"condition": "signature_only", "thinking": "off"})
    assert all(rows["reasoning_present"]) and not any(rows["response_text"].str.contains("<think>"))
    cached = [json.loads(r) for r in wh.query_df("SELECT response_json FROM llm_cache")["response_json"]]
    assert all(c["choices"][0]["message"]["content"].startswith("<think>") for c in cached)  # inline from the server

    on = _run(llama_server, generation.test_generations, partition_key("signature_only", "on"), {"max_tokens": 16})
    passed, description = _check(on)
    assert not passed and "0 of 2 thinking-on answers carry reasoning" in description


def test_every_answer_records_the_servers_determinism_settings(seeded_warehouse, monkeypatch) -> None:
    """total_slots and build_info from /props, cache_prompt from the request (off), on specs and tests alike."""
    from evalmislead_tests.analysis.test_determinism import ScriptedLLM

    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30,0")
    resources = {"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                 "study_settings": StudySettingsResource(),
                 "llm": ScriptedLLM(urls="http://fake:1", total_slots=4, build_info="b7000-abc")}
    for asset, key in ((generation.model_specs, "off"), (generation.test_generations, partition_key("buggy_code", "off"))):
        materialize(with_stored([generation.model_specs, generation.test_generations]), selection=[asset], partition_key=key,
                    resources=resources, instance=DagsterInstance.ephemeral())
    for table in ("model_specs", "test_generations"):
        rows = wh.read_table(table)
        assert len(rows) == 2
        assert rows[["total_slots", "cache_prompt", "build_info"]].values.tolist() == [[4, False, "b7000-abc"]] * 2
        assert all(json.loads(b)["cache_prompt"] is False for b in rows["request_json"])
        # the new columns come last, after the ones old DuckDB files already have
        columns = wh.query_df(f"SELECT * FROM {table} LIMIT 0").columns.tolist()
        assert columns[-6:] == ["total_slots", "cache_prompt", "build_info", "model_name", "language", "thinking_off"]
        assert set(rows["thinking_off"]) == {"template"}


@pytest.mark.slow
def test_answers_that_are_errors_fail_the_step_and_a_rerun_asks_only_for_them(
    seeded_warehouse, llama_server, monkeypatch, tmp_path
) -> None:
    """A real 400 (a prompt over the slot's context) is not an answer with zero tests: the step fails."""
    import shutil

    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30,0")
    prompts_dir = tmp_path / "prompts"
    shutil.copytree(Path(__file__).resolve().parents[2] / "prompts", prompts_dir)
    template = prompts_dir / "test_generation.md"
    template.write_text(template.read_text() + "\n" + "padding " * 3000)
    monkeypatch.setenv("EVALMISLEAD_PROMPTS_DIR", str(prompts_dir))
    key = partition_key("buggy_code", "off")
    result = _run(llama_server, generation.test_generations, key, {"max_tokens": 8}, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message.strip()
    assert "2 of 2 requests failed" in message and "HTTP 400" in message and "\n" not in message, message
    assert _count(wh, "test_generations") == 0 and _count(wh, "llm_cache") == 0
    assert _count(wh, "llm_calls WHERE status_code = 400 AND state = 'error'") == 2  # a 4xx is not retried

    template.write_text("Write pytest tests for {code}")  # a prompt that fits: the re-run sends both again
    rerun = _run(llama_server, generation.test_generations, key, {"max_tokens": 8})
    assert _metadata(rerun, generation.test_generations)["requests_sent"] == 2
    assert _count(wh, "test_generations WHERE error IS NULL") == 2


@pytest.mark.parametrize("mode", ["status:500", "error_body", "html"])
def test_a_failing_server_fails_the_step_never_a_zero_test_answer(seeded_warehouse, monkeypatch, mode) -> None:
    from evalmislead_tests.fake_llm_server import FakeLLMServer

    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30,0")
    with FakeLLMServer(mode) as fake:
        result = _run(fake.url, generation.model_specs, "off", retries=1, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message.strip()
    assert "model_specs[-|off]: 2 of 2 requests failed (first: Python/" in message and "\n" not in message, message
    assert _count(wh, "model_specs") == 0 and _count(wh, "llm_cache") == 0
    assert not result.asset_materializations_for_node(generation.model_specs.op.name)


def test_thinking_on_for_a_model_that_cannot_think_fails_before_any_request(seeded_warehouse, monkeypatch) -> None:
    """The default study's bundled coder declares thinking = false: a thinking-on partition fails in one line,
    sends nothing and starts no server (the Dagster route of the CLI's refusal)."""
    from evalmislead_assets import study_models

    for name in ("EVALMISLEAD_STUDY", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL", "EVALMISLEAD_MODELS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30")
    study_models.reset()
    try:
        result = _run("", generation.model_specs, "on", raise_on_error=False)
    finally:
        study_models.reset()
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message.strip()
    assert "cannot think" in message and "\n" not in message
    assert _count(seeded_warehouse, "llm_calls") == 0


def test_problem_ranges_name_the_partitions_problem_set() -> None:
    assert generation.problem_ranges([30, 0, 1, 2, 5, 31]) == "0-2,5,30-31"
    assert generation.problem_ranges([2, 4, 13, 30]) == "2,4,13,30" and generation.problem_ranges([]) == ""


@pytest.mark.slow
def test_thinking_off_mechanism_is_sent_named_per_row_and_never_pooled(seeded_warehouse, monkeypatch, tmp_path) -> None:
    """A model with thinking_off = "prefill" sends the assistant prefill and its rows say so; switching the same
    model to "template" and asking only part of the partition again is refused before anything is sent (the
    partition would pool two mechanisms), while asking all of it replaces every row."""
    from evalmislead_assets import study_models
    from evalmislead_assets.llm.types import PREFILL_MESSAGE
    from evalmislead_tests.fake_llm_server import FakeLLMServer

    wh = seeded_warehouse
    for name in ("EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL", "EVALMISLEAD_MODELS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30,0")

    def use(mechanism: str, url: str) -> None:  # the data folder's study file, edited (another file is refused)
        path = tmp_path / "r1.toml"
        path.write_text(f'[[models]]\nname = "r1"\nurls = ["{url}"]\nthinking_off = "{mechanism}"\n', encoding="utf-8")
        monkeypatch.setenv("EVALMISLEAD_STUDY", str(path))
        study_models.reset()

    try:
        with FakeLLMServer("ok") as fake:
            use("prefill", fake.url)
            result = _run("", generation.model_specs, "off")
            assert [b["messages"][-1] for b in fake.bodies] == [PREFILL_MESSAGE] * 2
            assert _metadata(result, generation.model_specs)["thinking_off"] == "prefill"
            prefill_rows = wh.read_table("model_specs", order_by="problem_idx")
            assert set(prefill_rows["thinking_off"]) == {"prefill"}

            use("template", fake.url)
            monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30")
            refused = _run("", generation.model_specs, "off", raise_on_error=False)
            assert not refused.success and len(fake.bodies) == 2
            (failure,) = [e for e in refused.all_events if e.is_step_failure]
            message = failure.step_failure_data.error.message.strip()
            assert 'thinking_off = "template" but holds 1 thinking-off answers made with "prefill"' in message
            assert "never pooled" in message and "\n" not in message

            monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30,0")
            _run("", generation.model_specs, "off")
            assert all(b["messages"][-1]["role"] == "user" for b in fake.bodies[2:]) and len(fake.bodies) == 4
    finally:
        study_models.reset()
    rows = wh.read_table("model_specs", order_by="problem_idx")
    assert set(rows["thinking_off"]) == {"template"}
    assert not set(rows["cache_key"]) & set(prefill_rows["cache_key"])


def test_a_failed_thinking_check_names_the_mechanism_that_did_not_hold() -> None:
    from evalmislead_assets.llm.types import ChatResult

    def result(reasoning: str | None) -> ChatResult:
        return ChatResult(request_json="{}", cache_key="k", text="t", reasoning=reasoning,
                          reasoning_present=bool(reasoning), finish_reason="stop", prompt_tokens=1,
                          completion_tokens=1, latency_s=0.1, server_url="u", server_props_sha256=None, model="m",
                          from_cache=False, error=None)

    failed = generation.thinking_check("a", "off", [result("hmm"), result(None)], "prefill")
    assert not failed.passed and failed.description.startswith("1 of 2 thinking-off answers carry reasoning")
    assert 'the assistant prefill (thinking_off = "prefill")' in failed.description
    default = generation.thinking_check("a", "off", [result("hmm")])
    assert 'enable_thinking=false (thinking_off = "template")' in default.description
    assert generation.thinking_check("a", "off", [result(None)], "budget0").passed
