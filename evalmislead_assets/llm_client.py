"""The engine behind the `llm` resource: OpenAI-compatible chat completions over httpx, with a
response cache, one `llm_calls` row per HTTP request, retries, and concurrency across servers.

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

from evalmislead_assets.hashing import sha256_text
from evalmislead_assets.llm_types import (
    BatchStats, ChatRequest, ChatResult, LLMUnreachable, canonical_json, request_body, result_from_response,
    server_settings,
)
from evalmislead_assets.storage import Warehouse

_log = logging.getLogger(__name__)
# /props fields that change on every server start without changing any answer.
_VOLATILE_PROPS = ("media_marker", "is_sleeping")


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
    """The engine behind the `llm` resource; `transport` lets tests swap the network for httpx.MockTransport."""

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
