"""The sandbox's zygote: a clean interpreter that imports pytest once and serves the host.

Started by the host (``host.start_zygote``) as a script, ``python -s -B evalmislead_assets/sandbox/zygote.py
--zygote ROOT LIMITS_JSON``, in a scrubbed environment. It sets up the OS isolation
(isolation.py), runs pytest with ``ZygotePlugin``, which takes over the run loop,
warms pytest up on a trusted module and then answers one JSON line per request.

Per test module and version it forks a chain (``Chain``): ``chain_supervisor`` (supervisor.py; trusted:
the chain's directory and uid, a new PID namespace) and below it the module process and its
test processes (child.py). The zygote enforces every deadline itself and ends a chain
by killing the module process, the namespace's init.

Standard library only at module level: pytest is imported by ``zygote_main``.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import sys
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import io

if __name__ == "__main__":  # started as a script: its own folder is sys.path[0]; import the package instead
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project root

from evalmislead_assets.sandbox import guard as sandbox_guard
from evalmislead_assets.sandbox.child import coverage_hooks, reap
from evalmislead_assets.sandbox.host import MODULE_UNDER_TEST, TEST_FILE, UID_BASE, Limits
from evalmislead_assets.sandbox.ipc import OVERSIZE, LineReader, write_line
from evalmislead_assets.sandbox.isolation import PR_SET_CHILD_SUBREAPER, Isolation, prctl, setup_isolation
from evalmislead_assets.sandbox.kernel_state import Filters, probe_test_namespaces
from evalmislead_assets.sandbox.protocol import (
    MAX_LINE,
    MAX_TEST_LINE,
    Malformed,
    parse_collected,
    parse_prefixed,
    parse_setup,
    parse_unprefixed,
)
from evalmislead_assets.sandbox.supervisor import chain_supervisor
from evalmislead_assets.sandbox.verdicts import crash_status

_SETUP_TIMEOUT_S = 60.0  # the module process's own set-up (no test code): a mount, limits, a uid


def zygote_main(argv: list[str]) -> int:
    root = argv[0]
    os_isolation = "--no-os-isolation" not in argv
    # the limits come as the first line on stdin, not in argv: a test must not read its time limit
    # (a mutant run has a shorter one) from the process's command line
    limits = Limits(**json.loads(_first_line(0)))
    sys.argv[1:] = []
    try:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    except OSError:
        pass
    iso = setup_isolation(root, os_isolation)
    filters = Filters()  # libseccomp missing: the zygote stops here (the host checked it first, in one line)
    if iso.pid_namespace and iso.chain_namespaces:
        why_not = probe_test_namespaces(UID_BASE if iso.own_uid else None)
        iso.test_namespaces = why_not is None
        if why_not:
            iso.notes.append(why_not)
    # Private protocol descriptors; fd 0/1 become /dev/null so pytest's own chatter goes nowhere.
    proto_in, proto_out = os.dup(0), os.dup(1)
    nul = os.open(os.devnull, os.O_RDWR)
    os.dup2(nul, 0)
    os.dup2(nul, 1)
    # A test's output goes to a log nobody reads; as under plain pytest's capture (errors="replace"), text
    # UTF-8 cannot encode (a lone surrogate) is written escaped instead of failing the print.
    for stream in (sys.stdout, sys.stderr):
        cast("io.TextIOWrapper", stream).reconfigure(errors="backslashreplace")
    import pytest

    # run our loop before pytest's own (the plugin cannot import pytest at module level)
    # (marking a method in place: the same function with pytest's hook attributes set on it)
    ZygotePlugin.pytest_runtestloop = pytest.hookimpl(tryfirst=True)(  # type: ignore[method-assign]
        ZygotePlugin.pytest_runtestloop)
    ZygotePlugin.pytest_runtest_logreport = pytest.hookimpl(tryfirst=True)(  # type: ignore[method-assign]
        ZygotePlugin.pytest_runtest_logreport)
    ZygotePlugin.pytest_collectreport = pytest.hookimpl(tryfirst=True)(  # type: ignore[method-assign]
        ZygotePlugin.pytest_collectreport)
    plugin = ZygotePlugin(root, limits, iso, proto_in, proto_out)
    plugin.filters = filters
    args = [
        os.path.join(root, "empty"), "-s", "-p", "no:cacheprovider", "-p", "no:terminal",
        "--rootdir", root, "-c", os.path.join(root, "pytest.ini"), "--confcutdir", root,
    ]
    pytest.main(args, plugins=[plugin])
    return 0


def _first_line(fd: int) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
    return data


class ZygotePlugin:
    """pytest plugin: takes over the run loop and serves requests; records reports in children."""

    def __init__(self, root: str, limits: Limits, iso: Isolation, proto_in: int, proto_out: int) -> None:
        self.root, self.limits, self.iso = root, limits, iso
        self.proto_in, self.proto_out = proto_in, proto_out
        self.collect_failures: list[Any] = []
        self.reports: list[Any] = []
        self.children: set[int] = set()
        self.pristine: Any = None  # guard.harness_guard, taken after the warm-up
        self.guard: Any = None  # the same, set in a test process
        self.config: Any = None
        self.filters: Any = None  # kernel_state.Filters, built before any test code exists

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collect_failures.append(report)

    def pytest_runtest_logreport(self, report: Any, _tampered: Any = sandbox_guard.tampered) -> None:
        self.reports.append(report)
        # In a test process: the harness must be unchanged while the call's report is made, too (a
        # monkeypatch of pytest's internals is undone at teardown, before the test process's last check).
        if self.guard is not None and report.when == "call" and not self.guard(self.config):
            _tampered("the test changed the test harness during its call")

    def pytest_runtestloop(self, session: Any) -> bool:
        self._warm_up(session)
        write_line(self.proto_out, {"ready": True, "isolation": asdict(self.iso)})
        reader = os.fdopen(self.proto_in, "rb", buffering=0)
        buf = b""
        while True:
            while b"\n" not in buf:
                chunk = reader.read(65536)
                if not chunk:
                    self._reap(block=True)
                    return True
                buf += chunk
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            write_line(self.proto_out, self._handle(session, req))  # the host is trusted: its lines are ours

    def _warm_up(self, session: Any) -> None:
        """Collect and run a trusted module once, so children do not each pay for pytest's lazy set-up."""
        warm = os.path.join(self.root, "warm")
        before_path, before_modules = list(sys.path), set(sys.modules)
        try:
            items = session.perform_collect([os.path.join(warm, TEST_FILE)])
            for i, item in enumerate(items):
                item.ihook.pytest_runtest_protocol(item=item, nextitem=items[i + 1] if i + 1 < len(items) else None)
        finally:
            # nothing of the warm-up module may be visible to the tests
            sys.path[:] = before_path
            for name in set(sys.modules) - before_modules:
                if name in (MODULE_UNDER_TEST, TEST_FILE[:-3]) or name.startswith(MODULE_UNDER_TEST + "."):
                    del sys.modules[name]
            session.items = []
            self.collect_failures.clear()
            self.reports.clear()
        sandbox_guard.install()
        self.config = session.config
        self.pristine = sandbox_guard.harness_guard(session.config)
        gc.collect()
        gc.freeze()  # children then leave these objects' pages unshared only when they really write them

    def _handle(self, session: Any, req: dict[str, Any]) -> dict[str, Any]:
        moddir = os.path.join(self.root, req["dir"])
        self._reap()
        if req["op"] == "collect":
            start = time.monotonic()
            chain = Chain(self, session, moddir, collect_only=True)
            found = chain.collected()
            chain.close()
            found["seconds"] = round(time.monotonic() - start, 4)
            return found if "runner_error" not in found else {"runner_error": found["runner_error"]}
        ids: list[str] = list(req["test_ids"])
        measure = bool(req.get("coverage"))
        if measure:
            coverage_hooks().prepare()  # loaded here once, before the forks
            self.pristine = sandbox_guard.harness_guard(session.config)  # the harness now includes coverage.py
        results: list[dict[str, Any]] = []
        while len(results) < len(ids):
            chain = Chain(self, session, moddir, collect_only=False)
            found = chain.collected()
            if "runner_error" in found:  # the runner's fault: no result for this file may be recorded
                chain.close()
                return {"runner_error": found["runner_error"]}
            if "status" not in found and not found["ids"]:
                found = {"status": "error", "detail": "no tests found when collecting again"}
            if "status" in found:  # the module would not import in this chain: every remaining test shares that
                found = {"status": found["status"], "detail": found["detail"], "seconds": 0.0}
                results += [dict(found) for _ in ids[len(results):]]
                chain.close()
                break
            while len(results) < len(ids) and chain.alive:
                results.append(chain.run(ids[len(results)], measure))
            chain.close()
        return {"results": results}

    def _reap(self, block: bool = False) -> None:
        """Collect finished chain supervisors and orphans."""
        for pid in list(self.children):
            try:
                done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self.children.discard(pid)
        reap()


