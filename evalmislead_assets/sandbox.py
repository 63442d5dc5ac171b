"""Run untrusted pytest tests, each in its own hardened process, fast.

Process start-up (an interpreter plus pytest) costs far more than a generated test,
so each batch starts a few fresh *zygotes*: clean interpreters (started with
subprocess, never a fork of the caller) that import and configure pytest once and
then serve requests. Nothing from a generated module is ever imported into a zygote.

Per test module and version the zygote forks a *chain*: a supervisor that enters a
new PID namespace, the namespace's init, and the module process, which drops to a
user id of its own, imports and collects the module with pytest's own machinery,
then forks one fresh child per test id (so every test starts from the state right
after import) and runs it through pytest's runtest protocol. After each test the
module process kills whatever the test left running in the namespace.

Hardening: the only writable place is the batch directory (each test gets its own
temporary directory and cwd; the code under test is read-only to it); scrubbed
environment; limits on address space, file size (which also caps captured output),
open files, processes and CPU; no new privileges; no network (own network namespace);
every other mount read-only. The zygote enforces each time limit itself and ends a
chain by killing its init, whereupon the kernel kills every process in the namespace
(grandchildren that called setsid included); the next tests of that module continue
in a fresh chain. Where the OS refuses namespaces or we are not root, the rest is
still enforced and a warning says once what is missing.

A ``passed`` status needs positive evidence: a line carrying a per-test random nonce,
written by the harness over a pipe at a random descriptor number after pytest's
protocol returned with a passing call phase, from the original test process, and
followed by the module process's word that the test process has ended. An exit code
is never evidence: ``os._exit(0)`` reads as ``crashed``, ``sys.exit(0)`` as ``failed``.

On request (``Sandbox.run(..., coverage=True)``) each test process also records the arcs of
solution.py it executed, with coverage.py, and sends them with its result
(coverage_measure.py; loaded only then).

This module imports only the standard library at module level: the zygote runs it
as a script. The namespace, mount and prctl helpers live in sandbox_isolation.py.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import queue
import re
import resource
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

if __package__:
    from evalmislead_assets.sandbox_isolation import (CLONE_NEWPID, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS,
                                                      Isolation, prctl, setup_isolation, unshare)
else:  # the zygote runs this file as a script: its own folder is first on sys.path
    from sandbox_isolation import (CLONE_NEWPID, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, Isolation, prctl,
                                   setup_isolation, unshare)

MODULE_UNDER_TEST = "solution"  # tests import the code under test as `from solution import f`
TEST_FILE = "test_generated.py"
TEST_TIMEOUT_S = 10.0
STATUSES = ("passed", "failed", "error", "timeout", "crashed")

log = logging.getLogger(__name__)
_SANDBOX_FILE = os.path.abspath(__file__)
_UID_BASE = 200_000  # test processes run as uid/gid _UID_BASE + supervisor pid (unique while it runs)
_ZYGOTE_START_TIMEOUT_S = 120.0
_warned: set[str] = set()


@dataclass(frozen=True)
class Limits:
    timeout_s: float = TEST_TIMEOUT_S
    memory_mb: int = 1024  # RLIMIT_AS per process
    file_mb: int = 16  # RLIMIT_FSIZE: also caps captured output
    open_files: int = 256
    processes: int = 32  # RLIMIT_NPROC for the test's own uid
    detail_chars: int = 600


@dataclass(frozen=True)
class Module:
    """A test file and the code it tests (importable as `solution`)."""

    solution: str
    tests: str


@dataclass
class Collected:
    test_ids: list[str]
    error: str | None
    seconds: float


@dataclass
class Ran:
    status: str
    detail: str
    seconds: float
    coverage: dict[str, Any] | None = None  # run(coverage=True): the test process's payload (coverage_measure)


# --------------------------------------------------------------------------- host side


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


class Sandbox:
    """Collect and run tests in fresh zygotes; each call to collect()/run() is one batch."""

    def __init__(self, limits: Limits | None = None, workers: int | None = None,
                 os_isolation: bool = True, base_dir: str | None = None) -> None:
        self.limits = limits or Limits()
        self.workers = workers or default_workers()
        self.os_isolation = os_isolation
        self.base_dir = base_dir
        self.isolation: Isolation | None = None
        self._lock = threading.Lock()

    def collect(self, modules: Sequence[Module]) -> list[Collected]:
        """Test ids of each module as pytest names them ('test_x', 'TestA::test_b', 'test_p[1-2]')."""
        results = self._execute([("collect", m, None) for m in modules])
        out = []
        for r in results:
            if "ids" in r:
                out.append(Collected(list(r["ids"]), r.get("error"), float(r.get("seconds", 0.0))))
            else:
                out.append(Collected([], f"{r['status']}: {r['detail']}", float(r.get("seconds", 0.0))))
        return out

    def run(self, requests: Sequence[tuple[Module, str]], coverage: bool = False) -> list[Ran]:
        """Run each (module, test id) in its own process; one Ran per request, in order.

        Requests for the same module are served by one module process (one import and
        collection) that forks a fresh child per test. With ``coverage``, each test process
        also records which arcs of solution.py it executed (Ran.coverage; coverage_measure).
        """
        groups: dict[Module, list[int]] = {}
        for i, (module, _) in enumerate(requests):
            groups.setdefault(module, []).append(i)
        ops = [("run", m, [requests[i][1] for i in idx]) for m, idx in groups.items()]
        replies = self._execute(ops, coverage)
        out: list[Ran | None] = [None] * len(requests)
        for (module, idx), reply in zip(groups.items(), replies):
            results = reply.get("results") or [reply] * len(idx)
            for i, r in zip(idx, results):
                out[i] = Ran(r["status"], r.get("detail", ""), float(r.get("seconds", 0.0)), r.get("coverage"))
        return [r or Ran("crashed", "no result from the sandbox", 0.0) for r in out]

    def _execute(self, ops: list[tuple[str, Module, list[str] | None]], coverage: bool = False) -> list[dict[str, Any]]:
        if not ops:
            return []
        root = tempfile.mkdtemp(prefix="evalmislead-sandbox-", dir=self.base_dir)
        try:
            os.chmod(root, 0o755)
            dirs = _write_modules(root, [m for _, m, _ in ops])
            work: queue.Queue[int] = queue.Queue()
            for i in sorted(range(len(ops)), key=lambda i: -len(ops[i][2] or ())):  # longest first
                work.put(i)
            results: list[dict[str, Any] | None] = [None] * len(ops)
            n = min(self.workers, len(ops))
            threads = [
                threading.Thread(target=self._serve, args=(root, ops, dirs, work, results, coverage), daemon=True)
                for _ in range(n)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return [r or {"status": "crashed", "detail": "no result from the sandbox", "seconds": 0.0}
                    for r in results]
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _serve(self, root: str, ops: list[tuple[str, Module, list[str] | None]], dirs: dict[Module, str],
               work: queue.Queue[int], results: list[dict[str, Any] | None], coverage: bool = False) -> None:
        zygote: _Zygote | None = None
        failures = 0
        try:
            while True:
                try:
                    i = work.get_nowait()
                except queue.Empty:
                    return
                kind, module, test_ids = ops[i]
                request = {"op": kind, "dir": dirs[module], "test_ids": test_ids}
                if coverage:
                    request["coverage"] = True
                if zygote is None:
                    try:
                        zygote = _Zygote(root, self.limits, self.os_isolation)
                    except RuntimeError as exc:
                        failures += 1
                        results[i] = {"status": "crashed", "detail": str(exc)[:500], "seconds": 0.0}
                        if failures > 3:
                            return
                        continue
                    self._note_isolation(zygote.isolation)
                # the zygote enforces every limit itself; this only guards against the zygote hanging
                budget = (len(test_ids or ()) + 1) * (self.limits.timeout_s + 5.0) + 30.0
                reply = zygote.request(request, budget)
                if reply is None:
                    failures += 1
                    detail = f"sandbox zygote died or hung ({zygote.stderr_tail()})"
                    results[i] = {"status": "crashed", "detail": detail[:500], "seconds": 0.0}
                    zygote.close()
                    zygote = None
                else:
                    results[i] = reply
        finally:
            if zygote is not None:
                zygote.close()

    def _note_isolation(self, iso: Isolation) -> None:
        """Keep the weakest isolation any zygote of this sandbox got; warn once per kind of gap."""
        with self._lock:
            if self.isolation is None:
                self.isolation = iso
            else:
                old = self.isolation
                self.isolation = Isolation(
                    old.network and iso.network, old.readonly_fs and iso.readonly_fs,
                    old.pid_namespace and iso.pid_namespace, old.own_uid and iso.own_uid,
                    old.notes + [n for n in iso.notes if n not in old.notes])
            missing = iso.missing()
            key = ",".join(missing)
            if missing and key not in _warned:
                _warned.add(key)
                why = "; ".join(iso.notes) or "not available"
                log.warning("sandbox: running without %s (%s); time, memory, file, process and "
                            "output limits still apply", ", ".join(missing), why)


def _write_modules(root: str, modules: list[Module]) -> dict[Module, str]:
    dirs: dict[Module, str] = {}
    for name in ("empty", "w", "tmp", "warm"):
        os.mkdir(os.path.join(root, name), 0o755)
    for fname, text in ((f"{MODULE_UNDER_TEST}.py", _WARM_SOLUTION), (TEST_FILE, _WARM_TESTS)):
        with open(os.path.join(root, "warm", fname), "w", encoding="utf-8") as fh:
            fh.write(text)
    with open(os.path.join(root, "pytest.ini"), "w") as fh:
        fh.write("[pytest]\naddopts =\n")
    for m in modules:
        if m in dirs:
            continue
        rel = f"m{len(dirs)}"
        path = os.path.join(root, rel)
        os.mkdir(path, 0o755)
        for fname, text in ((f"{MODULE_UNDER_TEST}.py", m.solution), (TEST_FILE, m.tests)):
            with open(os.path.join(path, fname), "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(os.path.join(path, fname), 0o644)
        dirs[m] = rel
    return dirs


_WARM_SOLUTION = "def identity(x):\n    return x\n"
_WARM_TESTS = """
import pytest
from solution import identity

