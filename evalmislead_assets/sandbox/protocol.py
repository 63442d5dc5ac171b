"""The fixed shapes of the messages a sandbox chain sends to its zygote, and their parser.

Everything a chain writes comes from processes that run untrusted code, so the zygote acts on
nothing it has not parsed here: a line that is not exactly one of these shapes raises
``Malformed`` (its reason is stored as the test's ``crashed`` detail). No message carries a
process id: the zygote and the chain's supervisor know every process they act on from their
own ``fork()``.

- ``{"setup": "ok"}`` or ``{"setup": "failed", "error": str}``: the module process's first line, written
  by the runner's own code before any of the test module runs (so the test cannot make it fail or
  forge it): a failed set-up (a limit the host refuses, a mount) is the runner's fault, not the file's.
- ``{"ids": [str, ...], "error": str | null}``: the module process's collection.
- ``NONCE<TAB>{"status": S, "detail": str[, "coverage": {...}]}``: a test's report, S one of
  the statuses a test can earn (``sandbox.STATUSES`` less ``tampered``).
- ``NONCE<TAB>{"done": TEST_ID, "code": int}`` or ``NONCE<TAB>{"done": TEST_ID, "missing": true}``:
  the module process's word that the test process ended (with the nonce too, so that a forged
  early "done" cannot make the zygote move on and read this test's lines as the next one's).
- ``{"tampered": str}``: the audit hook caught the test reaching into the harness (it can only
  cost the test itself, so it needs no nonce). Any other line without the nonce is malformed.

Standard library only: the zygote imports it.
"""

from __future__ import annotations

import json
from typing import Any

from evalmislead_assets.sandbox.limits import LIMIT_STATUSES

REPORT_STATUSES = ("passed", "failed", "error", "timeout", "crashed", *LIMIT_STATUSES)
MAX_LINE = 8 << 20  # the ids message: at most max_tests ids of max_id_chars each, JSON-escaped
MAX_TEST_LINE = 1 << 20  # any line during a test (a report with coverage arcs stays far below)


class Malformed(ValueError):
    """A line from the chain that is not one of the protocol's shapes."""


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise Malformed(f"not JSON: {text[:80]!r}") from None


def _exact(msg: Any, required: set[str], optional: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    if not isinstance(msg, dict):
        raise Malformed(f"not an object: {type(msg).__name__}")
    keys = set(msg)
    if not required <= keys or keys - required - optional:
        raise Malformed(f"unexpected keys {sorted(keys)[:6]}")
    return msg


def parse_setup(raw: bytes) -> str | None:
    """The set-up line: None when it went well, the runner's error when not; Malformed otherwise."""
    msg = _json(raw.decode("utf-8", "replace"))
    if isinstance(msg, dict) and msg.get("setup") == "ok":
        _exact(msg, {"setup"})
        return None
    msg = _exact(msg, {"setup", "error"})
    if msg["setup"] != "failed" or not isinstance(msg["error"], str):
        raise Malformed("not a set-up message")
    return msg["error"][:300] or "the set-up failed"


def parse_collected(raw: bytes, max_tests: int, max_id_chars: int) -> dict[str, Any]:
    """The collection message, or {"tampered": reason}; Malformed otherwise."""
    msg = _json(raw.decode("utf-8", "replace"))
    if isinstance(msg, dict) and set(msg) == {"tampered"}:
        return {"tampered": _text(msg["tampered"])}
    msg = _exact(msg, {"ids", "error"})
    ids, error = msg["ids"], msg["error"]
    if not isinstance(ids, list) or not all(isinstance(t, str) for t in ids):
        raise Malformed("ids is not a list of strings")
    if error is not None and not isinstance(error, str):
        raise Malformed("error is not a string")
    if len(ids) > max_tests:
        raise Malformed(f"too many tests: {len(ids)} > {max_tests}")
    if any(len(t) > max_id_chars or not t for t in ids):
        raise Malformed(f"a test id is empty or over {max_id_chars} characters")
    return {"ids": ids, "error": error}


def parse_report(text: str, detail_chars: int) -> dict[str, Any]:
    """The JSON after a test's nonce."""
    msg = _exact(_json(text), {"status", "detail"}, {"coverage"})
    if msg["status"] not in REPORT_STATUSES:
        raise Malformed(f"unknown status {str(msg['status'])[:40]!r}")
    if not isinstance(msg["detail"], str):
        raise Malformed("detail is not a string")
    if "coverage" in msg and not isinstance(msg["coverage"], dict):
        raise Malformed("coverage is not an object")
    out = {"status": msg["status"], "detail": msg["detail"][:detail_chars]}
    if "coverage" in msg:
        out["coverage"] = msg["coverage"]
    return out


def parse_unprefixed(text: str) -> dict[str, Any]:
    """A line without the test's nonce: only the audit hook's {"tampered": ...}."""
    msg = _json(text)
    if isinstance(msg, dict) and set(msg) == {"tampered"}:
        return {"tampered": _text(msg["tampered"])}
    raise Malformed(f"a line without the nonce: {text[:60]!r}")


def parse_prefixed(text: str, test_id: str, detail_chars: int) -> dict[str, Any]:
    """A line after the test's nonce: {"report": {...}} or the done message."""
    msg = _json(text)
    if isinstance(msg, dict) and "status" in msg:
        return {"report": parse_report(text, detail_chars)}
    return parse_done(msg, test_id)


def parse_done(msg: Any, test_id: str) -> dict[str, Any]:
    """The module process's done message for ``test_id``."""
    if isinstance(msg, dict) and "missing" in msg:
        msg = _exact(msg, {"done", "missing"})
        if msg["missing"] is not True:
            raise Malformed("missing is not true")
    else:
        msg = _exact(msg, {"done", "code"})
        if not isinstance(msg["code"], int) or isinstance(msg["code"], bool) or not -255 <= msg["code"] <= 255:
            raise Malformed("code is not an exit code")
    if msg["done"] != test_id:
        raise Malformed(f"done for another test: {str(msg['done'])[:80]!r}")
    return msg


def _text(value: Any) -> str:
    return value[:300] if isinstance(value, str) else "the test reached into the harness"
