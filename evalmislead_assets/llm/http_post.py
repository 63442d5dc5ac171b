"""One chat-completion POST of the client (llm/client.py), read as a stream so that the overall deadline holds
even when a server keeps trickling bytes; every outcome is an Attempt (llm/errors.py), never an exception."""

from __future__ import annotations

import threading
import time

import httpx

from evalmislead_assets.llm import errors as llm_errors
from evalmislead_assets.llm.errors import Attempt


def post_chat(http: httpx.Client, url: str, request_json: str, deadline: float, cancel: threading.Event,
              timeout_s: float, deadline_s: float) -> Attempt:
    """POST ``request_json`` to ``url``/v1/chat/completions. ``timeout_s``: the longest silence; ``deadline``: the
    monotonic time by which the request must be done (``deadline_s`` names it in the error); ``cancel``: a stop."""
    remaining = max(0.01, deadline - time.monotonic())
    gap = min(timeout_s, remaining)
    timeout = httpx.Timeout(gap, connect=min(10.0, gap), pool=remaining)
    status: int | None = None
    received, expected = 0, None
    try:
        with http.stream("POST", f"{url}/v1/chat/completions", content=request_json.encode("utf-8"),
                         headers={"Content-Type": "application/json"}, timeout=timeout) as resp:
            status = resp.status_code
            length = resp.headers.get("content-length", "")
            expected = int(length) if length.isdigit() else None
            chunks: list[bytes] = []
            for chunk in resp.iter_bytes():
                if cancel.is_set():
                    return Attempt(status, abandoned=True)
                chunks.append(chunk)
                received += len(chunk)
                if time.monotonic() > deadline:
                    return llm_errors.deadline_passed(status, deadline_s, received)
            return llm_errors.judge(status, b"".join(chunks), resp.headers.get("content-type", ""))
    except httpx.TransportError as exc:
        if cancel.is_set():
            return Attempt(status, abandoned=True)
        if isinstance(exc, httpx.TimeoutException) and time.monotonic() >= deadline - 0.05:
            return llm_errors.deadline_passed(status, deadline_s, received)
        return llm_errors.transport_failure(exc, status, received, expected, gap)
