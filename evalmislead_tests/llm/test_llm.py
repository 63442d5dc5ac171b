"""The llm client against a fake OpenAI-compatible server (httpx.MockTransport): cache, calls, retries, concurrency."""

import json
import logging
import threading
import time

import httpx
import pytest

from evalmislead_assets.llm.client import ChatClient
from evalmislead_assets.llm.types import ChatRequest, LLMUnreachable, build_body, canonical_json, split_reasoning
from evalmislead_assets.resources import LLMResource
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.hashing import sha256_text


class FakeServers:
    """Answers /props and /v1/chat/completions for any host; behaviour per host is scriptable."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.chat_hosts: list[str] = []
        self.bodies: list[bytes] = []  # every chat request body, as sent
        self.fail: dict[str, list[object]] = {}  # host -> queue of 503 / "connect" to emit first
        self.down: set[str] = set()
        self.props_extra: dict[str, object] = {}
        self.message: dict[str, object] | None = None

    def handler(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if host in self.down:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if request.url.path == "/props":
            return httpx.Response(200, json={"model_alias": "fake-model", "total_slots": 2, **self.props_extra})
        with self.lock:
            queue = self.fail.get(host) or []
            action = queue.pop(0) if queue else None
            self.chat_hosts.append(host)
            self.bodies.append(request.content)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if action == "connect":
                raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
            if isinstance(action, int):
                return httpx.Response(action, text="server exploded\nwith two lines")
            time.sleep(self.delay_s)
            body = json.loads(request.content)
            text = "echo: " + body["messages"][-1]["content"]
            message = self.message or {"role": "assistant", "content": text}
            return httpx.Response(200, json={
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 5}, "model": body["model"],
            })
        finally:
            with self.lock:
                self.in_flight -= 1

    def client(self, urls: str = "http://a:1", **kw) -> ChatClient:
        kw.setdefault("backoff_s", 0.01)
        return LLMResource(urls=urls, **kw).client(transport=httpx.MockTransport(self.handler))


def _reqs(n: int, **kw) -> list[ChatRequest]:
    return [
        ChatRequest(asset="test_generations", condition="buggy_code", thinking="off", task_id=f"Python/{i}",
                    messages=[{"role": "user", "content": f"prompt {i}"}], max_tokens=kw.get("max_tokens", 64),
                    enable_thinking=False)
        for i in range(n)
    ]


@pytest.fixture
def wh(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "llm.duckdb")


def _count(wh: Warehouse, table: str) -> int:
    return int(wh.query_df(f"SELECT count(*) AS n FROM {table}")["n"][0])


# ---- request body and cache key ----


def test_body_has_the_protocol_settings() -> None:
    req = _reqs(1)[0]
    req.extra = {"grammar": "root ::= \"x\""}
    body = build_body(req, "m", 1234)
    assert body == {
        "model": "m", "messages": req.messages, "temperature": 0, "seed": 1234, "max_tokens": 64,
        "chat_template_kwargs": {"enable_thinking": False}, "cache_prompt": False, "grammar": "root ::= \"x\"",
    }


def test_cache_key_covers_everything_that_changes_the_answer() -> None:
    base = _reqs(1)[0]
    key = lambda r, model="m", seed=1: sha256_text(canonical_json(build_body(r, model, seed)))  # noqa: E731
    assert key(base) == key(_reqs(1)[0])
    assert key(base) != key(_reqs(1, max_tokens=65)[0])
    assert key(base) != key(base, model="other")
    assert key(base) != key(base, seed=2)
    on = _reqs(1)[0]
    on.enable_thinking = True
    assert key(base) != key(on)
    # provenance fields do not change the answer, so they do not change the key
    other = _reqs(1)[0]
    other.asset, other.condition = "model_specs", None
    assert key(base) == key(other)


@pytest.mark.parametrize(
    ("message", "text", "reasoning"),
    [
        ({"content": "answer", "reasoning_content": "thoughts"}, "answer", "thoughts"),
        ({"content": "<think>hmm</think>\nanswer"}, "answer", "hmm"),
        ({"content": "  <think>cut off while thin"}, "", "cut off while thin"),
        ({"content": "plain answer"}, "plain answer", None),
        ({"content": "text mentions <think> later"}, "text mentions <think> later", None),
        ({"content": None}, "", None),
    ],
)
def test_split_reasoning(message, text, reasoning) -> None:
    assert split_reasoning(message) == (text, reasoning)


# ---- cache and call log ----


def test_second_run_is_served_from_the_cache(wh) -> None:
    fake = FakeServers()
    first, s1 = fake.client().run_batch(wh, _reqs(3))
    assert s1.requests_sent == 3 and s1.cache_hits == 0
    assert [r.text for r in first] == ["echo: prompt 0", "echo: prompt 1", "echo: prompt 2"]
    assert not any(r.from_cache for r in first)
    assert _count(wh, "llm_calls") == 3 and _count(wh, "llm_cache") == 3
    calls = wh.read_table("llm_calls", order_by="task_id")
    assert calls["task_id"].tolist() == ["Python/0", "Python/1", "Python/2"]
    assert set(calls["status_code"]) == {200} and set(calls["asset"]) == {"test_generations"}
    assert set(calls["condition"]) == {"buggy_code"} and set(calls["thinking"]) == {"off"}

    second, s2 = fake.client().run_batch(wh, _reqs(3))
    assert s2.requests_sent == 0 and s2.cache_hits == 3
    assert all(r.from_cache for r in second)
    assert [r.text for r in second] == [r.text for r in first]
    assert [r.cache_key for r in second] == [r.cache_key for r in first]
    assert _count(wh, "llm_calls") == 3
    assert len(fake.chat_hosts) == 3


def test_cached_run_needs_no_server_when_the_model_is_known(wh) -> None:
    FakeServers().client(model="m").run_batch(wh, _reqs(2))
    dead = FakeServers()
    dead.down.add("a")
    results, stats = dead.client(model="m").run_batch(wh, _reqs(2))
    assert stats.cache_hits == 2 and not any(r.error for r in results)


def test_results_carry_provenance_and_props_are_recorded(wh) -> None:
    fake = FakeServers()
    fake.props_extra = {"media_marker": "random-1"}
    results, _ = fake.client().run_batch(wh, _reqs(1))
    r = results[0]
    body = json.loads(r.request_json)
    assert body["temperature"] == 0 and body["max_tokens"] == 64 and body["model"] == "fake-model"
    assert r.cache_key == sha256_text(r.request_json)
    assert (r.prompt_tokens, r.completion_tokens, r.finish_reason) == (7, 5, "stop")
    assert r.server_url == "http://a:1" and r.latency_s is not None
    props = wh.read_table("server_props")
    assert props["server_props_sha256"].tolist() == [r.server_props_sha256]
    assert json.loads(props["props_json"][0])["model_alias"] == "fake-model"
    # a per-start random field does not make a new props row
    fake.props_extra = {"media_marker": "random-2"}
    fake.client().run_batch(wh, _reqs(2))
    assert _count(wh, "server_props") == 1


def test_identical_requests_are_sent_once(wh) -> None:
    fake = FakeServers()
    reqs = _reqs(1) + _reqs(1)
    results, stats = fake.client().run_batch(wh, reqs)
    assert stats.requests_sent == 1 and len(results) == 2 and results[0].text == results[1].text


# ---- concurrency and several servers ----


def test_requests_run_concurrently_up_to_the_limit(wh) -> None:
    # the server takes long enough that the per-request DuckDB writes (row before, row after) of
    # three requests fit well inside one answer's time even on a loaded machine
    fake = FakeServers(delay_s=1.0)
    fake.client(max_in_flight=3).run_batch(wh, _reqs(6))
    assert fake.max_in_flight == 3  # three requests were inside the server at once (no wall-clock assert: flaky under load)


def test_one_in_flight_is_sequential(wh) -> None:
    fake = FakeServers(delay_s=0.02)
    fake.client(max_in_flight=1).run_batch(wh, _reqs(4))
    assert fake.max_in_flight == 1


def test_requests_spread_across_servers(wh) -> None:
    fake = FakeServers(delay_s=0.05)
    fake.client(urls="http://a:1,http://b:2", max_in_flight=4).run_batch(wh, _reqs(8))
    assert {"a", "b"} == set(fake.chat_hosts)
    assert min(fake.chat_hosts.count("a"), fake.chat_hosts.count("b")) >= 2
    assert _count(wh, "server_props") == 1  # same fake props on both


def test_a_server_down_from_the_start_is_left_out(wh, caplog) -> None:
    fake = FakeServers()
    fake.down.add("b")
    with caplog.at_level(logging.WARNING, logger="evalmislead_assets.llm.client"):
        results, _ = fake.client(urls="http://a:1,http://b:2", retries=1).run_batch(wh, _reqs(3))
    assert not any(r.error for r in results) and set(fake.chat_hosts) == {"a"}
    assert any("http://b:2" in r.getMessage() for r in caplog.records)
    fake.down.add("a")
    with pytest.raises(LLMUnreachable, match="http://a:1, http://b:2"):
        fake.client(urls="http://a:1,http://b:2", retries=0).run_batch(wh, _reqs(4))


def test_server_failing_mid_run_is_routed_around(wh) -> None:
    fake = FakeServers(delay_s=0.01)
    fake.fail["b"] = ["connect"] * 50
    results, stats = fake.client(urls="http://a:1,http://b:2", max_in_flight=2, retries=3).run_batch(wh, _reqs(6))
    assert not any(r.error for r in results)
    assert all(r.server_url == "http://a:1" for r in results)
    assert stats.requests_sent > 6  # the failed attempts on b were sent and logged
    assert _count(wh, "llm_calls") == stats.requests_sent


# ---- retries and failures ----


def test_5xx_is_retried_and_every_attempt_logged(wh) -> None:
    fake = FakeServers()
    fake.fail["a"] = [503, 500]
    results, stats = fake.client(retries=4).run_batch(wh, _reqs(1))
    assert results[0].error is None and results[0].text == "echo: prompt 0"
    calls = wh.read_table("llm_calls", order_by="ts")
    assert calls["status_code"].tolist() == [503, 500, 200]
    assert calls["error"].iloc[0].startswith("HTTP 503: server exploded with two lines")
    assert stats.requests_sent == 3 and _count(wh, "llm_cache") == 1


def test_4xx_is_not_retried_and_not_cached(wh) -> None:
    fake = FakeServers()
    fake.fail["a"] = [400]
    results, stats = fake.client().run_batch(wh, _reqs(2))
    errors = [r for r in results if r.error]
    assert len(errors) == 1 and errors[0].error.startswith("HTTP 400") and errors[0].text == ""
    assert stats.errors == 1 and stats.requests_sent == 2
    assert _count(wh, "llm_cache") == 1
    # the failed one is asked again next time, the good one is not
    _, again = fake.client().run_batch(wh, _reqs(2))
    assert again.cache_hits == 1 and again.requests_sent == 1


def test_persistent_5xx_gives_an_error_row_not_an_abort(wh) -> None:
    fake = FakeServers()
    fake.fail["a"] = [500, 500, 500]
    results, stats = fake.client(retries=2, max_in_flight=1).run_batch(wh, _reqs(2))
    assert results[0].error.startswith("HTTP 500") and results[1].error is None
    assert stats.requests_sent == 4


def test_unreachable_server_raises_one_line_naming_the_url(wh) -> None:
    fake = FakeServers()
    fake.down.add("nowhere")
    with pytest.raises(LLMUnreachable) as info:
        fake.client(urls="http://nowhere:9").run_batch(wh, _reqs(2))
    msg = str(info.value)
    # the fix names where the URL is set (here the resource config), not EVALMISLEAD_LLM_URL
    assert "http://nowhere:9" in msg and "\n" not in msg and "EVALMISLEAD_LLM_URL" not in msg
    assert msg.endswith("start it or fix the urls of this LLM resource (launchpad resources config)")
    with pytest.raises(LLMUnreachable) as info:
        fake.client(urls="http://nowhere:9", urls_origin="EVALMISLEAD_JUDGE_URL").run_batch(wh, _reqs(2))
    assert str(info.value).endswith("start it or fix EVALMISLEAD_JUDGE_URL")


def test_server_gone_mid_run_keeps_what_finished_and_resumes(wh) -> None:
    fake = FakeServers()
    fake.fail["a"] = [None, None] + ["connect"] * 100  # two answers, then the server is gone
    with pytest.raises(LLMUnreachable) as info:
        fake.client(model="m", max_in_flight=1, retries=2).run_batch(wh, _reqs(5))
    msg = str(info.value)
    assert "http://a:1" in msg and "2 of 5 answers are stored" in msg and "\n" not in msg
    assert _count(wh, "llm_cache") == 2
    calls = wh.read_table("llm_calls")
    assert (calls["status_code"] == 200).sum() == 2 and calls["status_code"].isna().sum() == 3  # 1 try + 2 retries
    healthy = FakeServers()
    results, stats = healthy.client(model="m", max_in_flight=1).run_batch(wh, _reqs(5))
    assert stats.cache_hits == 2 and stats.requests_sent == 3
    assert sorted(healthy.chat_hosts) == ["a"] * 3
    assert not any(r.error for r in results)


def test_progress_is_logged(wh, caplog) -> None:
    fake = FakeServers()
    with caplog.at_level(logging.INFO, logger="evalmislead_assets.llm.client"):
        fake.client().run_batch(wh, _reqs(3))
    lines = [r.getMessage() for r in caplog.records]
    assert any("3/3 answers done" in ln and "tok/s" in ln and "ETA" in ln for ln in lines)


# ---- resource configuration ----


def test_resource_url_resolution(monkeypatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_LLM_URL", "http://env:1, http://env:2/")
    assert LLMResource().configured_urls() == ["http://env:1", "http://env:2"]
    assert LLMResource(urls="http://mine:3").configured_urls() == ["http://mine:3"]
    monkeypatch.delenv("EVALMISLEAD_LLM_URL")
    assert LLMResource().configured_urls() == []
    # no URL: the embedded server, named without starting it
    assert LLMResource().client().model == "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"


# ---- determinism settings ----


def test_every_request_turns_the_prompt_cache_off(wh) -> None:
    fake = FakeServers()
    fake.client().run_batch(wh, _reqs(3))
    assert len(fake.bodies) == 3
    assert all(json.loads(b)["cache_prompt"] is False for b in fake.bodies)


def test_answers_record_slots_build_and_cache_prompt_fresh_and_cached(wh) -> None:
    fake = FakeServers()
    fake.props_extra = {"total_slots": 4, "build_info": "b6000-deadbeef"}
    fresh, _ = fake.client().run_batch(wh, _reqs(2))
    assert [(r.total_slots, r.cache_prompt, r.build_info) for r in fresh] == [(4, False, "b6000-deadbeef")] * 2
    cached, stats = fake.client().run_batch(wh, _reqs(2))
    assert stats.cache_hits == 2
    assert [(r.total_slots, r.cache_prompt, r.build_info) for r in cached] == [(4, False, "b6000-deadbeef")] * 2


def test_server_without_build_info_records_none(wh) -> None:
    (r,), _ = FakeServers().client().run_batch(wh, _reqs(1))
    assert (r.total_slots, r.cache_prompt, r.build_info) == (2, False, None)


def test_bypass_cache_sends_again_and_leaves_the_cached_answer(wh) -> None:
    fake = FakeServers()
    first, _ = fake.client().run_batch(wh, _reqs(2))
    cache_before = wh.read_table("llm_cache", order_by="cache_key")
    fake.message = {"role": "assistant", "content": "a different answer"}
    again, stats = fake.client().run_batch(wh, _reqs(2), bypass_cache=True)
    assert stats.cache_hits == 0 and stats.requests_sent == 2 and len(fake.bodies) == 4
    assert [r.text for r in again] == ["a different answer"] * 2 and not any(r.from_cache for r in again)
    assert [r.cache_key for r in again] == [r.cache_key for r in first]  # same body, same key
    assert _count(wh, "llm_calls") == 4  # the re-sent requests are real requests
    cache_after = wh.read_table("llm_cache", order_by="cache_key")
    assert cache_after[["cache_key", "response_json"]].equals(cache_before[["cache_key", "response_json"]])
    # a normal run still gets the original answers from the cache
    normal, s3 = fake.client().run_batch(wh, _reqs(2))
    assert s3.cache_hits == 2 and [r.text for r in normal] == [r.text for r in first]


def test_bypass_on_an_uncached_request_stores_nothing(wh) -> None:
    fake = FakeServers()
    _, stats = fake.client().run_batch(wh, _reqs(1), bypass_cache=True)
    assert stats.requests_sent == 1 and _count(wh, "llm_cache") == 0 and _count(wh, "llm_calls") == 1


def test_raw_body_is_sent_verbatim(wh) -> None:
    old_style = canonical_json({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0,
                                "seed": 1, "max_tokens": 8, "chat_template_kwargs": {"enable_thinking": False}})
    req = _reqs(1)[0]
    req.raw_body = old_style
    fake = FakeServers()
    (r,), _ = fake.client(model="ignored").run_batch(wh, [req])
    assert fake.bodies == [old_style.encode("utf-8")]
    assert r.request_json == old_style and r.cache_key == sha256_text(old_style)
    assert r.cache_prompt is True  # no field: llama-server's default (prompt cache on)