@pytest.fixture
def _evalmislead_warm_value():
    return 1

@pytest.mark.parametrize("x", [1, "a"])
def test_param(x, _evalmislead_warm_value):
    assert identity(x) == x

class TestWarm:
    def test_method(self):
        assert identity([1]) == [1]

def test_fails():
    assert identity(1) == 2

def test_fails_on_containers():
    assert identity([1, 2, {"a": "xyz"}]) == [1, 3, {"a": "xyw"}]

def test_raises_and_approx():
    with pytest.raises(ZeroDivisionError):
        identity(1) / 0
    assert identity(0.1 + 0.2) == pytest.approx(0.3)
"""


def scrubbed_env(home: str) -> dict[str, str]:
    """The whole environment a zygote or test sees."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "HOME": home, "TMPDIR": home, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    }


class _Zygote:
    """Host handle on one zygote process: JSON lines over its stdin/stdout."""

    def __init__(self, root: str, limits: Limits, os_isolation: bool) -> None:
        self.err = tempfile.TemporaryFile(dir=root)
        args = [sys.executable, "-s", "-B", _SANDBOX_FILE, "--zygote", root, json.dumps(asdict(limits))]
        if not os_isolation:
            args.append("--no-os-isolation")
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, cwd=root,
            env=scrubbed_env(os.path.join(root, "tmp")), start_new_session=True, close_fds=True,
        )
        self._buf = b""
        ready = self._read_line(_ZYGOTE_START_TIMEOUT_S)
        if ready is None or "ready" not in ready:
            tail = self.stderr_tail()
            self.close()
            raise RuntimeError(f"sandbox zygote failed to start: {tail}")
        self.isolation = Isolation(**ready["isolation"])

    def request(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self._read_line(timeout_s)

    def _read_line(self, timeout_s: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
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
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.err.close()


# --------------------------------------------------------------------------- zygote side


class _ZygotePlugin:
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
        _write_line(self.proto_out, {"ready": True, "isolation": asdict(self.iso)})
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
            _write_line(self.proto_out, self._handle(session, req))

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
            chain = _Chain(self, session, moddir, collect_only=True)
            found = chain.collected()
            chain.close()
            found["seconds"] = round(time.monotonic() - start, 4)
            return found
        ids: list[str] = list(req["test_ids"])
        measure = bool(req.get("coverage"))
        if measure:
            _coverage_hooks().prepare()  # loaded here once, before the forks
        results: list[dict[str, Any]] = []
        while len(results) < len(ids):
            chain = _Chain(self, session, moddir, collect_only=False)
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
        _reap_orphans()


class _Chain:
    """Zygote-side handle on one sandboxed module process and the tests it forks.

    Processes: supervisor (trusted; new PID namespace; lives as long as the chain so that its
    pid makes the chain's uid unique) -> module process (PID 1 of the namespace, so a test
    can neither kill it nor escape its cleanup; own uid, limits; imports and collects the
    module once) -> one forked test process per request. The zygote enforces every deadline
    itself and ends the chain by killing the module process, whereupon the kernel kills
    everything in the namespace.
    """

    def __init__(self, plugin: _ZygotePlugin, session: Any, moddir: str, collect_only: bool) -> None:
        self.plugin, self.limits = plugin, plugin.limits
        self.pidns = plugin.iso.pid_namespace
        self.alive, self.init_pid, self.test_pid = True, None, None
        self._buf, self._eof = b"", False
        ctrl_r, self.ctrl_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(self.ctrl_w)
                os.close(self.rep_r)
                _chain_supervisor(plugin, session, moddir, collect_only, ctrl_r, rep_w)
            finally:
                os._exit(0)
        os.close(ctrl_r)
        os.close(rep_w)
        self.supervisor = pid
        plugin.children.add(pid)

    def collected(self) -> dict[str, Any]:
        """{"ids": [...], "error": ...}, or a status for every test when the module cannot be used."""
        deadline = time.monotonic() + self.limits.timeout_s
        while True:
            msg = self._next(deadline)
            if msg is None:
                timed_out = not self._eof
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
            _write_line(self.ctrl_w, {"test_id": test_id, "nonce": nonce, **({"coverage": True} if coverage else {})})
        except OSError:
            self.alive = False
            return {"status": "crashed", "detail": "the sandbox process died before the test started", "seconds": 0.0}
        report: dict[str, Any] | None = None
        while True:
            msg = self._next(deadline, prefix)
            seconds = round(time.monotonic() - start, 4)
            if msg is None:
                timed_out = not self._eof
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
                return {**_crash(int(msg.get("code", 0)), "run"), "seconds": seconds}

    def _next(self, deadline: float, prefix: str | None = None) -> dict[str, Any] | None:
        """Next message from the chain; a test's report only with its nonce; None at the deadline or EOF."""
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                text = line.decode("utf-8", "replace")
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
            if self._eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.rep_r], [], [], remaining)
            if ready:
                chunk = os.read(self.rep_r, 65536)
                if chunk:
                    self._buf = (self._buf + chunk)[-(1 << 20):]
                else:
                    self._eof = True

    def kill(self) -> None:
        """End the chain now: everything in its PID namespace dies with its init."""
        self.alive = False
        if self.init_pid:
            _kill(self.init_pid)
        if not self.pidns:
            for pid in (self.init_pid, self.test_pid):
                if pid:
                    _killpg(pid)

    def close(self) -> None:
        """Let the module process exit (EOF on its requests); reaped later, off the critical path."""
        self.alive = False
        for fd in (self.ctrl_w, self.rep_r):
            try:
                os.close(fd)
            except OSError:
                pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap_orphans() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _write_line(fd: int, obj: dict[str, Any]) -> None:
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _crash(code: int, op: str) -> dict[str, Any]:
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


