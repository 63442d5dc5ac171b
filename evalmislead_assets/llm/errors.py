"""What counts as an answer, and what as an error: one HTTP attempt judged, and its error worded.

An answer is good only when it is one: a 2xx whose body is a JSON object with a well-formed
``choices[0].message``. Anything else is an error (a short excerpt of the body in its text),
never cached. Retrying helps for 5xx, 429 and the connection's failures; it cannot for 4xx or
a 2xx that is not a completion (a server that answers so answers so again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

EXCERPT = 200  # characters of a body kept in an error's text

# kinds of failure: how they are retried and what they say about the server
STATUS = "status"  # an HTTP status that is not 2xx
MALFORMED = "malformed"  # a 2xx that is not a chat completion
CONNECT = "connect"  # no connection, or closed before any answer: the server is unreachable
TIMEOUT = "timeout"  # connected, but no byte for the read gap
TRUNCATED = "truncated"  # an answer began and the connection closed before its end
DEADLINE = "deadline"  # the request's overall deadline passed


def one_line(text: object, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt judged: ``payload`` for a good answer, else ``error`` (one line) and its kind."""

    status: int | None = None
    payload: dict[str, Any] | None = None
    error: str | None = None
    kind: str | None = None
    retryable: bool = False
    abandoned: bool = False  # the client stopped waiting (interrupt): nothing is recorded

    @property
    def ok(self) -> bool:
        return self.payload is not None

    @property
    def server_failed(self) -> bool:
        """The server did not answer at all (counts against it when routing; all of them: unreachable)."""
        return self.kind in (CONNECT, TIMEOUT)


def _type_name(value: object) -> str:
    return {list: "list", type(None): "null", str: "string", bool: "boolean"}.get(type(value), "number")


def malformed(payload: object) -> str | None:
    """Why a decoded body is not a chat completion, or None when it is one."""
    if not isinstance(payload, dict):
        return f"a JSON {_type_name(payload)} instead of an object"
    if payload.get("error"):
        return "an error body"
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        return "no choices"
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        return "no choices[0].message"
    content, reasoning = message.get("content"), message.get("reasoning_content")
    if content is not None and not isinstance(content, str):
        return "a message content that is not text"
    if reasoning is not None and not isinstance(reasoning, str):
        return "a reasoning_content that is not text"
    if content is None and not reasoning:
        return "a message without content"
    usage = payload.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return "a usage that is not an object"
    return None


def judge(status: int, body: bytes, content_type: str = "") -> Attempt:
    """The verdict on a complete response."""
    text = body.decode("utf-8", errors="replace")
    excerpt = one_line(text, EXCERPT) or "(empty body)"
    if not 200 <= status < 300:
        retry = status == 429 or 500 <= status < 600
        return Attempt(status, error=f"HTTP {status}: {excerpt}", kind=STATUS, retryable=retry)
    try:
        payload = json.loads(body)
    except ValueError:
        html = "html" in content_type.lower() or text.lstrip()[:1] == "<"
        what = "an HTML page" if html else "a body that is not JSON"
        return Attempt(status, error=f"HTTP {status} with {what}, not a chat completion: {excerpt}", kind=MALFORMED)
    why = malformed(payload)
    if why:
        return Attempt(status, error=f"HTTP {status} with {why}, not a chat completion: {excerpt}", kind=MALFORMED)
    return Attempt(status, payload=payload)


def transport_failure(exc: httpx.TransportError, status: int | None, received: int, expected: int | None,
                      read_gap_s: float) -> Attempt:
    """A transport exception, worded for what it is (no answer, silence, a cut answer)."""
    detail = one_line(str(exc), 160) or "no detail"
    name = type(exc).__name__
    if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout)):
        return Attempt(status, error=f"no byte from the server for {read_gap_s:.0f} s ({name})", kind=TIMEOUT,
                       retryable=True)
    if status is not None and isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        of = f" of {expected}" if expected else ""
        return Attempt(status, error=f"truncated answer: HTTP {status}, the connection closed after {received}{of} "
                                     f"bytes ({name}: {detail})", kind=TRUNCATED, retryable=True)
    return Attempt(status, error=f"{name}: {detail}", kind=CONNECT, retryable=True)


def deadline_passed(status: int | None, deadline_s: float, received: int) -> Attempt:
    """Not retried (the deadline covers the retries); a server that sent nothing at all counts as not answering."""
    silent = status is None and not received
    got = "; no byte received" if silent else (f"; {received} bytes of an answer received" if received else "")
    return Attempt(status, error=f"no complete answer within the request deadline of {deadline_s:.0f} s{got}",
                   kind=TIMEOUT if silent else DEADLINE)


def usage_int(usage: dict[str, Any], name: str) -> int | None:
    value = usage.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def batch_errors_line(label: str, task_ids: list[str], errors: list[str | None]) -> str | None:
    """One line with the count and the first error when any answer of a batch is an error, else None
    (what a step that must not pass errors off as answers fails with)."""
    failed = [(t, e) for t, e in zip(task_ids, errors) if e]
    if not failed:
        return None
    good = len(errors) - len(failed)
    return (f"{label}: {len(failed)} of {len(errors)} requests failed (first: {failed[0][0]}: {failed[0][1]}); "
            f"the {good} good answers are stored and a re-run asks only for the {len(failed)} failed ones")
