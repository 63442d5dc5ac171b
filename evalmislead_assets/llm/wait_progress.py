"""Waits that say what they wait for: a line at least every ``every_s`` seconds, and an early end
when a stop is requested (SIGINT / SIGTERM, see stop_signals). Plain Python, no Dagster.

Two shapes: ``Heartbeat`` for a wait that already loops (call ``beat`` each turn; the DuckDB
lock retry can use it), and ``wait_for`` for one blocking call (run in a daemon thread, so the
caller can log and give up while it blocks).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from evalmislead_assets.llm.stop_signals import StopRequested, stop_requested

T = TypeVar("T")
DEFAULT_EVERY_S = 30.0


class Heartbeat:
    """``beat(what)`` logs ``what(seconds waited)`` when ``every_s`` passed since the last line (or the start)."""

    def __init__(self, log: Callable[[str], None], every_s: float = DEFAULT_EVERY_S) -> None:
        self.log = log
        self.every_s = every_s
        self.start = self.last = time.monotonic()
        self.lines = 0

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.every_s

    def beat(self, what: Callable[[float], str]) -> bool:
        """True when a line was logged; never logs once a stop was requested."""
        if not self.due() or stop_requested():
            return False
        self.last = time.monotonic()
        self.lines += 1
        self.log(what(self.last - self.start))
        return True

    def reset(self) -> None:
        """Something else was logged just now: the next line is due ``every_s`` from here."""
        self.last = time.monotonic()


def wait_for(
    fn: Callable[[], T], what: Callable[[float], str], log: Callable[[str], None],
    every_s: float = DEFAULT_EVERY_S, poll_s: float = 0.2,
) -> T:
    """``fn()`` in a daemon thread; this thread waits, logging ``what(seconds)`` every ``every_s``.

    Returns fn's value or raises its exception; on a stop request raises ``StopRequested`` and
    leaves fn behind (a daemon thread: it ends with the process).
    """
    box: dict[str, object] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="evalmislead-wait", daemon=True).start()
    heartbeat = Heartbeat(log, every_s)
    while not done.wait(poll_s):
        if stop_requested():
            raise StopRequested()
        heartbeat.beat(what)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
