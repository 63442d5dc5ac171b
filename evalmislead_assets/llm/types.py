"""What the `llm` client sends and gets back: requests, answers, batch statistics, the exact
request body (hashed into the cache key) and the parsing of a chat-completions response."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalmislead_assets.llm.errors import usage_int
from evalmislead_assets.llm.reasoning import split_leading_think


@dataclass
class ChatRequest:
    asset: str
    condition: str | None
    thinking: str
    task_id: str  # provenance for llm_calls
    messages: list[dict]
    max_tokens: int
    enable_thinking: bool
    extra: dict = field(default_factory=dict)  # merged into the body (e.g. {"grammar": ...})
    # A stored request body (canonical JSON) sent verbatim instead of one built from the
    # fields above; the determinism probe re-sends stored requests this way.
    raw_body: str | None = None


@dataclass
class ChatResult:
    request_json: str
    cache_key: str
    text: str
    reasoning: str | None
    reasoning_present: bool
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None
    server_url: str | None
    server_props_sha256: str | None
    model: str | None
    from_cache: bool
    error: str | None
    # Server settings that affect determinism (llama.cpp issue #7052, PR #6950): the answering
    # server's slot count and build (/props), and whether the request allowed the prompt cache.
    total_slots: int | None = None
    cache_prompt: bool | None = None
    build_info: str | None = None


@dataclass
class BatchStats:
    total: int = 0
    cache_hits: int = 0
    requests_sent: int = 0  # HTTP requests, retries included (= llm_calls rows added)
    answered: int = 0  # fresh answers received
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.wall_s if self.wall_s > 0 else 0.0


class LLMUnreachable(RuntimeError):
    """No server answered after the retries; the message is one line naming the URL(s)."""


class LLMFailing(LLMUnreachable):
    """Servers answer, but only with errors: the batch stopped early; the message is one line with the count."""


class NotRecorded(LLMUnreachable):
    """A replay (cache only) met a request with no stored answer: nothing was sent; one line naming it."""


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def response_json(payload: Any) -> str:
    """An answer as stored in llm_cache: canonical JSON; text that UTF-8 cannot hold (a lone
    surrogate such as "\\ud800") is kept as its JSON escape, which reads back to the same string."""
    text = canonical_json(payload)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return text


API_FLAVOURS = ("llama.cpp", "openai")

# The "prefill" mechanism's last message. llama-server continues a final assistant message instead of opening a
# new turn, and with a reasoning template it closes the template's open think block before the prefill, so the
# model starts in the answer with an empty reasoning. The content must not be empty (an empty final assistant
# message is dropped with the generation prompt); a newline changes no answer's meaning.
PREFILL_MESSAGE: dict[str, str] = {"role": "assistant", "content": "\n", "reasoning_content": ""}
# The "budget0" mechanism's field: llama-server's per-request reasoning budget, 0 = end the reasoning at once.
BUDGET_FIELD = "thinking_budget_tokens"


def thinking_off_fields(thinking_off: str, messages: list[dict]) -> dict[str, Any]:
    """What a thinking-off body carries beyond the template flag under ``thinking_off`` (study.models.THINKING_OFF):
    nothing for "template" (the body, and so every cache key, as without the setting), the messages with the
    assistant prefill for "prefill", the zero reasoning budget for "budget0"."""
    if thinking_off == "prefill":
        return {"messages": [*messages, dict(PREFILL_MESSAGE)]}
    if thinking_off == "budget0":
        return {BUDGET_FIELD: 0}
    if thinking_off != "template":
        raise ValueError(f"thinking_off = {thinking_off!r} is not one of template, prefill, budget0")
    return {}


def build_body(
    req: ChatRequest, model: str, seed: int, template_kwargs: Mapping[str, Any] | None = None, api: str = "llama.cpp",
    thinking_off: str = "template",
) -> dict[str, Any]:
    """The request body; ``template_kwargs``: the model's own chat-template arguments (study.toml),
    under the thinking flag (an empty set leaves the body, and so the cache key, as before).
    ``api = "openai"`` (a hosted endpoint): only the OpenAI chat fields, without llama-server's own
    (``chat_template_kwargs`` with the thinking flag, ``cache_prompt``), which such endpoints refuse.
    ``thinking_off``: how a thinking-off request switches thinking off (thinking_off_fields); a thinking-on
    request is the same under every mechanism."""
    body: dict[str, Any] = {
        "model": model,
        "messages": req.messages,
        "temperature": 0,
        "seed": seed,
        "max_tokens": req.max_tokens,
        "chat_template_kwargs": {**(template_kwargs or {}), "enable_thinking": bool(req.enable_thinking)},
        # The study setting: no prompt reuse. llama-server's prompt cache can change a
        # temperature-0 answer; it defaults to on, so it is switched off in every body.
        "cache_prompt": False,
    }
    if not req.enable_thinking:
        body.update(thinking_off_fields(thinking_off, req.messages))
    if api == "openai":
        del body["chat_template_kwargs"], body["cache_prompt"]
    body.update(req.extra)
    return body


def request_body(req: ChatRequest, model: str, seed: int, template_kwargs: Mapping[str, Any] | None = None,
                 api: str = "llama.cpp", thinking_off: str = "template") -> str:
    """The exact JSON sent (and hashed into the cache key): the stored body if given, else the built one."""
    if req.raw_body is not None:
        return req.raw_body
    return canonical_json(build_body(req, model, seed, template_kwargs, api, thinking_off))


def server_settings(props: dict[str, Any] | None, request_json: str) -> tuple[int | None, bool | None, str | None]:
    """(total_slots, cache_prompt, build_info) of one answer.

    ``cache_prompt`` is what the request asked for; a body without the field got
    llama-server's default, which is on. Slots and build come from the answering server's
    /props (None when unknown, e.g. a server without these fields).
    """
    props = props or {}
    slots = props.get("total_slots")
    build = props.get("build_info")
    try:
        asked = json.loads(request_json).get("cache_prompt", True)
    except ValueError:
        asked = None
    return (
        int(slots) if isinstance(slots, (int, float)) and not isinstance(slots, bool) else None,
        None if asked is None else bool(asked),
        str(build) if build not in (None, "") else None,
    )


def split_reasoning(message: dict[str, Any]) -> tuple[str, str | None]:
    """(answer text, reasoning): `reasoning_content` when the server separated it, else inline <think>…</think>."""
    content = message.get("content") or ""
    reasoning = message.get("reasoning_content")
    if reasoning:
        return content, reasoning
    return split_leading_think(content)


def result_from_response(
    request_json: str, key: str, response: dict[str, Any], *, latency_s: float | None, server_url: str | None,
    props_sha: str | None, from_cache: bool, props: dict[str, Any] | None = None,
) -> ChatResult:
    choice = (response.get("choices") or [{}])[0]  # a checked answer (llm_errors.malformed)
    text, reasoning = split_reasoning(choice.get("message") or {})
    usage = response.get("usage") or {}
    finish = choice.get("finish_reason")
    slots, cache_prompt, build = server_settings(props, request_json)
    return ChatResult(
        request_json=request_json, cache_key=key, text=text, reasoning=reasoning,
        reasoning_present=bool(reasoning and reasoning.strip()),
        finish_reason=None if finish is None else str(finish),
        prompt_tokens=usage_int(usage, "prompt_tokens"), completion_tokens=usage_int(usage, "completion_tokens"),
        latency_s=latency_s, server_url=server_url, server_props_sha256=props_sha,
        model=json.loads(request_json).get("model"), from_cache=from_cache, error=None,
        total_slots=slots, cache_prompt=cache_prompt, build_info=build,
    )


class ServedModelChanged(LLMUnreachable):
    """The server now serves another model than the stored answers under the same model name came from:
    nothing was sent; one line naming both."""
