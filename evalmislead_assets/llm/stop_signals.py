"""SIGINT / SIGTERM for the `evalmislead run` process: stop in seconds, exit 130 / 143.

The first signal sets ``STOP`` (every wait in the LLM client and the progress helper checks it
and gives up at once), raises in the main thread, and arms a backstop that ends the process
``grace_s`` later whatever still runs; a second signal exits at once. Dagster replaces the
Python-level handlers while a run executes, so the signal number is read from
``signal.set_wakeup_fd`` by a watcher thread: it sees every delivery whichever handler is
installed. Plain Python, no Dagster.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

STOP = threading.Event()
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_state: dict[str, object] = {"signum": None, "count": 0, "installed": False}
_lock = threading.Lock()


class StopRequested(KeyboardInterrupt):
    """A stop was asked for (SIGINT / SIGTERM): whatever waited is abandoned, nothing is recorded for it."""


def stop_requested() -> bool:
    return STOP.is_set()


def stop_signal() -> int | None:
    signum = _state["signum"]
    return int(signum) if isinstance(signum, int) else None


def exit_code(default: int = 130) -> int:
    """128 + the signal that asked for the stop (130 SIGINT, 143 SIGTERM)."""
    signum = stop_signal()
    return 128 + signum if signum else default


def signal_name(signum: int | None = None) -> str:
    signum = stop_signal() if signum is None else signum
    return signal.Signals(signum).name if signum else "interrupt"


def wait_for_signal(timeout_s: float) -> bool:
    """True once a stop was asked for (the watcher may see a signal just after the handler ran)."""
    return STOP.wait(timeout_s)


def _say(text: str) -> None:
    try:
        os.write(2, (text + "\n").encode())
    except OSError:
        pass


def _force_exit(code: int, why: str) -> None:
    _say(f"evalmislead: {why}; exiting now (stored rows are kept, re-run to resume)")
    os._exit(code)


def _delivered(signum: int, grace_s: float) -> None:
    with _lock:
        _state["count"] = int(_state["count"]) + 1  # type: ignore[call-overload]
        first = _state["count"] == 1
        if first:
            _state["signum"] = signum
    if not first:
        _force_exit(128 + signum, f"second {signal_name(signum)}")
    STOP.set()
    _say(f"evalmislead: {signal_name(signum)} received: stopping (stored answers are kept; "
         "a second signal exits at once)")
    timer = threading.Timer(grace_s, _force_exit, (128 + signum, f"still running {grace_s:.0f} s after the stop"))
    timer.daemon = True
    timer.start()


def _watch(fd: int, grace_s: float) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum in _SIGNALS:
                _delivered(signum, grace_s)


def _handler(signum: int, frame: FrameType | None) -> None:
    """Python-level handler outside Dagster runs: unwind the main thread once (the watcher counts the
    signals and ends the process on the second; raising again could only race it)."""
    with _lock:
        raised = bool(_state.get("raised"))
        _state["raised"] = True
    if raised:
        return
    if signum == signal.SIGTERM:
        raise SystemExit(128 + signum)
    raise StopRequested()


def install(grace_s: float = 10.0) -> bool:
    """Install the handlers (main thread only, once per process); False where that is impossible."""
    if _state["installed"]:
        return True
    if threading.current_thread() is not threading.main_thread() or sys.platform == "win32":
        return False
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for signum in _SIGNALS:
        signal.signal(signum, _handler)
    threading.Thread(target=_watch, args=(read_fd, grace_s), name="evalmislead-signals", daemon=True).start()
    _state["installed"] = True
    return True