def _chain_supervisor(plugin: _ZygotePlugin, session: Any, moddir: str, collect_only: bool,
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
            _module_process(plugin, session, moddir, collect_only, ctrl_r, rep_w, workdir, uid)
        finally:
            os._exit(70)
    _write_line(rep_w, {"init": pid})
    os.close(rep_w)
    os.close(ctrl_r)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    if not iso.pid_namespace:
        _killpg(pid)
    shutil.rmtree(workdir, ignore_errors=True)


def _private_fd(fd: int, exclude: set[int]) -> int:
    """Move fd to a random high number the tests cannot guess from the usual small ones."""
    while True:
        target = 100 + secrets.randbelow(150)
        if target not in exclude and target != fd:
            os.dup2(fd, target)
            os.close(fd)
            return target


def _module_process(plugin: _ZygotePlugin, session: Any, moddir: str, collect_only: bool, ctrl_r: int,
                    rep_w: int, workdir: str, uid: int | None) -> None:
    """Untrusted from here on: drop privileges, import and collect the module once, fork one child per test."""
    try:
        limits = plugin.limits
        os.setsid()
        log_fd = os.open(os.path.join(workdir, "collect.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if uid is not None:
            os.fchown(log_fd, uid, uid)
        nul = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nul, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        rep_w = _private_fd(rep_w, set())
        ctrl_r = _private_fd(ctrl_r, {rep_w})
        low, high = min(rep_w, ctrl_r), max(rep_w, ctrl_r)
        os.closerange(3, low)
        os.closerange(low + 1, high)
        os.closerange(high + 1, 1 << 16)
        os.environ.clear()
        os.environ.update(scrubbed_env(workdir))
        tempfile.tempdir = workdir
        os.chdir(workdir)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized writes raise OSError instead of killing
        mb = 1 << 20
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mb, limits.file_mb * mb))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        if uid is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        try:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
        except OSError:
            pass
        sys.dont_write_bytecode = True
        me = os.getpid()
        items, error = _collect(plugin, session, moddir)
        if os.getpid() != me:  # module code forked and returned into the harness
            os._exit(0)
        ids = [_test_id(item) for item in items] if items is not None and not error else []
        _write_line(rep_w, {"ids": ids, "error": error[: limits.detail_chars] if error else None})
        if collect_only or not ids:
            return
        by_id = dict(zip(ids, items or []))
        probe = None  # coverage_measure.Probe, built on the first request that asks for coverage
        reader = os.fdopen(ctrl_r, "rb", buffering=0)
        buf = b""
        while True:
            while b"\n" not in buf:
                chunk = reader.read(4096)
                if not chunk:
                    return
                buf += chunk
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            item = by_id.get(req["test_id"])
            if item is None:
                _write_line(rep_w, {"done": req["test_id"], "missing": True})
                continue
            if req.get("coverage") and probe is None:
                probe = _coverage_hooks().Probe(os.path.join(moddir, f"{MODULE_UNDER_TEST}.py"))
            code = _fork_test(plugin, item, req["nonce"], rep_w, ctrl_r, workdir, uid,
                              probe if req.get("coverage") else None)
            _write_line(rep_w, {"done": req["test_id"], "code": code})
    finally:
        os._exit(0)


def _fork_test(plugin: _ZygotePlugin, item: Any, nonce: str, rep_w: int, ctrl_r: int, workdir: str,
               uid: int | None, probe: Any = None) -> int:
    """Run one collected item in a fresh child (own session, directory); clean up after it; its exit code."""
    testdir = tempfile.mkdtemp(dir=workdir)
    pid = os.fork()
    if pid == 0:
        _test_child(plugin, item, nonce, rep_w, ctrl_r, testdir, probe)
    _write_line(rep_w, {"started": True, "pid": pid})
    _, status = os.waitpid(pid, 0)
    if plugin.iso.pid_namespace:
        # This process is the namespace's init: kill whatever the test left running (kill(-1)
        # spares init and the caller) and reap it, as orphans are reparented here.
        try:
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _reap_all(time.monotonic() + 2.0)
    else:
        _killpg(pid)
    shutil.rmtree(testdir, ignore_errors=True)
    return os.waitstatus_to_exitcode(status)


def _reap_all(deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.001)


def _test_child(plugin: _ZygotePlugin, item: Any, nonce: str, rep_w: int, ctrl_r: int, testdir: str,
                probe: Any = None) -> None:
    """The test process: report once, from this pid only, after pytest's protocol returned."""
    try:
        limits = plugin.limits
        os.setsid()
        os.close(ctrl_r)
        out = os.open(os.path.join(testdir, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.environ["HOME"] = os.environ["TMPDIR"] = testdir
        tempfile.tempdir = testdir
        os.chdir(testdir)
        cpu = int(limits.timeout_s) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        me = os.getpid()
        plugin.reports.clear()
        if probe is not None:
            probe.start()
        try:
            item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
            status, detail = _status(plugin.reports)
        except BaseException as exc:  # pytest.exit() or KeyboardInterrupt inside the test, or a broken hook
            if any(r.when == "call" for r in plugin.reports):
                status, detail = _status(plugin.reports)
                status = "error" if status == "passed" else status  # the protocol did not finish
            else:
                status, detail = "error", f"{type(exc).__name__}: {exc}"
        if os.getpid() != me:  # a fork of the test that returned into the harness: not evidence
            os._exit(0)
        report: dict[str, Any] = {"status": status, "detail": detail[: limits.detail_chars]}
        if probe is not None:  # a failing test still reports the lines it ran
            report["coverage"] = probe.stop()
        line = (nonce + "\t" + json.dumps(report) + "\n").encode()
        while line:
            line = line[os.write(rep_w, line):]
    finally:
        os._exit(0)


def _coverage_hooks() -> Any:
    """coverage_measure, imported only when a request asks for coverage (the normal path never loads it)."""
    if __package__:
        from evalmislead_assets import coverage_measure
    else:  # the zygote runs this file as a script
        import coverage_measure
    return coverage_measure


def _collect(plugin: _ZygotePlugin, session: Any, moddir: str) -> tuple[list[Any] | None, str | None]:
    try:
        items = session.perform_collect([os.path.join(moddir, TEST_FILE)])
    except BaseException as exc:  # UsageError, or something the module raised past pytest
        return None, f"{type(exc).__name__}: {exc}"
    if plugin.collect_failures:
        return None, _collect_error(plugin.collect_failures, moddir)
    return list(items), None


def _test_id(item: Any) -> str:
    return item.nodeid.split("::", 1)[1] if "::" in item.nodeid else item.nodeid


def _status(reports: list[Any]) -> tuple[str, str]:
    """pytest's setup/call/teardown reports -> one status; passed only if the call phase passed."""
    by = {r.when: r for r in reports}
    setup, call, teardown = by.get("setup"), by.get("call"), by.get("teardown")
    if setup is None:
        return "error", "no setup report"
    if setup.failed:
        return "error", "setup: " + _short(setup)
    if setup.skipped:
        return _skipped(setup)
    if call is None:
        return "error", "no call report"
    if call.failed:
        return "failed", _short(call)
    if call.skipped:
        return _skipped(call)
    if teardown is not None and teardown.failed:
        return "error", "teardown: " + _short(teardown)
    return "passed", ""


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


def _collect_error(failures: list[Any], moddir: str) -> str:
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


def _zygote_main(argv: list[str]) -> int:
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
    _ZygotePlugin.pytest_runtestloop = pytest.hookimpl(tryfirst=True)(_ZygotePlugin.pytest_runtestloop)
    _ZygotePlugin.pytest_runtest_logreport = pytest.hookimpl(tryfirst=True)(_ZygotePlugin.pytest_runtest_logreport)
    _ZygotePlugin.pytest_collectreport = pytest.hookimpl(tryfirst=True)(_ZygotePlugin.pytest_collectreport)
    plugin = _ZygotePlugin(root, limits, iso, proto_in, proto_out)
    args = [
        os.path.join(root, "empty"), "-s", "-p", "no:cacheprovider", "-p", "no:terminal",
        "--rootdir", root, "-c", os.path.join(root, "pytest.ini"), "--confcutdir", root,
    ]
    pytest.main(args, plugins=[plugin])
    return 0


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--zygote":
    sys.stdout.flush()
    code = _zygote_main(sys.argv[2:])
    os._exit(code)
