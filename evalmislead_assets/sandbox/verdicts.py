"""pytest's reports, and the exit codes of processes that ended without one, -> the sandbox's statuses.

The one place that maps them (``sandbox.STATUSES``): ``status_of`` for a test process's setup, call
(and subtest) and teardown reports, ``crash_status`` for a process that ended without a report (the
zygote), ``collect_error`` for the one line a failed collection stores.

Standard library only: the zygote imports it (through child.py).
"""

from __future__ import annotations

import os
import re
import signal
from typing import Any


def status_of(reports: list[Any], output_full: bool = False) -> tuple[str, str]:
    """pytest's setup/call/teardown reports -> one status; passed only if the call phase passed.

    A phase that failed on one of the runner's caps rather than on the test's assertions gets a limit
    status (``limit_status``); ``output_full``: the test's output log reached the file-size cap, so a
    "File too large" is the output cap (``limit:output``), not a file the test wrote (``limit:fsize``).

    A subtest (unittest's ``self.subTest``, pytest's ``subtests`` fixture) reports a "call" of its own
    before the test's call report; as plain pytest does (SUBFAILED, exit code 1), any failing one fails
    the test, whatever the test's own call report says (pytest marks that report failed only in its
    terminal reporter, which the sandbox does not load).
    """
    subtests = [r for r in reports if _is_subtest(r)]
    by = {r.when: r for r in reports if not _is_subtest(r)}
    setup, call, teardown = by.get("setup"), by.get("call"), by.get("teardown")
    failed_subtests = [r for r in subtests if r.failed]
    if setup is None:
        return "error", "no setup report"
    if setup.failed:
        return _limited(setup, output_full) or ("error", "setup: " + _short(setup))
    if setup.skipped:
        return _skipped(setup)
    if call is None:
        return "error", "no call report"
    if call.failed:
        return _limited(call, output_full) or ("failed", _short(call))
    if failed_subtests:
        n = len(failed_subtests)
        first = failed_subtests[0]
        return "failed", f"contains {n} failed subtest{'s' if n > 1 else ''}: {_subtest_name(first)}{_short(first)}"
    if call.skipped:
        return _skipped(call)
    if teardown is not None and teardown.failed:
        return _limited(teardown, output_full) or ("error", "teardown: " + _short(teardown))
    return "passed", ""


# The exceptions through which Python reports a cap (the last one raised in the phase, as pytest's crash
# line names it): RLIMIT_AS refuses memory (MemoryError); RLIMIT_FSIZE refuses a write (EFBIG, SIGXFSZ is
# ignored in the sandbox); RLIMIT_NPROC refuses a fork (EAGAIN) or a thread; the run's tmpfs is full (ENOSPC).
_LIMIT_CRASHES = (
    (re.compile(r"^MemoryError\b"), "limit:memory"),
    (re.compile(r"^(?:OSError|IOError): \[Errno 27\]"), "limit:fsize"),
    (re.compile(r"^(?:OSError|BlockingIOError): \[Errno 11\] Resource temporarily unavailable"), "limit:nproc"),
    (re.compile(r"^RuntimeError: can't start new thread"), "limit:nproc"),
    (re.compile(r"^OSError: \[Errno 28\]"), "limit:disk"),
)


def limit_status(message: str, output_full: bool = False) -> str | None:
    """The limit status for a phase whose crash line is ``message``, or None when no cap ended it.

    A test can raise such an exception itself (``raise MemoryError``); that only takes it out of the
    misleading and effective cells, never into one."""
    for pattern, status in _LIMIT_CRASHES:
        if pattern.match(message):
            return "limit:output" if status == "limit:fsize" and output_full else status
    return None


def _limited(report: Any, output_full: bool) -> tuple[str, str] | None:
    message = _short(report)
    status = limit_status(message, output_full)
    return (status, f"{_phase(report)}{message}") if status else None


def _phase(report: Any) -> str:
    return "" if report.when == "call" else f"{report.when}: "


def _is_subtest(report: Any) -> bool:
    """A subtest's report (pytest >= 9's SubtestReport, pytest-subtests' SubTestReport): it carries a context."""
    return report.when == "call" and getattr(report, "context", None) is not None


def _subtest_name(report: Any) -> str:
    context = report.context
    msg, kwargs = getattr(context, "msg", None), getattr(context, "kwargs", None) or {}
    parts = ([f"[{msg}]"] if msg is not None else []) + (
        ["(" + ", ".join(f"{k}={v}" for k, v in kwargs.items()) + ")"] if kwargs else [])  # as pytest names it
    return " ".join(parts) + " " if parts else ""


def crash_status(code: int, op: str) -> dict[str, Any]:
    """A process that ended without a report (exit code as os.waitstatus_to_exitcode gives it)."""
    if code < 0 or code >= 128:
        sig = -code if code < 0 else code - 128
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        how = f"killed by {name}"
    else:
        how = f"exited with code {code}"
    what = "while importing the test module" if op == "collect" else "before the test finished"
    return {"status": "crashed", "detail": f"test process {how} {what}"}


def _skipped(report: Any) -> tuple[str, str]:
    if hasattr(report, "wasxfail"):
        return "failed", f"xfailed {report.wasxfail}".strip()
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return "error", f"skipped: {reason}"


def _short(report: Any) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message
    text = str(report.longrepr).strip()
    lines = [ln for ln in text.splitlines() if ln.startswith("E ")]
    return (lines[-1][1:].strip() if lines else text.splitlines()[-1] if text else "error")


def collect_error(failures: list[Any], moddir: str) -> str:
    """One line: the exception pytest reported for the module (with the line of a SyntaxError)."""
    longrepr = failures[-1].longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message and "SyntaxError" not in crash.message:
        return crash.message.replace(moddir + os.sep, "").strip().splitlines()[0]
    text = str(longrepr).replace(moddir + os.sep, "").strip()
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    if not lines:
        return text.splitlines()[-1] if text else "collection failed"
    raised = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b", ln)]
    last = (raised or lines)[-1]
    where = re.search(r"line (\d+)", text) if "SyntaxError" in last or "IndentationError" in last else None
    return last + (f" (line {where.group(1)})" if where else "")
