"""The sandbox's line protocol: JSON lines over pipes, read with deadlines, and the host's zygote handle.

Both sides use it: the host talks to each zygote over the zygote's stdin/stdout
(``ZygoteProcess``), and a zygote talks to each chain over a pair of pipes (``LineReader``,
``write_line``). Standard library only: the zygote imports it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import time
from typing import Any

from evalmislead_assets.sandbox.processes import signal_group

_write, _dumps = os.write, json.dumps  # bound at import (in the zygote): a test patching os.write changes nothing


def write_line(fd: int, obj: dict[str, Any], prefix: str = "") -> None:
    """``prefix``, one JSON object and a newline, written whole (a pipe may take it in parts)."""
    data = (prefix + _dumps(obj) + "\n").encode()
    while data:
        data = data[_write(fd, data):]


OVERSIZE = b"<oversize line>"  # returned (by identity) for a line longer than the reader's cap


class LineReader:
    """Lines from a pipe, read with a deadline; a line longer than ``cap`` bytes is skipped whole and
    read as ``OVERSIZE`` (never cut, never glued to the next one)."""

    def __init__(self, fd: int, cap: int | None = None) -> None:
        self.fd, self.cap = fd, cap
        self.buf = b""
        self.eof = False
        self._skipping = False

    def line(self, deadline: float, cap: int | None = None) -> bytes | None:
        """The next whole line, without its newline; OVERSIZE for one over the cap; None at EOF (``eof``
        is then set) or at the deadline."""
        cap = cap or self.cap
        while True:
            if self._skipping:
                cut = self.buf.find(b"\n")
                if cut >= 0:
                    self.buf, self._skipping = self.buf[cut + 1:], False
                    return OVERSIZE
                self.buf = b""
            elif b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                if cap is not None and len(line) > cap:
                    return OVERSIZE
                return line
            elif cap is not None and len(self.buf) > cap:
                self._skipping, self.buf = True, b""
                continue
            if self.eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.eof = True
                if self._skipping:
                    self._skipping = False
                    return OVERSIZE
                return None
            self.buf += chunk


class ZygoteProcess:
    """Host handle on one zygote process: JSON lines over its stdin/stdout, stderr kept in a file.

    The zygote's first line must carry ``"ready"``; it is kept as ``ready``. Started in a session
    of its own, so that closing it can kill its whole process group.
    """

    def __init__(self, args: list[str], cwd: str, env: dict[str, str], start_timeout_s: float,
                 first_line: dict[str, Any] | None = None) -> None:
        self.err = tempfile.TemporaryFile(dir=cwd)
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, cwd=cwd,
            env=env, start_new_session=True, close_fds=True,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        if first_line is not None:  # the zygote's set-up (its limits), read before anything else
            try:
                self.proc.stdin.write((json.dumps(first_line) + "\n").encode())
                self.proc.stdin.flush()
            except OSError:
                pass
        self._reader = LineReader(self.proc.stdout.fileno())
        ready = self._read(start_timeout_s)
        if ready is None or "ready" not in ready:
            tail = self.stderr_tail()
            self.close()
            raise RuntimeError(f"sandbox zygote failed to start: {tail}")
        self.ready: dict[str, Any] = ready

    def request(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send one request; its reply, or None when the zygote died, hung past ``timeout_s`` or garbled it."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self._read(timeout_s)

    def _read(self, timeout_s: float) -> dict[str, Any] | None:
        line = self._reader.line(time.monotonic() + timeout_s)
        if line is None or line is OVERSIZE:
            return None
        try:
            return json.loads(line)
        except ValueError:
            return None

    def stderr_tail(self, n: int = 400) -> str:
        try:
            self.err.seek(0, os.SEEK_END)
            size = self.err.tell()
            self.err.seek(max(0, size - n))
            text = self.err.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            text = ""
        return text.replace("\n", " | ") or f"exit code {self.proc.poll()}"

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        signal_group(self.proc)
        self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.err.close()
