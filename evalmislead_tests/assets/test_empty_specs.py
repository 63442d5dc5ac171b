"""An empty model-written spec gets no model_spec test prompt: its answer row says why."""

import pandas as pd
import pytest
from dagster import DagsterInstance, materialize

from evalmislead_assets import settings
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.analysis.rates import condition_rates
from evalmislead_assets.assets import generation
from evalmislead_assets.llm.types import BatchStats, ChatResult
from evalmislead_assets.partitions import partition_key
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseIOManager, WarehouseResource
from evalmislead_assets.study.conditions import empty_spec_error
from evalmislead_tests.stored import with_stored

SENT: list = []


class RecordingLLM(LLMResource):
    """Answers every request with one test, records what was sent; no server."""

    def run_batch_with_stats(self, warehouse, requests, log=None, bypass_cache=False, model=None):
        SENT.extend(requests)
        results = [ChatResult(
            request_json="{}", cache_key=f"k-{r.task_id}", text="```python\ndef test_a():\n    pass\n```",
            reasoning=None, reasoning_present=False, finish_reason="stop", prompt_tokens=1, completion_tokens=1,
            latency_s=0.0, server_url=None, server_props_sha256=None, model="fake", from_cache=False, error=None,
        ) for r in requests]
        return results, BatchStats(total=len(requests))


def _specs(wh, texts: dict[int, tuple[object, object]]) -> None:
    wh.replace_rows("model_specs", pd.DataFrame({
        "thinking": "off", "task_id": [f"Python/{i}" for i in texts], "problem_idx": list(texts),
        "spec_text": [t for t, _ in texts.values()], "error": [e for _, e in texts.values()],
    }), where={"thinking": "off"})


def _run():
    return materialize(
        with_stored([generation.model_specs, generation.test_generations]), selection=[generation.test_generations],
        partition_key=partition_key("model_spec", "off"), instance=DagsterInstance.ephemeral(),
        resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                 "study_settings": StudySettingsResource(), "llm": RecordingLLM()},
    )


@pytest.fixture(autouse=True)
def _clear():
    SENT.clear()


def test_empty_spec_sends_no_prompt_and_stores_the_reason(seeded_warehouse, monkeypatch):
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "0,2,30")
    _specs(wh, {0: ("Return x plus one.", None), 2: ("  \n", None), 30: (None, "generation failed: HTTP 500")})
    res = _run()
    assert res.success
    assert [r.task_id for r in SENT] == ["Python/0"]
    rows = wh.read_table("test_generations").set_index("task_id")
    assert len(rows) == 3 and pd.isna(rows.loc["Python/0", "error"])
    assert rows.loc["Python/2", "error"] == "empty model spec"
    assert rows.loc["Python/30", "error"].startswith("empty model spec (spec error: generation failed: HTTP 500")
    assert pd.isna(rows.loc["Python/2", "request_json"]) and rows.loc["Python/2", "problem_idx"] == 2
    meta = res.asset_materializations_for_node("test_generations")[0].metadata
    assert meta["empty_model_specs"].value == 2
    # the analysis counts them as answers with zero tests, apart from server errors
    gens = wh.read_table("test_generations")
    gt = gens[["condition", "thinking", "task_id", "problem_idx"]].assign(n_tests=0, import_ok=False, source=None)
    rates = condition_rates(pd.DataFrame(), gens, gt, load_plan(settings.analysis_plan_path())).iloc[0]
    assert (rates["n_answers"], rates["n_empty_spec"], rates["n_errors"], rates["n_zero_tests"]) == (3, 2, 0, 3)


def test_every_spec_empty_stores_rows_without_any_request(seeded_warehouse, monkeypatch):
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "0,2")
    _specs(wh, {0: ("", None), 2: ("", None)})
    assert _run().success
    assert SENT == []
    assert wh.read_table("test_generations")["error"].tolist() == ["empty model spec"] * 2


def test_empty_spec_rule():
    assert empty_spec_error("", None) == "empty model spec"
    assert empty_spec_error(None, "cut") == "empty model spec (spec error: cut)"
    assert empty_spec_error("Return it.", None) is None
