"""The sandbox's zygote: a clean interpreter that imports pytest once and serves the host.

Started by the host (``sandbox.start_zygote``) as a script, ``python -s -B sandbox_zygote.py
--zygote ROOT LIMITS_JSON``, in a scrubbed environment. It sets up the OS isolation
(sandbox_isolation.py), runs pytest with ``ZygotePlugin``, which takes over the run loop,
warms pytest up on a trusted module and then answers one JSON line per request.

Per test module and version it forks a chain (``Chain``): ``chain_supervisor`` (trusted:
the chain's directory and uid, a new PID namespace) and below it the module process and its
test processes (sandbox_child.py). The zygote enforces every deadline itself and ends a chain
by killing the module process, the namespace's init.

Standard library only at module level: pytest is imported by ``zygote_main``.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import shutil
import sys
import time
from dataclasses import asdict
from typing import Any

if __name__ == "__main__":  # started as a script: its own folder is sys.path[0]; import the package instead
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from evalmislead_assets.sandbox import _UID_BASE, MODULE_UNDER_TEST, TEST_FILE, Limits  # noqa: E402
from evalmislead_assets.sandbox_child import coverage_hooks, crash_status, kill_pid, module_process, reap  # noqa: E402
from evalmislead_assets.sandbox_ipc import LineReader, write_line  # noqa: E402
from evalmislead_assets.sandbox_isolation import (CLONE_NEWPID, PR_SET_CHILD_SUBREAPER, Isolation,  # noqa: E402
                                                  prctl, setup_isolation, unshare)


def zygote_main(argv: list[str]) -> int:
    root, limits_json = argv[0], argv[1]
    limits = Limits(**json.loads(limits_json))
    os_isolation = "--no-os-isolation" not in argv
    try:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    except OSError:
        pass
    iso = setup_isolation(root, os_isolation)
    # Private protocol descriptors; fd 0/1 become /dev/null so pytest's own chatter goes nowhere.
    proto_in, proto_out = os.dup(0), os.dup(1)
    nul = os.open(os.devnull, os.O_RDWR)
    os.dup2(nul, 0)
    os.dup2(nul, 1)
    import pytest

    # run our loop before pytest's own (the plugin cannot import pytest at module level)
    ZygotePlugin.pytest_runtestloop = pytest.hookimpl(tryfirst=True)(ZygotePlugin.pytest_runtestloop)
    ZygotePlugin.pytest_runtest_logreport = pytest.hookimpl(tryfirst=True)(ZygotePlugin.pytest_runtest_logreport)
    ZygotePlugin.pytest_collectreport = pytest.hookimpl(tryfirst=True)(ZygotePlugin.pytest_collectreport)
    plugin = ZygotePlugin(root, limits, iso, proto_in, proto_out)
    args = [
        os.path.join(root, "empty"), "-s", "-p", "no:cacheprovider", "-p", "no:terminal",
        "--rootdir", root, "-c", os.path.join(root, "pytest.ini"), "--confcutdir", root,
    ]
    pytest.main(args, plugins=[plugin])
    return 0


class ZygotePlugin:
    """pytest plugin: takes over the run loop and serves requests; records reports in children."""

    def __init__(self, root: str, limits: Limits, iso: Isolation, proto_in: int, proto_out: int) -> None:
        self.root, self.limits, self.iso = root, limits, iso
        self.proto_in, self.proto_out = proto_in, proto_out
        self.collect_failures: list[Any] = []
        self.reports: list[Any] = []
        self.children: set[int] = set()

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collect_failures.append(report)

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.reports.append(report)

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
            write_line(self.proto_out, self._handle(session, req))

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
            return found
        ids: list[str] = list(req["test_ids"])
        measure = bool(req.get("coverage"))
        if measure:
            coverage_hooks().prepare()  # loaded here once, before the forks
        results: list[dict[str, Any]] = []
        while len(results) < len(ids):
            chain = Chain(self, session, moddir, collect_only=False)
            found = chain.collected()
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

    Processes: supervisor (trusted; new PID namespace; lives as long as the chain so that its
    pid makes the chain's uid unique) -> module process (PID 1 of the namespace, so a test
    can neither kill it nor escape its cleanup; own uid, limits; imports and collects the
    module once) -> one forked test process per request. The zygote enforces every deadline
    itself and ends the chain by killing the module process, whereupon the kernel kills
    everything in the namespace.
    """

    def __init__(self, plugin: ZygotePlugin, session: Any, moddir: str, collect_only: bool) -> None:
        self.plugin, self.limits = plugin, plugin.limits
        self.pidns = plugin.iso.pid_namespace
        self.alive, self.init_pid, self.test_pid = True, None, None
        ctrl_r, self.ctrl_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(self.ctrl_w)
                os.close(self.rep_r)
                chain_supervisor(plugin, session, moddir, collect_only, ctrl_r, rep_w)
            finally:
                os._exit(0)
        os.close(ctrl_r)
        os.close(rep_w)
        self.supervisor = pid
        self.reader = LineReader(self.rep_r, cap=1 << 20)
        plugin.children.add(pid)

    def collected(self) -> dict[str, Any]:
        """{"ids": [...], "error": ...}, or a status for every test when the module cannot be used."""
        deadline = time.monotonic() + self.limits.timeout_s
        while True:
            msg = self._next(deadline)
            if msg is None:
                timed_out = not self.reader.eof
                self.kill()
                if timed_out:
                    return {"ids": [], "error": f"timeout: importing the test module took over {self.limits.timeout_s:g} s",
                            "status": "timeout", "detail": f"importing the test module took over {self.limits.timeout_s:g} s"}
                return {"ids": [], "error": "crashed: the test module ended its process while importing",
                        "status": "crashed", "detail": "the test module ended its process while importing"}
            if "init" in msg:
                self.init_pid = msg["init"]
            elif "ids" in msg:
                if msg.get("error") and not msg["ids"]:
                    msg["status"], msg["detail"] = "error", "collection failed: " + msg["error"]
                return msg

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
            msg = self._next(deadline, prefix)
            seconds = round(time.monotonic() - start, 4)
            if msg is None:
                timed_out = not self.reader.eof
                self.kill()
                if timed_out:
                    return {"status": "timeout", "detail": f"timeout after {self.limits.timeout_s:g} s", "seconds": seconds}
                # Even with a report: a test that takes its sandbox down with it (kills its parent,
                # every process it can) counts as crashed, whichever won the race.
                return {"status": "crashed", "seconds": seconds,
                        "detail": "the test ended its sandbox (e.g. killed its parent process)"}
            if "report" in msg:
                report = msg["report"]
            elif "started" in msg:
                self.test_pid = msg.get("pid")
            elif msg.get("done") == test_id:
                if msg.get("missing"):
                    return {"status": "error", "detail": f"test id {test_id!r} not found when collecting again",
                            "seconds": seconds}
                if report is not None:
                    return {**report, "seconds": seconds}
                return {**crash_status(int(msg.get("code", 0)), "run"), "seconds": seconds}

    def _next(self, deadline: float, prefix: str | None = None) -> dict[str, Any] | None:
        """Next message from the chain; a test's report only with its nonce; None at the deadline or EOF."""
        while True:
            raw = self.reader.line(deadline)
            if raw is None:
                return None
            text = raw.decode("utf-8", "replace")
            if prefix is not None and text.startswith(prefix):
                try:
                    return {"report": json.loads(text[len(prefix):])}
                except ValueError:
                    continue
            if text.startswith("{"):
                try:
                    msg = json.loads(text)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    return msg

    def kill(self) -> None:
        """End the chain now: everything in its PID namespace dies with its init."""
        self.alive = False
        if self.init_pid:
            kill_pid(self.init_pid)
        if not self.pidns:
            for pid in (self.init_pid, self.test_pid):
                if pid:
                    kill_pid(pid, group=True)

    def close(self) -> None:
        """Let the module process exit (EOF on its requests); reaped later, off the critical path."""
        self.alive = False
        for fd in (self.ctrl_w, self.rep_r):
            try:
                os.close(fd)
            except OSError:
                pass


def chain_supervisor(plugin: ZygotePlugin, session: Any, moddir: str, collect_only: bool,
                     ctrl_r: int, rep_w: int) -> None:
    """Trusted: make the chain's directory and uid, enter a new PID namespace, start the module process
    (its PID 1), and stay until it ends so that this pid, and with it the uid, stays unique."""
    iso = plugin.iso
    for fd in (plugin.proto_in, plugin.proto_out):  # the host's pipes: only the zygote talks to the host
        os.close(fd)
    uid = _UID_BASE + os.getpid() if iso.own_uid else None
    workdir = os.path.join(plugin.root, "w", str(os.getpid()))
    os.mkdir(workdir, 0o700)
    if uid is not None:
        os.chown(workdir, uid, uid)
    if iso.pid_namespace:
        unshare(CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        try:
            module_process(plugin, session, moddir, collect_only, ctrl_r, rep_w, workdir, uid)
        finally:
            os._exit(70)
    write_line(rep_w, {"init": pid})
    os.close(rep_w)
    os.close(ctrl_r)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    if not iso.pid_namespace:
        kill_pid(pid, group=True)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--zygote"]:
    sys.stdout.flush()
    os._exit(zygote_main(sys.argv[2:]))
