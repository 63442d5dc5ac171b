"""The embedded-server resource: started only on a cache miss, shared by `llm` and `judge_llm`, stopped at teardown."""

import json

import httpx
import pytest
from dagster import Definitions, asset, define_asset_job, in_process_executor

from evalmislead_assets.llm.types import ChatRequest
from evalmislead_assets.resources import EmbeddedServerResource, LLMResource, WarehouseResource
from evalmislead_assets.resources import embedded_server as embedded_module
from evalmislead_assets.store.database import Warehouse


class FakeEmbedded:
    """Stands in for llm.llama_server.EmbeddedServer: records starts and stops, starts nothing."""

    started: list["FakeEmbedded"] = []

    def __init__(self, parallel: int, ctx_per_slot: int, **kw: object) -> None:
        self.parallel, self.ctx_per_slot, self.running = parallel, ctx_per_slot, False
        self.url = f"http://embedded{len(self.started)}:1"

    def start(self) -> "FakeEmbedded":
        self.running = True
        FakeEmbedded.started.append(self)
        return self

    def is_running(self) -> bool:
        return self.running

    def stop(self) -> None:
        self.running = False


def _answer(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/props":
        return httpx.Response(200, json={"model_alias": "embedded", "total_slots": 2})
    body = json.loads(request.content)
    return httpx.Response(200, json={
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "ok " + body["messages"][0]["content"]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    })


def _request(text: str) -> ChatRequest:
    return ChatRequest(asset="a", condition=None, thinking="off", task_id="Python/0",
                       messages=[{"role": "user", "content": text}], max_tokens=16, enable_thinking=False)


@asset
def asks_both(warehouse: WarehouseResource, llm: LLMResource, judge_llm: LLMResource) -> None:
    transport = httpx.MockTransport(_answer)
    wh = warehouse.get()
    for resource, text in ((llm, "generate"), (judge_llm, "judge")):
        [result], _ = resource.client(transport=transport).run_batch(wh, [_request(text)])
        assert result.error is None and result.text == f"ok {text}"


def _defs(db: str, shared: bool) -> Definitions:
    if shared:  # the wiring of definitions.py
        server = EmbeddedServerResource.configure_at_launch()
        resources = {"embedded_server": server, "llm": LLMResource(embedded_server=server),
                     "judge_llm": LLMResource(embedded_server=server)}
    else:
        resources = {"llm": LLMResource(), "judge_llm": LLMResource()}
    return Definitions(assets=[asks_both], resources={"warehouse": WarehouseResource(path=db), **resources},
                       jobs=[define_asset_job("ask", selection=[asks_both])], executor=in_process_executor)


@pytest.fixture
def fake_server(monkeypatch):
    monkeypatch.delenv("EVALMISLEAD_LLM_URL", raising=False)
    monkeypatch.setattr(embedded_module, "EmbeddedServer", FakeEmbedded)
    FakeEmbedded.started = []
    return FakeEmbedded


def test_one_server_for_both_resources_stopped_when_the_run_ends(fake_server, tmp_path) -> None:
    defs = _defs(str(tmp_path / "s.duckdb"), shared=True)
    assert defs.get_job_def("ask").execute_in_process().success
    assert len(fake_server.started) == 1
    [srv] = fake_server.started
    assert not srv.running  # teardown
    assert srv.parallel == 2 and srv.ctx_per_slot >= 2048  # asked for by the llm resource
    urls = Warehouse(tmp_path / "s.duckdb").query_df("SELECT DISTINCT server_url FROM llm_calls")["server_url"]
    assert list(urls) == [srv.url]


def test_a_fully_cached_run_starts_no_server(fake_server, tmp_path) -> None:
    defs = _defs(str(tmp_path / "s.duckdb"), shared=True)
    assert defs.get_job_def("ask").execute_in_process().success
    assert defs.get_job_def("ask").execute_in_process().success
    assert len(fake_server.started) == 1


def test_without_wiring_each_resource_has_its_own_server(fake_server, tmp_path) -> None:
    defs = _defs(str(tmp_path / "s.duckdb"), shared=False)
    assert defs.get_job_def("ask").execute_in_process().success
    assert len(fake_server.started) == 2 and not any(s.running for s in fake_server.started)


def test_configured_size_wins_over_the_request(fake_server) -> None:
    resource = EmbeddedServerResource(parallel=4, ctx_per_slot=9000)
    resource.url(parallel=1, ctx_per_slot=100)
    [srv] = fake_server.started
    assert (srv.parallel, srv.ctx_per_slot) == (4, 9000)
    resource.stop()
    assert not srv.running


def test_definitions_share_one_embedded_server() -> None:
    from evalmislead_assets.definitions import defs

    shared = defs.resources["embedded_server"]
    assert defs.resources["llm"].embedded_server is shared and defs.resources["judge_llm"].embedded_server is shared
