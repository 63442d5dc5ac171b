"""The engine behind the `llm` resource: OpenAI-compatible chat completions over httpx, with a
response cache, one `llm_calls` row per HTTP request, retries, deadlines and concurrency across
servers.

Nothing is generated twice: the cache key is the sha256 of the exact request body, and every
good answer is committed to DuckDB the moment it arrives, so a killed run loses nothing and a
re-run sends requests only for what is missing. Only a good answer (llm_errors.judge) is cached;
an error is a row in llm_calls and in the batch's results, and is asked again next time.

Requests run in daemon threads while the calling thread waits, logs a line at least every
``progress_every_s`` and watches for a stop (SIGINT / SIGTERM, or Dagster's interrupt raised
in it): then everything in flight is abandoned at once, marked ``abandoned`` in llm_calls
(not an error: it was not answered), and nothing more is logged.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from evalmislead_assets.llm import errors as llm_errors
from evalmislead_assets.llm.call_store import CallStore
from evalmislead_assets.llm.errors import Attempt, one_line
from evalmislead_assets.llm.http_post import post_chat
from evalmislead_assets.llm.served_model import check_served_model
from evalmislead_assets.llm.server_props import DEFAULT_HINT, probe_servers
from evalmislead_assets.llm.stop_signals import StopRequested, stop_requested
from evalmislead_assets.llm.types import (
    BatchStats,
    ChatRequest,
    ChatResult,
    LLMFailing,
    LLMUnreachable,
    NotRecorded,
    request_body,
    result_from_response,
    server_settings,
)
from evalmislead_assets.llm.wait_progress import Heartbeat
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.hashing import sha256_text

_log = logging.getLogger(__name__)


@dataclass
class _Server:
    url: str
    props_sha: str | None = None
    props: dict[str, Any] = field(default_factory=dict)
    in_flight: int = 0
    failures: int = 0  # consecutive attempts it did not answer at all; 0 after any response


@dataclass
class _Job:
    key: str
    request_json: str
    request: ChatRequest  # the first request with this key (provenance of the llm_calls rows)
    replace_cached: bool = False  # llm_cache holds a bad row for this key


class ChatClient:
    """The engine behind the `llm` resource; `transport` lets tests swap the network for httpx.MockTransport.

    ``timeout_s``: the longest silence while a request waits for bytes (llama-server sends a
    non-streamed answer when it is complete, so this bounds one generation); ``deadline_s``: the
    longest one request may take, its retries included.
    """

    def __init__(
        self,
        urls: list[str] | Callable[[Any], list[str]],  # a callable gets the batch's log (embedded server start)
        model: str = "",
        max_in_flight: int = 2,
        timeout_s: float = 1800.0,
        retries: int = 4,
        seed: int = 1234,
        backoff_s: float = 1.0,
        transport: httpx.BaseTransport | None = None,
        deadline_s: float = 3600.0,
        progress_every_s: float = 30.0,
        error_streak: int = 6,
        api: str = "llama.cpp",  # the body's flavour: "openai" leaves out llama-server's own fields
        template_kwargs: Mapping[str, Any] | None = None,
        thinking_off: str = "template",  # how thinking-off requests switch thinking off (study.models.THINKING_OFF)
        cache_only: bool = False,
        headers: Mapping[str, str] | None = None,
        died: Callable[[], list[str]] | None = None,
        unreachable_hint: str = DEFAULT_HINT,  # what to fix when no server answers, named where its URL is set
    ) -> None:
        self._urls = urls
        self.unreachable_hint = unreachable_hint
        # a replay: every answer must come from llm_cache (an imported pack); a miss sends nothing and fails
        self.cache_only = cache_only
        # sent with every request (a hosted endpoint's Authorization): never stored, hashed or logged
        self._headers = dict(headers or {})
        # the embedded server's death notes (None: servers the user runs): a server that died mid-batch is
        # named in the error and, once per batch, restarted by resolving the URLs again
        self._died = died
        self.template_kwargs = dict(template_kwargs or {})  # the model's chat-template arguments (study.toml)
        self.api = api
        self.thinking_off = thinking_off
        self.model = model
        self.max_in_flight = max(1, max_in_flight)
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.retries = max(0, retries)
        self.seed = seed
        self.backoff_s = backoff_s
        self.transport = transport
        self.progress_every_s = progress_every_s
        self.error_streak = max(1, error_streak)  # errors in a row (no good answer between) that stop the batch
        self._db_lock = threading.Lock()

    # ---- servers ----

    def _resolve_urls(self, log: Any = None) -> list[str]:
        urls = self._urls(log) if callable(self._urls) else list(self._urls)
        if not urls:
            raise LLMUnreachable("no LLM server URL configured")
        return [u.rstrip("/") for u in urls]

    def _http(self) -> httpx.Client:
        return httpx.Client(timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
                            transport=self.transport, headers=self._headers)

    def _probe(self, store: CallStore, http: httpx.Client, urls: list[str], log: Any) -> dict[str, tuple[str, dict[str, Any]]]:
        return probe_servers(store, http, urls, log, self.retries, self.backoff_s, self.progress_every_s,
                             self.unreachable_hint)

    def model_name(self, props: dict[str, Any] | None = None) -> str:
        if self.model:
            return self.model
        alias = str((props or {}).get("model_alias") or (props or {}).get("model_path") or "default")
        return alias.rsplit("/", 1)[-1] if alias.endswith(".gguf") else alias

    # ---- the batch ----

    def run_batch(
        self, warehouse: Warehouse, requests: list[ChatRequest], log: Any = None, bypass_cache: bool = False
    ) -> tuple[list[ChatResult], BatchStats]:
        """Answers in request order (an error is a result with ``error`` set). ``bypass_cache``: send
        every request even when an answer is stored, and leave llm_cache as it is (the llm_calls
        rows are still written)."""
        log = log or _log
        start = time.monotonic()
        stats = BatchStats(total=len(requests))
        if not requests:
            return [], stats
        label = f"{requests[0].asset}[{requests[0].condition or '-'}|{requests[0].thinking}]"
        store = CallStore(warehouse, self._db_lock)

        props_by_url: dict[str, tuple[str, dict[str, Any]]] = {}
        http = self._http()
        interrupted = False
        try:
            # The model name is part of every body (and so of every cache key). It is known
            # without a server when configured (or for the embedded server); otherwise the
            # servers' /props name it.
            if not self.model:
                props_by_url = self._probe(store, http, self._resolve_urls(log), log)
            model = self.model_name(next(iter(props_by_url.values()))[1] if props_by_url else None)

            bodies = [request_body(r, model, self.seed, self.template_kwargs, self.api, self.thinking_off)
                      for r in requests]
            keys = [sha256_text(b) for b in bodies]
            cached, bad = ({}, set()) if bypass_cache else store.cached(keys)
            results: dict[str, ChatResult] = {}
            for key, body in zip(keys, bodies):
                if key in cached and key not in results:
                    c = cached[key]
                    results[key] = result_from_response(
                        body, key, c["response"], latency_s=c["latency_s"], server_url=c["server_url"],
                        props_sha=c["props_sha"], from_cache=True, props=c["props"],
                    )
            stats.cache_hits = sum(1 for k in keys if k in cached)
            if bad:
                log.warning(f"{label}: {len(bad)} stored answers are error bodies (kept by an older version); "
                            "asking for them again")
            jobs: dict[str, _Job] = {}
            for key, body, req in zip(keys, bodies, requests):
                if key not in results and key not in jobs:
                    jobs[key] = _Job(key, body, req, replace_cached=key in bad)
            if jobs and self.cache_only and not bypass_cache:
                first = next(iter(jobs.values())).request.task_id
                raise NotRecorded(
                    f"{label}: {len(jobs)} of {len(requests)} answers are not recorded (first: {first}) and this run "
                    "replays recorded answers only (--replay); nothing was sent: import the pack that holds them "
                    "(evalmislead answers import DIR) or run without --replay to generate them")
            if jobs:
                log.info(f"{label}: {len(requests)} requests, {stats.cache_hits} from the cache, sending {len(jobs)}")
                props_by_url = props_by_url or self._probe(store, http, self._resolve_urls(log), log)
                check_served_model(warehouse, model, {u: p for u, (_, p) in props_by_url.items()}, label)
                servers = [_Server(u, sha, props) for u, (sha, props) in props_by_url.items()]
                try:
                    self._send_all(store, http, servers, list(jobs.values()), results, stats, log, label, start,
                                   keep=not bypass_cache)
                except LLMUnreachable as exc:
                    notes = self._died() if self._died and type(exc) is LLMUnreachable else []
                    if not notes:
                        raise
                    log.warning(f"{label}: {notes[0]}; restarting it once")
                    left = [j for j in jobs.values() if j.key not in results or results[j.key].error]
                    props_by_url = self._probe(store, http, self._resolve_urls(log), log)  # starts a fresh server
                    servers = [_Server(u, sha, props) for u, (sha, props) in props_by_url.items()]
                    try:
                        self._send_all(store, http, servers, left, results, stats, log, label, start,
                                       keep=not bypass_cache)
                    except LLMUnreachable as again:
                        more = self._died() if self._died else []
                        raise type(again)(f"{again}; {(more or notes)[0]} (restarted once already)") from None
        except BaseException:
            interrupted = True
            raise
        finally:
            if not interrupted:
                http.close()  # (on a stop, threads may still use it: it goes with the process)

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
        self, store: CallStore, http: httpx.Client, servers: list[_Server], jobs: list[_Job],
        results: dict[str, ChatResult], stats: BatchStats, log: Any, label: str, start: float, keep: bool = True,
    ) -> None:
        lock = threading.Lock()
        abort = threading.Event()  # send nothing new; requests in flight finish and are stored
        cancel = threading.Event()  # a stop: abandon everything, record and log nothing more
        abort_reason: list[tuple[type[LLMUnreachable], str]] = []  # why no more requests were sent
        failures: list[BaseException] = []
        queue = deque(jobs)
        in_flight: dict[str, tuple[str, str, float]] = {}  # call_id -> (task_id, server, since)
        progress = {"done": stats.cache_hits, "tokens": 0, "streak": 0, "errors": 0}
        first_error: list[str] = []
        total = stats.total
        heartbeat = Heartbeat(log.info, self.progress_every_s)

        def say(level: str, text: str) -> None:
            if not cancel.is_set() and not stop_requested():
                getattr(log, level)(text)

        def pick() -> _Server:
            with lock:
                healthy = [s for s in servers if s.failures == 0] or servers
                server = min(healthy, key=lambda s: (s.in_flight, s.failures))
                server.in_flight += 1
                return server

        def progress_line(now: float) -> str:
            elapsed = now - start
            sent_done = progress["done"] - stats.cache_hits
            eta = elapsed / sent_done * (total - progress["done"]) if sent_done else 0.0
            return (f"{label}: {progress['done']}/{total} answers done, {stats.requests_sent} requests sent, "
                    f"{progress['errors']} errors, {progress['tokens'] / elapsed if elapsed > 0 else 0:.1f} tok/s, "
                    f"ETA {eta:.0f} s")

        def finished(job: _Job, result: ChatResult) -> None:
            with lock:
                results[job.key] = result
                progress["done"] += 1
                progress["tokens"] += result.completion_tokens or 0
                if result.error:
                    progress["errors"] += 1
                    progress["streak"] += 1
                    if not first_error:
                        first_error.append(f"{job.request.task_id}: {result.error}")
                    if progress["streak"] >= self.error_streak and not abort.is_set():
                        abort_reason.append((LLMFailing,
                            f"{label}: {progress['streak']} requests in a row failed, so no more were sent "
                            f"(first: {one_line(first_error[0], 240)})"))
                        abort.set()
                else:
                    progress["streak"] = 0
                now = time.monotonic()
                if now - heartbeat.last >= 5.0 or progress["done"] == total:
                    heartbeat.reset()
                    say("info", progress_line(now))

        def error_result(job: _Job, server: _Server, attempt: Attempt, latency: float) -> ChatResult:
            slots, cache_prompt, build = server_settings(server.props, job.request_json)
            return ChatResult(
                request_json=job.request_json, cache_key=job.key, text="", reasoning=None,
                reasoning_present=False, finish_reason=None, prompt_tokens=None, completion_tokens=None,
                latency_s=latency, server_url=server.url, server_props_sha256=server.props_sha,
                model=json.loads(job.request_json).get("model"), from_cache=False, error=attempt.error,
                total_slots=slots, cache_prompt=cache_prompt, build_info=build,
            )

        def run_job(job: _Job) -> None:
            attempt_no = 0
            deadline = time.monotonic() + self.deadline_s
            while not (abort.is_set() or cancel.is_set()):
                server = pick()
                try:
                    call_id = store.begin(job.request, job.key, server.url)
                except BaseException:
                    with lock:
                        server.in_flight -= 1
                    raise
                t0 = time.monotonic()
                with lock:
                    stats.requests_sent += 1
                    in_flight[call_id] = (job.request.task_id, server.url, t0)
                try:
                    attempt = post_chat(http, server.url, job.request_json, deadline, cancel, self.timeout_s, self.deadline_s)
                finally:
                    with lock:
                        server.in_flight -= 1
                        in_flight.pop(call_id, None)
                if attempt.abandoned or cancel.is_set():
                    return  # the row stays 'sent' until the stop marks it abandoned
                latency = time.monotonic() - t0
                with lock:
                    server.failures = server.failures + 1 if attempt.server_failed else 0
                store.finish(call_id, attempt, latency, job.key, job.request_json, server.url, server.props_sha,
                             store=keep, replace=job.replace_cached)
                if attempt.ok:
                    finished(job, result_from_response(
                        job.request_json, job.key, attempt.payload or {}, latency_s=latency, server_url=server.url,
                        props_sha=server.props_sha, from_cache=False, props=server.props,
                    ))
                    return
                wait = self.backoff_s * 2**attempt_no
                if attempt.retryable and attempt_no < self.retries and time.monotonic() + wait < deadline:
                    attempt_no += 1
                    say("warning", f"{label}: {job.request.task_id} attempt {attempt_no} failed ({attempt.error}); "
                                   f"retrying in {wait:.0f} s")
                    if cancel.wait(wait):
                        return
                    continue
                if attempt.server_failed:
                    with lock:
                        all_down = all(s.failures > 0 for s in servers)
                        if all_down and not abort.is_set():
                            names = ", ".join(s.url for s in servers)
                            what = "unreachable" if attempt.kind == llm_errors.CONNECT else "not answering"
                            abort_reason.append((LLMUnreachable, f"LLM server {what} at {names} after "
                                                 f"{attempt_no + 1} attempts ({one_line(attempt.error or '', 160)})"))
                            abort.set()
                    if all_down:
                        return
                finished(job, error_result(job, server, attempt, latency))
                return

        def worker() -> None:
            try:
                while not (abort.is_set() or cancel.is_set()):
                    with lock:
                        job = queue.popleft() if queue else None
                    if job is None:
                        return
                    run_job(job)
            except BaseException as exc:  # a storage error: stop the batch, the caller raises it
                if not cancel.is_set():
                    failures.append(exc)
                    abort.set()
            finally:
                with lock:
                    alive[0] -= 1
                    if alive[0] == 0:
                        all_done.set()

        def waiting(seconds: float) -> str:
            with lock:
                flying = sorted(in_flight.values(), key=lambda x: x[2])
                queued = len(queue)
            if not flying:
                return f"{progress_line(time.monotonic())}; {queued} queued, none in flight (backing off before a retry)"
            task, url, since = flying[0]
            return (f"{progress_line(time.monotonic())}; waiting for {len(flying)} requests in flight "
                    f"(longest: {task} on {url}, {time.monotonic() - since:.0f} s), {queued} queued")

        n_threads = min(self.max_in_flight, len(jobs))
        alive = [n_threads]
        all_done = threading.Event()
        for i in range(n_threads):
            threading.Thread(target=worker, name=f"llm-{i}", daemon=True).start()
        try:
            while not all_done.wait(0.2):
                if stop_requested():
                    raise StopRequested()
                heartbeat.beat(waiting)
        except BaseException:  # a stop (signal, Dagster's interrupt), or a storage error in this thread
            cancel.set()
            abort.set()
            with lock:
                abandoned = list(in_flight)
            store.abandon(abandoned)
            raise
        if failures:
            raise failures[0]
        if abort_reason:
            stored = sum(1 for r in results.values() if not r.error)
            kind, why = abort_reason[0]
            tail = "fix the server" if kind is LLMFailing else self.unreachable_hint
            raise kind(f"{why}; {stored} of {total} answers are stored and a re-run resumes from them; {tail}")
