"""The `llm` resource: OpenAI-compatible chat completions over httpx, with a response cache,
one `llm_calls` row per HTTP request, retries, and concurrency across one or more servers.

Nothing is generated twice: the cache key is the sha256 of the exact request body, and
every answer is committed to DuckDB the moment it arrives, so a killed run loses nothing
and a re-run sends requests only for what is missing.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx
from dagster import ConfigurableResource

from evalmislead_assets.hashing import sha256_text
from evalmislead_assets import settings
from evalmislead_assets.storage import Warehouse

_log = logging.getLogger(__name__)
# /props fields that change on every server start without changing any answer.
_VOLATILE_PROPS = ("media_marker", "is_sleeping")
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


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


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def build_body(req: ChatRequest, model: str, seed: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": req.messages,
        "temperature": 0,
        "seed": seed,
        "max_tokens": req.max_tokens,
        "chat_template_kwargs": {"enable_thinking": bool(req.enable_thinking)},
        # The study setting: no prompt reuse. llama-server's prompt cache can change a
        # temperature-0 answer; it defaults to on, so it is switched off in every body.
        "cache_prompt": False,
    }
    body.update(req.extra)
    return body


def request_body(req: ChatRequest, model: str, seed: int) -> str:
    """The exact JSON sent (and hashed into the cache key): the stored body if given, else the built one."""
    return req.raw_body if req.raw_body is not None else canonical_json(build_body(req, model, seed))


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
    start = content.find(_THINK_OPEN)
    if start == -1 or content[:start].strip():
        return content, None
    rest = content[start + len(_THINK_OPEN):]
    end = rest.find(_THINK_CLOSE)
    if end == -1:  # cut off while thinking: all of it is reasoning
        return "", rest
    return rest[end + len(_THINK_CLOSE):].lstrip("\n"), rest[:end]


def result_from_response(
    request_json: str, key: str, response: dict[str, Any], *, latency_s: float | None, server_url: str | None,
    props_sha: str | None, from_cache: bool, props: dict[str, Any] | None = None,
) -> ChatResult:
    choice = (response.get("choices") or [{}])[0]
    text, reasoning = split_reasoning(choice.get("message") or {})
    usage = response.get("usage") or {}
    slots, cache_prompt, build = server_settings(props, request_json)
    return ChatResult(
        request_json=request_json, cache_key=key, text=text, reasoning=reasoning,
        reasoning_present=bool(reasoning and reasoning.strip()), finish_reason=choice.get("finish_reason"),
        prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"),
        latency_s=latency_s, server_url=server_url, server_props_sha256=props_sha,
        model=json.loads(request_json).get("model"), from_cache=from_cache, error=None,
        total_slots=slots, cache_prompt=cache_prompt, build_info=build,
    )


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass
class _Server:
    url: str
    props_sha: str | None = None
    props: dict[str, Any] = field(default_factory=dict)
    in_flight: int = 0
    failures: int = 0  # consecutive transport failures; 0 after any answer
    last_error: str = ""


@dataclass
class _Job:
    key: str
    request_json: str
    request: ChatRequest  # the first request with this key (provenance of the llm_calls rows)


class ChatClient:
    """The engine behind LLMResource; `transport` lets tests swap the network for httpx.MockTransport."""

    def __init__(
        self,
        urls: list[str] | Callable[[], list[str]],
        model: str = "",
        max_in_flight: int = 2,
        timeout_s: float = 1800.0,
        retries: int = 4,
        seed: int = 1234,
        backoff_s: float = 1.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._urls = urls
        self.model = model
        self.max_in_flight = max(1, max_in_flight)
        self.timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
        self.retries = max(0, retries)
        self.seed = seed
        self.backoff_s = backoff_s
        self.transport = transport
        self._db_lock = threading.Lock()

    # ---- servers ----

    def _resolve_urls(self) -> list[str]:
        urls = self._urls() if callable(self._urls) else list(self._urls)
        if not urls:
            raise LLMUnreachable("no LLM server URL configured")
        return [u.rstrip("/") for u in urls]

    def _http(self) -> httpx.Client:
        return httpx.Client(timeout=self.timeout, transport=self.transport)

    def _get_props(self, http: httpx.Client, url: str) -> dict[str, Any]:
        last = ""
        for attempt in range(self.retries + 1):
            try:
                r = http.get(f"{url}/props", timeout=30.0)
                if r.status_code == 200:
                    return r.json()
                last = f"HTTP {r.status_code} on /props"
                if r.status_code < 500:
                    return {}
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if attempt < self.retries:
                time.sleep(self.backoff_s * 2**attempt)
        raise LLMUnreachable(
            f"LLM server unreachable at {url} after {self.retries + 1} attempts ({_one_line(last, 160)}); "
            "start it or fix EVALMISLEAD_LLM_URL"
        )

    def record_props(self, warehouse: Warehouse, http: httpx.Client, url: str) -> tuple[str, dict[str, Any]]:
        props = self._get_props(http, url)
        stable = {k: v for k, v in props.items() if k not in _VOLATILE_PROPS}
        props_json = canonical_json(stable)
        sha = sha256_text(props_json)
        with self._db_lock, warehouse.connect() as con:
            con.execute(
                "INSERT OR IGNORE INTO server_props (server_props_sha256, server_url, model, props_json, first_seen) "
                "VALUES (?, ?, ?, ?, ?)",
                [sha, url, props.get("model_alias") or props.get("model_path"), props_json, _now()],
            )
        return sha, props

    def _probe(
        self, warehouse: Warehouse, http: httpx.Client, urls: list[str], log: Any
    ) -> dict[str, tuple[str, dict[str, Any]]]:
        """/props of every server (recorded in server_props); unreachable ones are left out, all unreachable raises."""
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        failed: list[str] = []
        for url in urls:
            try:
                found[url] = self.record_props(warehouse, http, url)
            except LLMUnreachable as exc:
                failed.append(str(exc))
        if not found:
            raise LLMUnreachable(failed[0] if len(failed) == 1 else (
                f"no LLM server reachable at {', '.join(urls)}; start them or fix EVALMISLEAD_LLM_URL"
            ))
        for msg in failed:
            log.warning(f"{msg}; continuing with {', '.join(found)}")
        return found

    def model_name(self, props: dict[str, Any] | None = None) -> str:
        if self.model:
            return self.model
        alias = str((props or {}).get("model_alias") or (props or {}).get("model_path") or "default")
        return alias.rsplit("/", 1)[-1] if alias.endswith(".gguf") else alias

    # ---- cache ----

    def _cached(self, warehouse: Warehouse, keys: list[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        unique = sorted(set(keys))
        for i in range(0, len(unique), 500):
            chunk = unique[i:i + 500]
            with self._db_lock, warehouse.connect() as con:
                rows = con.execute(
                    "SELECT c.cache_key, c.response_json, c.server_url, c.server_props_sha256, c.latency_s, "
                    "p.props_json FROM llm_cache c LEFT JOIN server_props p USING (server_props_sha256) "
                    "WHERE c.cache_key = ANY(?)", [chunk],
                ).fetchall()
            for key, resp, url, sha, lat, props_json in rows:
                out[key] = {"response": json.loads(resp), "server_url": url, "props_sha": sha, "latency_s": lat,
                            "props": json.loads(props_json) if props_json else {}}
        return out

    def _record_call(
        self, warehouse: Warehouse, job: _Job, server: _Server, status: int | None, latency: float,
        usage: dict[str, Any], error: str | None, response_json: str | None, store: bool = True,
    ) -> None:
        """One llm_calls row, plus the llm_cache row of a good answer (unless ``store`` is off), in one transaction."""
        req = job.request
        with self._db_lock, warehouse.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(
                    "INSERT INTO llm_calls (call_id, ts, asset, condition, thinking, task_id, server_url, cache_key, "
                    "status_code, latency_s, prompt_tokens, completion_tokens, error) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [uuid.uuid4().hex, _now(), req.asset, req.condition, req.thinking, req.task_id, server.url,
                     job.key, status, latency, usage.get("prompt_tokens"), usage.get("completion_tokens"), error],
                )
                if response_json is not None and store:
                    con.execute(
                        "INSERT OR IGNORE INTO llm_cache (cache_key, request_json, response_json, server_url, "
                        "server_props_sha256, latency_s, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [job.key, job.request_json, response_json, server.url, server.props_sha, latency, _now()],
                    )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    # ---- the batch ----

    def run_batch(
        self, warehouse: Warehouse, requests: list[ChatRequest], log: Any = None, bypass_cache: bool = False
    ) -> tuple[list[ChatResult], BatchStats]:
        """Answers in request order. ``bypass_cache``: send every request even when an answer is
        stored, and leave llm_cache as it is (the llm_calls rows are still written)."""
        log = log or _log
        start = time.monotonic()
        stats = BatchStats(total=len(requests))
        if not requests:
            return [], stats
        label = f"{requests[0].asset}[{requests[0].condition or '-'}|{requests[0].thinking}]"

        props_by_url: dict[str, tuple[str, dict[str, Any]]] = {}
        http = self._http()
        try:
            # The model name is part of every body (and so of every cache key). It is known
            # without a server when configured (or for the embedded server); otherwise the
            # servers' /props name it.
            if not self.model:
                props_by_url = self._probe(warehouse, http, self._resolve_urls(), log)
            model = self.model_name(next(iter(props_by_url.values()))[1] if props_by_url else None)

            bodies = [request_body(r, model, self.seed) for r in requests]
            keys = [sha256_text(b) for b in bodies]
            cached = {} if bypass_cache else self._cached(warehouse, keys)
            results: dict[str, ChatResult] = {}
            for key, body in zip(keys, bodies):
                if key in cached and key not in results:
                    c = cached[key]
                    results[key] = result_from_response(
                        body, key, c["response"], latency_s=c["latency_s"], server_url=c["server_url"],
                        props_sha=c["props_sha"], from_cache=True, props=c["props"],
                    )
            stats.cache_hits = sum(1 for k in keys if k in cached)
            jobs: dict[str, _Job] = {}
            for key, body, req in zip(keys, bodies, requests):
                if key not in results and key not in jobs:
                    jobs[key] = _Job(key, body, req)
            if jobs:
                log.info(f"{label}: {len(requests)} requests, {stats.cache_hits} from the cache, sending {len(jobs)}")
                props_by_url = props_by_url or self._probe(warehouse, http, self._resolve_urls(), log)
                servers = [_Server(u, sha, props) for u, (sha, props) in props_by_url.items()]
                self._send_all(warehouse, http, servers, list(jobs.values()), results, stats, log, label, start,
                               store=not bypass_cache)
        finally:
            http.close()

        out = [results[key] for key in keys]
        stats.errors = sum(1 for r in out if r.error)
        stats.prompt_tokens = sum(r.prompt_tokens or 0 for r in out)
        stats.completion_tokens = sum(r.completion_tokens or 0 for r in out if not r.from_cache)
        stats.wall_s = time.monotonic() - start
        log.info(
            f"{label}: done {len(out)}/{len(out)} ({stats.cache_hits} cached, {stats.requests_sent} requests sent, "
            f"{stats.errors} errors), {stats.completion_tokens} new tokens in {stats.wall_s:.1f} s "
            f"= {stats.tokens_per_s:.1f} tok/s"
        )
        return out, stats

    def _send_all(
        self, warehouse: Warehouse, http: httpx.Client, servers: list[_Server], jobs: list[_Job],
        results: dict[str, ChatResult], stats: BatchStats, log: Any, label: str, start: float, store: bool = True,
    ) -> None:
        lock = threading.Lock()
        abort = threading.Event()
        abort_reason: list[str] = []
        progress = {"done": stats.cache_hits, "tokens": 0, "last_log": time.monotonic()}
        total = stats.total

        def pick() -> _Server:
            with lock:
                healthy = [s for s in servers if s.failures == 0] or servers
                server = min(healthy, key=lambda s: (s.in_flight, s.failures))
                server.in_flight += 1
                return server

        def finished(job: _Job, result: ChatResult) -> None:
            with lock:
                results[job.key] = result
                progress["done"] += 1
                progress["tokens"] += result.completion_tokens or 0
                now = time.monotonic()
                if now - progress["last_log"] >= 5.0 or progress["done"] == total:
                    progress["last_log"] = now
                    elapsed = now - start
                    sent_done = progress["done"] - stats.cache_hits
                    eta = elapsed / sent_done * (total - progress["done"]) if sent_done else 0.0
                    log.info(
                        f"{label}: {progress['done']}/{total} answers done, {stats.requests_sent} requests sent, "
                        f"{progress['tokens'] / elapsed if elapsed > 0 else 0:.1f} tok/s, ETA {eta:.0f} s"
                    )

        def work(job: _Job) -> None:
            attempt = 0
            while not abort.is_set():
                server = pick()
                t0 = time.monotonic()
                status: int | None = None
                error: str | None = None
                transport_error = False
                payload: dict[str, Any] | None = None
                try:
                    resp = http.post(
                        f"{server.url}/v1/chat/completions", content=job.request_json.encode("utf-8"),
                        headers={"Content-Type": "application/json"},
                    )
                    status = resp.status_code
                    if status == 200:
                        payload = resp.json()
                    else:
                        error = f"HTTP {status}: {_one_line(resp.text)}"
                except httpx.TransportError as exc:
                    transport_error = True
                    error = f"{type(exc).__name__}: {_one_line(str(exc)) or 'no detail'}"
                except ValueError as exc:  # a 200 whose body is not JSON
                    error = f"bad JSON from server: {_one_line(str(exc))}"
                latency = time.monotonic() - t0
                with lock:
                    server.in_flight -= 1
                    stats.requests_sent += 1
                    if transport_error:
                        server.failures += 1
                        server.last_error = error or ""
                    elif status is not None:
                        server.failures = 0
                usage = (payload or {}).get("usage") or {}
                self._record_call(
                    warehouse, job, server, status, latency, usage, error,
                    canonical_json(payload) if payload is not None else None, store=store,
                )
                if payload is not None:
                    finished(job, result_from_response(
                        job.request_json, job.key, payload, latency_s=latency, server_url=server.url,
                        props_sha=server.props_sha, from_cache=False, props=server.props,
                    ))
                    return
                retryable = transport_error or (status is not None and status >= 500)
                if retryable and attempt < self.retries:
                    attempt += 1
                    log.warning(f"{label}: {job.request.task_id} attempt {attempt} failed ({error}); retrying")
                    abort.wait(self.backoff_s * 2 ** (attempt - 1))
                    continue
                if transport_error:
                    with lock:
                        all_down = all(s.failures > 0 for s in servers)
                        if all_down and not abort.is_set():
                            names = ", ".join(s.url for s in servers)
                            abort_reason.append(
                                f"LLM server unreachable at {names} after {attempt + 1} attempts "
                                f"({_one_line(error or '', 160)})"
                            )
                            abort.set()
                    if all_down:
                        return
                slots, cache_prompt, build = server_settings(server.props, job.request_json)
                finished(job, ChatResult(
                    request_json=job.request_json, cache_key=job.key, text="", reasoning=None,
                    reasoning_present=False, finish_reason=None, prompt_tokens=None, completion_tokens=None,
                    latency_s=latency, server_url=server.url, server_props_sha256=server.props_sha,
                    model=json.loads(job.request_json).get("model"), from_cache=False, error=error,
                    total_slots=slots, cache_prompt=cache_prompt, build_info=build,
                ))
                return

        pool = ThreadPoolExecutor(max_workers=min(self.max_in_flight, len(jobs)), thread_name_prefix="llm")
        futures = [pool.submit(work, j) for j in jobs]
        try:
            for f in futures:
                f.result()
        except BaseException:  # Ctrl-C, a storage error: send nothing new; in-flight answers are still stored
            abort.set()
            pool.shutdown(wait=False, cancel_futures=True)
            log.warning(f"{label}: stopping; requests already in flight finish and are stored")
            raise
        pool.shutdown(wait=True)
        if abort_reason:
            stored = sum(1 for r in results.values() if not r.error)
            raise LLMUnreachable(
                f"{abort_reason[0]}; {stored} of {total} answers are stored and a re-run resumes from them; "
                "restart the server or fix EVALMISLEAD_LLM_URL"
            )


class LLMResource(ConfigurableResource):
    """OpenAI-compatible llama-server client: cache, retries, concurrency across servers."""

    urls: str = ""  # comma-separated; empty -> EVALMISLEAD_LLM_URL -> else the embedded server
    max_in_flight: int = 2  # requests at once over all servers (= the servers' slots in total)
    timeout_s: float = 1800.0  # per request: a 16k-token answer on a busy server takes minutes
    retries: int = 4
    seed: int = 1234
    model: str = ""  # empty: the server's /props model alias (the embedded one's alias)
    backoff_s: float = 1.0

    def configured_urls(self) -> list[str]:
        return [u.strip().rstrip("/") for u in self.urls.split(",") if u.strip()] or settings.llm_urls()

    def client(self, transport: httpx.BaseTransport | None = None) -> ChatClient:
        urls = self.configured_urls()
        model = self.model
        if urls:
            url_source: list[str] | Callable[[], list[str]] = urls
        else:
            from evalmislead_assets import server

            model = model or server.default_alias()
            # Each slot holds a prompt plus the largest configured output cap.
            ctx = max(server.DEFAULT_CTX_PER_SLOT,
                      max(settings.max_tokens(t) for t in ("off", "on")) + server.PROMPT_ALLOWANCE)
            # Started only when a request misses the cache, so a fully cached run needs no server.
            url_source = lambda: [server.shared_server(parallel=self.max_in_flight, ctx_per_slot=ctx).url]  # noqa: E731
        return ChatClient(
            url_source, model=model, max_in_flight=self.max_in_flight, timeout_s=self.timeout_s,
            retries=self.retries, seed=self.seed, backoff_s=self.backoff_s, transport=transport,
        )

    def run_batch_with_stats(
        self, warehouse: Warehouse, requests: list[ChatRequest], log: Any = None, bypass_cache: bool = False
    ) -> tuple[list[ChatResult], BatchStats]:
        return self.client().run_batch(warehouse, requests, log, bypass_cache=bypass_cache)

    def run_batch(self, warehouse: Warehouse, requests: list[ChatRequest], log: Any = None) -> list[ChatResult]:
        return self.client().run_batch(warehouse, requests, log)[0]
