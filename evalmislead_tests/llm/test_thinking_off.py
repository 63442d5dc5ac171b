"""How a thinking-off request switches thinking off (study.toml ``thinking_off``): the body and cache key of each
mechanism, and what a real llama-server renders from them under an R1-style chat template (which never reads
enable_thinking)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from evalmislead_assets.llm.llama_server import EmbeddedServer, smollm2_model
from evalmislead_assets.llm.types import (
    BUDGET_FIELD,
    PREFILL_MESSAGE,
    ChatRequest,
    build_body,
    request_body,
    result_from_response,
)
from evalmislead_assets.store.hashing import sha256_text
from evalmislead_assets.study.models import THINKING_OFF

R1_STYLE_TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "r1_style_chat_template.jinja"
QWEN_STYLE_TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "qwen3_style_chat_template.jinja"
PROMPT = [{"role": "user", "content": "Write one pytest test for add(a, b)."}]


def _req(thinking: str = "off", max_tokens: int = 8) -> ChatRequest:
    return ChatRequest(asset="test_generations", condition="buggy_code", thinking=thinking, task_id="Python/0",
                       messages=[dict(m) for m in PROMPT], max_tokens=max_tokens, enable_thinking=thinking == "on")


def test_template_is_the_body_without_the_setting() -> None:
    """The default adds nothing: every stored body, and so every cache key, stays as recorded."""
    assert build_body(_req(), "m", 1234, thinking_off="template") == build_body(_req(), "m", 1234)
    assert request_body(_req(), "m", 1234, thinking_off="template") == request_body(_req(), "m", 1234)
    body = build_body(_req(), "m", 1234)
    assert body["messages"] == PROMPT and body["chat_template_kwargs"] == {"enable_thinking": False}
    assert BUDGET_FIELD not in body


def test_prefill_ends_the_messages_with_the_assistant_prefill() -> None:
    body = build_body(_req(), "m", 1234, thinking_off="prefill")
    assert body["messages"] == [*PROMPT, PREFILL_MESSAGE]
    assert PREFILL_MESSAGE["role"] == "assistant" and PREFILL_MESSAGE["content"] and PREFILL_MESSAGE[
        "reasoning_content"] == ""
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and BUDGET_FIELD not in body
    req = _req()
    build_body(req, "m", 1234, thinking_off="prefill")
    assert req.messages == PROMPT  # the request itself is left as it is


def test_budget0_asks_for_a_zero_reasoning_budget() -> None:
    body = build_body(_req(), "m", 1234, thinking_off="budget0")
    assert body[BUDGET_FIELD] == 0 and body["messages"] == PROMPT
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_each_mechanism_has_its_own_cache_keys_and_thinking_on_is_the_same_under_all() -> None:
    off = {m: sha256_text(request_body(_req(), "m", 1234, thinking_off=m)) for m in THINKING_OFF}
    assert len(set(off.values())) == len(THINKING_OFF)
    on = {sha256_text(request_body(_req("on"), "m", 1234, thinking_off=m)) for m in THINKING_OFF}
    assert len(on) == 1


def test_a_hosted_endpoint_gets_the_prefill_but_no_llama_server_field() -> None:
    body = build_body(_req(), "m", 1234, api="openai", thinking_off="prefill")
    assert body["messages"][-1] == PREFILL_MESSAGE and "chat_template_kwargs" not in body


def test_an_unknown_mechanism_is_refused() -> None:
    with pytest.raises(ValueError, match="not one of template, prefill, budget0"):
        build_body(_req(), "m", 1234, thinking_off="off")


def _server(tmp_path_factory: pytest.TempPathFactory, template: Path) -> Iterator[str]:
    """A real llama-server (the 135M SmolLM2, one slot, one thread) with ``template`` as its chat template."""
    log = tmp_path_factory.mktemp("template-server") / "server.log"
    server = EmbeddedServer(parallel=1, ctx_per_slot=1024, threads=1, log_path=log, model=smollm2_model(),
                            extra_args=["--chat-template-file", str(template)]).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def r1_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _server(tmp_path_factory, R1_STYLE_TEMPLATE)


@pytest.fixture
def qwen_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _server(tmp_path_factory, QWEN_STYLE_TEMPLATE)


def _post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}{path}", json=body, timeout=120.0)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _rendered(url: str, thinking: str, mechanism: str) -> str:
    """The prompt the server would give the model for the body (its /apply-template endpoint)."""
    return str(_post(url, "/apply-template", build_body(_req(thinking), "m", 1234, thinking_off=mechanism))["prompt"])


def test_the_server_renders_the_prefill_where_the_template_flag_changes_nothing(r1_server: str) -> None:
    """Under an R1-style template the template mechanism's off prompt is the on prompt byte for byte, its think
    block left open; the prefill's prompt differs, closes the think block and ends with the prefill."""
    template_off, template_on = _rendered(r1_server, "off", "template"), _rendered(r1_server, "on", "template")
    prefill_off = _rendered(r1_server, "off", "prefill")
    assert template_off == template_on and template_off.endswith("<think>\n")
    assert prefill_off != template_off and prefill_off.endswith(PREFILL_MESSAGE["content"])
    assert "</think>" in prefill_off.rsplit("<think>", 1)[1]
    assert PROMPT[0]["content"] in prefill_off


@pytest.mark.slow
def test_the_prefill_answer_carries_no_reasoning_where_the_template_ones_does(r1_server: str) -> None:
    """What the thinking_mode_respected check reads: the template mechanism's off answer comes back as reasoning
    (the check would fail), the prefill's as the answer."""
    def answer(mechanism: str) -> Any:
        body = request_body(_req(max_tokens=8), "m", 1234, thinking_off=mechanism)
        payload = _post(r1_server, "/v1/chat/completions", json.loads(body))
        return result_from_response(body, sha256_text(body), payload, latency_s=None, server_url=r1_server,
                                    props_sha=None, from_cache=False)

    template, prefill = answer("template"), answer("prefill")
    assert template.reasoning_present and not template.text.strip()
    assert not prefill.reasoning_present and prefill.text.strip()


def test_a_qwen3_style_template_closes_the_think_block_from_the_flag_alone(qwen_server: str) -> None:
    """Where the template reads enable_thinking, "template" is enough: its off prompt differs from the on prompt by
    an empty, closed think block (the prefill only adds its newline after it)."""
    template_off, template_on = _rendered(qwen_server, "off", "template"), _rendered(qwen_server, "on", "template")
    assert template_off != template_on and template_off.endswith("<think>\n\n</think>\n\n")
    assert "<think>" not in template_on
    assert _rendered(qwen_server, "off", "prefill") == template_off + PREFILL_MESSAGE["content"]
