"""The `llm` resource: OpenAI-compatible llama-server client (see llm_client.ChatClient)."""

# No `from __future__ import annotations`: Dagster reads the nested-resource annotation at
# class creation, and a string there would not accept a configure_at_launch() resource.
from collections.abc import Callable
from typing import Any, Optional

import httpx
from dagster import ConfigurableResource

from evalmislead_assets import settings
from evalmislead_assets.llm import llama_server as server
from evalmislead_assets.llm.client import ChatClient
from evalmislead_assets.llm.types import BatchStats, ChatRequest, ChatResult
from evalmislead_assets.resources.embedded_server import EmbeddedServerResource
from evalmislead_assets.store.database import Warehouse


class LLMResource(ConfigurableResource):
    """OpenAI-compatible llama-server client: cache, retries, concurrency across servers."""

    urls: str = ""  # comma-separated; empty -> EVALMISLEAD_LLM_URL -> else the embedded server
    max_in_flight: int = 2  # requests at once over all servers (= the servers' slots in total)
    # longest silence while waiting for an answer's bytes (llama-server sends a whole answer at
    # once, so this bounds one generation: a 16k-token answer on a busy server takes minutes)
    timeout_s: float = 1800.0
    # longest one request may take, retries included; None: EVALMISLEAD_LLM_DEADLINE_S (3600 s)
    deadline_s: Optional[float] = None
    progress_every_s: float = 30.0  # a progress line at least this often while requests are in flight
    retries: int = 4
    seed: int = 1234
    model: str = ""  # empty: the server's /props model alias (the embedded one's alias)
    backoff_s: float = 1.0
    # Asked for a URL only when no URL is configured and a request misses the cache. Definitions
    # share one (configure_at_launch) between `llm` and `judge_llm`; left out, each resource has its own.
    embedded_server: EmbeddedServerResource

    def __init__(self, **data: Any) -> None:
        if data.get("embedded_server") is None:
            data["embedded_server"] = EmbeddedServerResource()
        super().__init__(**data)

    def configured_urls(self) -> list[str]:
        return [u.strip().rstrip("/") for u in self.urls.split(",") if u.strip()] or settings.llm_urls()

    def client(self, transport: httpx.BaseTransport | None = None) -> ChatClient:
        urls = self.configured_urls()
        model = self.model
        if urls:
            url_source: list[str] | Callable[[Any], list[str]] = urls
        else:
            model = model or server.default_alias()
            # Each slot holds a prompt plus the largest configured output cap.
            ctx = max(server.DEFAULT_CTX_PER_SLOT,
                      max(settings.max_tokens(t) for t in ("off", "on")) + server.PROMPT_ALLOWANCE)
            embedded = self.embedded_server
            # Started only when a request misses the cache, so a fully cached run needs no server.
            url_source = lambda log: [  # noqa: E731
                embedded.url(parallel=self.max_in_flight, ctx_per_slot=ctx, log=log.info if log else None)]
        return ChatClient(
            url_source, model=model, max_in_flight=self.max_in_flight, timeout_s=self.timeout_s,
            retries=self.retries, seed=self.seed, backoff_s=self.backoff_s, transport=transport,
            deadline_s=self.deadline_s or settings.llm_deadline_s(), progress_every_s=self.progress_every_s,
        )

    def run_batch_with_stats(
        self, warehouse: Warehouse, requests: list[ChatRequest], log: Any = None, bypass_cache: bool = False
    ) -> tuple[list[ChatResult], BatchStats]:
        return self.client().run_batch(warehouse, requests, log, bypass_cache=bypass_cache)

    def run_batch(self, warehouse: Warehouse, requests: list[ChatRequest], log: Any = None) -> list[ChatResult]:
        return self.client().run_batch(warehouse, requests, log)[0]
