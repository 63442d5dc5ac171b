"""The servers' /props before a batch: model name, slots and build of each, recorded in server_props.

A probe that waits says so every ``every_s`` seconds and gives up at once on a stop request
(wait_progress.wait_for); a server that never answers is left out, all of them: LLMUnreachable.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from evalmislead_assets.llm.call_store import CallStore
from evalmislead_assets.llm.errors import one_line
from evalmislead_assets.llm.types import LLMUnreachable
from evalmislead_assets.llm.wait_progress import wait_for

PROPS_TIMEOUT_S = 30.0
#: the end of an 'unreachable' message when the caller does not say where the URLs are set
DEFAULT_HINT = "start it or fix its URL"


def get_props(http: httpx.Client, url: str, retries: int, backoff_s: float, progress: dict[str, int],
              hint: str = DEFAULT_HINT) -> dict[str, Any]:
    last = ""
    for attempt in range(retries + 1):
        progress["attempt"] = attempt + 1
        try:
            r = http.get(f"{url}/props", timeout=PROPS_TIMEOUT_S)
            if r.status_code == 200:
                props = r.json()
                return props if isinstance(props, dict) else {}
            last = f"HTTP {r.status_code} on /props"
            if r.status_code < 500:
                return {}
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {exc}"
        except ValueError:  # a 200 that is not JSON: the server answers, its /props is just unusable
            return {}
        if attempt < retries:
            time.sleep(backoff_s * 2**attempt)
    raise LLMUnreachable(
        f"LLM server unreachable at {url} after {retries + 1} attempts ({one_line(last, 160)}); {hint}"
    )


def unreachable(urls: list[str], hint: str = DEFAULT_HINT, retries: int = 2, backoff_s: float = 1.0,
                transport: httpx.BaseTransport | None = None) -> str:
    """'' when something listens at one of ``urls``; else the one line naming the fix. A quick check before
    a run, not a wait (``retries`` + 1 tries per URL): only a connection that cannot be made counts as down.
    Any HTTP answer (a 503 while it loads its model, a 401 or 404 of a hosted endpoint) and a server that
    takes the connection but does not answer in a few seconds are left to the batch's own probe, which
    waits for them and names what it found."""
    last = ""
    timeout = httpx.Timeout(5.0, connect=10.0)
    with httpx.Client(timeout=timeout, transport=transport) as http:
        for url in urls:
            for attempt in range(retries + 1):
                try:
                    http.get(f"{url.rstrip('/')}/props")
                    return ""
                except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
                    last = f"{type(exc).__name__}: {exc}"
                except httpx.TransportError:
                    return ""  # connected: it is there, slow or odd (the batch's probe says which)
                if attempt < retries:
                    time.sleep(backoff_s * 2**attempt)
    if not urls:
        return ""
    if len(urls) == 1:
        return f"LLM server unreachable at {urls[0]} after {retries + 1} attempts ({one_line(last, 160)}); {hint}"
    return f"no LLM server reachable at {', '.join(urls)} ({one_line(last, 160)}); {hint}"


def record_props(store: CallStore, http: httpx.Client, url: str, log: Any, retries: int, backoff_s: float,
                 every_s: float, hint: str = DEFAULT_HINT) -> tuple[str, dict[str, Any]]:
    """/props of one server, recorded in server_props; the wait logs a line every ``every_s``."""
    progress = {"attempt": 1}
    props = wait_for(
        lambda: get_props(http, url, retries, backoff_s, progress, hint),
        lambda s: f"waiting for /props of {url} (attempt {progress['attempt']} of {retries + 1}, {s:.0f} s)",
        log.info, every_s=every_s,
    )
    return store.record_props(url, props), props


def probe_servers(store: CallStore, http: httpx.Client, urls: list[str], log: Any, retries: int, backoff_s: float,
                  every_s: float, hint: str = DEFAULT_HINT) -> dict[str, tuple[str, dict[str, Any]]]:
    """/props of every server (recorded in server_props); unreachable ones are left out, all unreachable raises.
    ``hint`` ends the message: what to fix, named where the URLs are set (the study file, a variable)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    failed: list[str] = []
    for url in urls:
        try:
            found[url] = record_props(store, http, url, log, retries, backoff_s, every_s, hint)
        except LLMUnreachable as exc:
            failed.append(str(exc))
    if not found:
        raise LLMUnreachable(failed[0] if len(failed) == 1 else (
            f"no LLM server reachable at {', '.join(urls)}; {hint}"
        ))
    for msg in failed:
        log.warning(f"{msg}; continuing with {', '.join(found)}")
    return found
