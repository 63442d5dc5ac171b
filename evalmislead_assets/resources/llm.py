"""The `llm` resource: OpenAI-compatible llama-server client (see llm_client.ChatClient)."""

# No `from __future__ import annotations`: Dagster reads the nested-resource annotation at
# class creation, and a string there would not accept a configure_at_launch() resource.
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import httpx
from dagster import ConfigurableResource

from evalmislead_assets import settings, study_models
from evalmislead_assets.llm import embedded_model
from evalmislead_assets.llm import llama_server as server
from evalmislead_assets.llm.client import ChatClient
from evalmislead_assets.llm.types import BatchStats, ChatRequest, ChatResult
from evalmislead_assets.resources.embedded_server import EmbeddedServerResource, default_alias, default_model
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.study.models import ModelSpec, Reach


class LLMResource(ConfigurableResource):
    """OpenAI-compatible llama-server client: cache, retries, concurrency across servers."""

    urls: str = ""  # comma-separated; empty -> EVALMISLEAD_LLM_URL -> else the embedded server
    # where `urls` was set, for messages (definitions: EVALMISLEAD_JUDGE_URL for the judge)
    urls_origin: str = "the urls of this LLM resource (launchpad resources config)"
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

    def client(self, transport: httpx.BaseTransport | None = None, model: Optional[ModelSpec] = None) -> ChatClient:
        """A client for one of the study's models (default: its first): this resource's urls, else the
        model's (study.toml), else EVALMISLEAD_LLM_URL (a one-model study only), else the embedded server
        with the model's GGUF (bundled, its gguf file, or EVALMISLEAD_EMBEDDED_MODEL)."""
        spec = model or study_models.study().models[0]
        # this resource's own urls (e.g. the judge's EVALMISLEAD_JUDGE_URL), else the model's, else EVALMISLEAD_LLM_URL
        own = tuple(u.strip().rstrip("/") for u in self.urls.split(",") if u.strip())
        reach = Reach(own, self.urls_origin) if own else study_models.reach(spec)
        urls = list(reach.urls)
        alias = self.model
        in_flight = spec.slots or self.max_in_flight
        died: Optional[Callable[[], list[str]]] = None
        if urls:
            url_source: list[str] | Callable[[Any], list[str]] = urls
            alias = alias or spec.api_model  # a hosted endpoint's model id (else the server's /props names it)
        else:
            alias = alias or _alias(spec)  # known without the file, so a fully cached run needs none
            # Each slot holds a prompt plus the largest configured output cap.
            ctx = max(server.DEFAULT_CTX_PER_SLOT,
                      max(spec.max_tokens(t) or settings.max_tokens(t) for t in ("off", "on")) + server.PROMPT_ALLOWANCE)
            embedded = self.embedded_server
            # Started only when a request misses the cache, so a fully cached run needs no server.
            url_source = lambda log: [  # noqa: E731
                embedded.url(parallel=in_flight, ctx_per_slot=ctx, log=log.info if log else None, model=_gguf(spec))]
            died = embedded.death_notes  # a server that died mid-batch is named, and restarted once
        return ChatClient(
            url_source, model=alias, max_in_flight=in_flight, timeout_s=self.timeout_s,
            retries=self.retries, seed=self.seed, backoff_s=self.backoff_s, transport=transport,
            deadline_s=self.deadline_s or settings.llm_deadline_s(), progress_every_s=self.progress_every_s,
            template_kwargs=spec.chat_template_kwargs, thinking_off=spec.thinking_off, unreachable_hint=reach.fix_hint(),
            cache_only=settings.replay_only(), headers=_headers(spec), died=died, api=spec.api,
        )

    def run_batch_with_stats(
        self, warehouse: Warehouse, requests: list[ChatRequest], log: Any = None, bypass_cache: bool = False,
        model: Optional[ModelSpec] = None,
    ) -> tuple[list[ChatResult], BatchStats]:
        return self.client(model=model).run_batch(warehouse, requests, log, bypass_cache=bypass_cache)

    def run_batch(
        self, warehouse: Warehouse, requests: list[ChatRequest], log: Any = None, model: Optional[ModelSpec] = None
    ) -> list[ChatResult]:
        return self.client(model=model).run_batch(warehouse, requests, log)[0]


def _headers(spec: ModelSpec) -> dict[str, str]:
    """The model's extra headers and, with api_key_env, its bearer token (read from the environment now)."""
    headers = dict(spec.headers)
    if spec.api_key_env:
        headers["Authorization"] = f"Bearer {settings.secret(spec.api_key_env, f'model {spec.name} (api_key_env)')}"
    return headers


def _alias(spec: ModelSpec) -> str:
    if settings.embedded_model_override() or not (spec.bundled or spec.gguf):
        return default_alias()
    if spec.gguf:
        return server.alias_for(Path(spec.gguf).expanduser())
    return embedded_model.bundled(spec.bundled).alias


def _gguf(spec: ModelSpec) -> server.GGUF:
    """The file the embedded server loads for ``spec`` (one line naming the fix when it is missing)."""
    if settings.embedded_model_override() or not (spec.bundled or spec.gguf):
        return default_model()  # EVALMISLEAD_EMBEDDED_MODEL (a one-model study), else the bundled default
    if spec.gguf:
        path = Path(spec.gguf).expanduser()
        if not path.is_file():
            raise server.ServerError(f"model file {path} (model {spec.name} in the study file) is missing; "
                                     "point its gguf at a GGUF file")
        return server.GGUF(path, server.alias_for(path))
    try:
        bundled = embedded_model.bundled(spec.bundled)
    except embedded_model.ModelError as exc:
        raise server.ServerError(str(exc)) from None
    return server.bundled_gguf(settings.cache_dir(), bundled)