class Chain:
    """Zygote-side handle on one sandboxed module process and the tests it forks.

    Processes: supervisor (trusted; the zygote's own fork; new PID, mount, IPC and network
    namespaces; lives as long as the chain so that its pid makes the chain's uid unique) ->
    module process (PID 1 of the namespace, so a test can neither kill it nor escape its
    cleanup; limits; imports and collects the module once) -> one forked test process per
    request. The zygote enforces every deadline itself and ends a chain by closing the
    supervisor's kill pipe: the supervisor then kills the module process through a pidfd of its
    own child, whereupon the kernel kills everything in the namespace. No process id ever comes
    from the chain's side, and every line from it is parsed against sandbox_protocol's shapes.
    """

    def __init__(self, plugin: ZygotePlugin, session: Any, moddir: str, collect_only: bool) -> None:
        self.plugin, self.limits = plugin, plugin.limits
        self.alive = True
        ctrl_r, self.ctrl_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        kill_r, self.kill_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                for fd in (self.ctrl_w, self.rep_r, self.kill_w):
                    os.close(fd)
                chain_supervisor(plugin, session, moddir, collect_only, ctrl_r, rep_w, kill_r)
            finally:
                os._exit(0)
        for fd in (ctrl_r, rep_w, kill_r):
            os.close(fd)
        self.supervisor = pid
        self.reader = LineReader(self.rep_r, cap=MAX_LINE)
        plugin.children.add(pid)

    def collected(self) -> dict[str, Any]:
        """{"ids": [...], "error": ...}, or a status for every test when the module cannot be used, or
        {"runner_error": ...} when the runner could not set up the module process (no test code ran)."""
        failed = self._set_up()
        if failed is not None:
            self.kill()
            return {"runner_error": failed}
        deadline = time.monotonic() + self.limits.timeout_s
        raw = self.reader.line(deadline)
        if raw is None or raw is OVERSIZE:
            timed_out = raw is None and not self.reader.eof
            self.kill()
            if timed_out:
                return {"ids": [], "error": f"timeout: importing the test module took over {self.limits.timeout_s:g} s",
                        "status": "timeout", "detail": f"importing the test module took over {self.limits.timeout_s:g} s"}
            if raw is OVERSIZE:
                return _cannot_use("crashed", f"the collection message is over {MAX_LINE} bytes")
            return _cannot_use("crashed", "the test module ended its process while importing")
        try:
            msg = parse_collected(raw, self.limits.max_tests, self.limits.max_id_chars)
        except Malformed as exc:
            self.kill()
            return _cannot_use("crashed", f"malformed message from the module process ({exc})")
        if "tampered" in msg:
            self.kill()
            return _cannot_use("tampered", msg["tampered"])
        if msg.get("error") and not msg["ids"]:
            msg["status"], msg["detail"] = "error", "collection failed: " + msg["error"]
        return msg

    def _set_up(self) -> str | None:
        """None when the module process set itself up (its first line), else why the runner could not."""
        raw = self.reader.line(time.monotonic() + _SETUP_TIMEOUT_S)
        if raw is None or raw is OVERSIZE:
            why = "it ended" if self.reader.eof else f"no word in {_SETUP_TIMEOUT_S:g} s"
            return f"the sandbox's module process did not set itself up ({why})"
        try:
            error = parse_setup(raw)
        except Malformed as exc:
            return f"the sandbox's module process sent no set-up line ({exc})"
        return None if error is None else f"the sandbox could not set up a module process: {error}"

    def run(self, test_id: str, coverage: bool = False) -> dict[str, Any]:
        nonce = secrets.token_hex(16)
        prefix = nonce + "\t"
        start = time.monotonic()
        deadline = start + self.limits.timeout_s
        try:
            write_line(self.ctrl_w, {"test_id": test_id, "nonce": nonce, **({"coverage": True} if coverage else {})})
        except OSError:
            self.alive = False
            return {"status": "crashed", "detail": "the sandbox process died before the test started", "seconds": 0.0}
        report: dict[str, Any] | None = None
        while True:
            raw = self.reader.line(deadline, cap=MAX_TEST_LINE)
            seconds = round(time.monotonic() - start, 4)
            if raw is None:
                timed_out = not self.reader.eof
                self.kill()
                if timed_out:
                    return {"status": "timeout", "detail": f"timeout after {self.limits.timeout_s:g} s", "seconds": seconds}
                # Even with a report: a test that takes its sandbox down with it (kills its parent,
                # every process it can) counts as crashed, whichever won the race.
                return {"status": "crashed", "seconds": seconds,
                        "detail": "the test ended its sandbox (e.g. killed its parent process)"}
            try:
                if raw is OVERSIZE:
                    raise Malformed(f"a line over {MAX_TEST_LINE} bytes")
                text = raw.decode("utf-8", "replace")
                if text.startswith(prefix):
                    msg = parse_prefixed(text[len(prefix):], test_id, self.limits.detail_chars)
                    if "report" in msg:
                        if report is not None:
                            self.kill()
                            return {"status": "tampered", "detail": "two reports for one test", "seconds": seconds}
                        report = msg["report"]
                        continue
                else:
                    msg = parse_unprefixed(text)
            except Malformed as exc:
                self.kill()  # the stream can no longer be trusted to line up: the next tests get a fresh chain
                return {"status": "crashed", "detail": f"malformed message from the test process ({exc})"[:500],
                        "seconds": seconds}
            if "tampered" in msg:
                self.kill()
                return {"status": "tampered", "detail": msg["tampered"], "seconds": seconds}
            if msg.get("missing"):
                return {"status": "error", "detail": f"test id {test_id!r} not found when collecting again",
                        "seconds": seconds}
            if msg["code"] == sandbox_guard.TAMPER_EXIT:
                self.kill()
                return {"status": "tampered", "detail": "the test process ended as the tamper guard ends it",
                        "seconds": seconds}
            if report is not None:
                return {**report, "seconds": seconds}
            return {**crash_status(msg["code"], "run"), "seconds": seconds}

    def kill(self) -> None:
        """End the chain now: the supervisor kills its module process, and the namespace dies with it."""
        self.close()

    def close(self) -> None:
        """End the chain (EOF on the supervisor's kill pipe); the supervisor is reaped later, off the critical path."""
        self.alive = False
        for fd in (self.kill_w, self.ctrl_w, self.rep_r):
            try:
                os.close(fd)
            except OSError:
                pass


def _cannot_use(status: str, detail: str) -> dict[str, Any]:
    return {"ids": [], "error": f"{status}: {detail}", "status": status, "detail": detail}


if __name__ == "__main__" and sys.argv[1:2] == ["--zygote"]:
    sys.stdout.flush()
    os._exit(zygote_main(sys.argv[2:]))
