"""Which process runs a Dagster run, and whether that process still lives (no Dagster here).

A run's worker records itself as ``host:pid:start`` in the run tag ``WORKER_TAG`` (start: the
process's start time in clock ticks since boot, from /proc, so a reused pid is not taken for the
worker). `worker_state` reads such a tag back: ``dead`` only when the process is surely gone
(no such pid, a zombie, or another process under the same pid) on this host; ``alive`` when it
is there; ``unknown`` for another host or a tag we cannot read (never marked failed).
"""

from __future__ import annotations

import os
import socket
from typing import Literal

WORKER_TAG = "evalmislead/run_worker"

State = Literal["alive", "dead", "unknown"]


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None where absent."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def start_ticks(pid: int) -> str:
    """The process's start time (field 22 of /proc/<pid>/stat), '' where /proc does not tell."""
    fields = _proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else ""


def this_worker() -> str:
    """This process as a worker tag value: 'host:pid:start'."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{start_ticks(pid)}"


def worker_state(tag: str | None) -> tuple[State, str]:
    """(state, why) for a worker tag value."""
    if not tag:
        return "unknown", "no worker recorded"
    parts = tag.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return "unknown", f"unreadable worker tag {tag!r}"
    host, pid_text, start = parts
    pid = int(pid_text)
    if pid <= 1:  # 0 would signal our own process group, 1 is init
        return "unknown", f"unreadable worker tag {tag!r}"
    if host != socket.gethostname():
        return "unknown", f"worker pid {pid} runs on host {host}, not this one"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead", f"worker process {pid} on {host} is gone"
    except PermissionError:
        pass  # exists, owned by someone else
    fields = _proc_stat(pid)
    if fields is not None:
        if fields[0] in ("Z", "X"):
            return "dead", f"worker process {pid} on {host} has exited (zombie)"
        if start and len(fields) > 19 and fields[19] != start:
            return "dead", f"worker process {pid} on {host} is gone (the pid now belongs to another process)"
    return "alive", f"worker process {pid} on {host} is running"
