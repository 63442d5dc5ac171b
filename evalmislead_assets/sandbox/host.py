"""Run untrusted pytest tests, each in its own hardened process, fast: the host side.

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

Hardening (the trust model is in docs/sandbox.md, "The runner's trust model"): each run sees only a
read-only tmpfs holding its own module folder (read-only, always at ``<batch>/m``) and a fresh,
size-limited work folder (the only place a test can write, emptied between test ids), its own PID,
mount, IPC and network namespaces and its own /proc; every other mount is read-only; a test's
stdout/stderr are not file objects; scrubbed environment; limits on address space, file size (which also caps captured
output), open files, processes and CPU; no new privileges; not dumpable. As root each chain runs
as a uid of its own; as a normal user the zygote first enters a user namespace mapped to the
invoking user and drops its capabilities before test code runs. The zygote enforces each time
limit itself and ends a chain by closing its kill pipe: the chain's supervisor then kills its own
child, the namespace's init, through a pidfd, whereupon the kernel kills every process in the
namespace; no process id ever comes from the test's side. The next tests of that module continue
in a fresh chain. Where the OS refuses namespaces the rest is still enforced and a warning says
once what is missing.

Tampering: the host scans each file before running it (tamper_scan.py) and an audit hook plus
a harness fingerprint watch it at run time (guard.py); a caught test is ``tampered``.

A ``passed`` status needs positive evidence: a line carrying a per-test random nonce,
written by the harness over a pipe at a random descriptor number after pytest's
protocol returned with a passing call phase, from the original test process, and
followed by the module process's word that the test process has ended. An exit code
is never evidence: ``os._exit(0)`` reads as ``crashed``, ``sys.exit(0)`` as ``failed``.

On request (``Sandbox.run(..., coverage=True)``) each test process also records the arcs of
solution.py it executed, with coverage.py, and sends them with its result
(coverage_probe.py; loaded only then).

The modules, host to test process:

- ``limits.py``: ``Limits`` and how they fit under the host's own hard limits.
- ``host.py`` (this one): ``Sandbox``, ``Module``, ``Collected``, ``Ran``,
  the batch directory and the worker threads that feed the zygotes; what both sides share
  (file names, ``STATUSES``, ``scrubbed_env``).
- ``ipc.py``: the line protocol, reading with deadlines, the host's zygote handle.
- ``protocol.py``: the fixed shapes of the chain's messages and their parser.
- ``tamper_scan.py`` / ``guard.py``: the static scan (host) and the runtime tamper checks.
- ``zygote.py``: the zygote (started as a script), its pytest plugin and the chains.
- ``child.py``: inside a chain: the module process, the per-test child, the status
  mapping.
- ``isolation.py``: namespaces, read-only mounts, prctl.

All of them import only the standard library at module level: the zygote imports them.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evalmislead_assets.sandbox import seccomp, tamper_scan
from evalmislead_assets.sandbox.ipc import ZygoteProcess
from evalmislead_assets.sandbox.isolation import Isolation, first_closed_dir
from evalmislead_assets.sandbox.limits import (  # noqa: F401
    LIMIT_STATUSES,
    MAX_ID_CHARS,
    MAX_TESTS,
    TEST_TIMEOUT_S,
    Limits,  # Limits and its constants are named through host too
    TooLow,
    fit_to_host,
)

MODULE_UNDER_TEST = "solution"  # tests import the code under test as `from solution import f`
TEST_FILE = "test_generated.py"
# "tampered": see tamper_scan.py and guard.py; "limit:*": the run ended on one of the runner's caps (limits.py)
STATUSES = ("passed", "failed", "error", "timeout", "crashed", "tampered", *LIMIT_STATUSES)

log = logging.getLogger(__name__)
_ZYGOTE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote.py")
UID_BASE = 200_000  # test processes run as uid/gid UID_BASE + supervisor pid (unique while it runs)
_ZYGOTE_START_TIMEOUT_S = 120.0
_warned: set[str] = set()


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
    coverage: dict[str, Any] | None = None  # run(coverage=True): the test process's payload (coverage_probe.py)


# --------------------------------------------------------------------------- host side


class SandboxUnavailable(RuntimeError):
    """No test runner could be started: an environment fault, never a verdict on the tests (one line)."""


_START_ATTEMPTS = 3
_LOW_SPACE = 4 << 20  # bytes free below which a failed set-up is blamed on the sandbox folder's disk


def _space_note(folder: str | None) -> str:
    """'; the sandbox folder X has N KiB free ...' when the folder the sandbox writes in is (nearly) full."""
    where = folder or tempfile.gettempdir()
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return ""
    if free >= _LOW_SPACE:
        return ""
    return f"; the sandbox folder {where} has {free >> 10} KiB free: free space there or point TMPDIR at a folder with room"


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


class Sandbox:
    """Collect and run tests in fresh zygotes; each call to collect()/run() is one batch."""

    def __init__(self, limits: Limits | None = None, workers: int | None = None,
                 os_isolation: bool = True, base_dir: str | None = None, static_scan: bool = True) -> None:
        """``static_scan=False`` runs flagged files anyway: only for testing the runtime defences."""
        self.static_scan = static_scan
        self.limits = limits or Limits()
        self.workers = workers or default_workers()
        self.os_isolation = os_isolation
        self.base_dir = base_dir
        self.isolation: Isolation | None = None
        self._lock = threading.Lock()

    def with_limits(self, limits: Limits) -> Sandbox:
        """This sandbox with other limits (a mutant run's shorter time limit); a subclass stays itself."""
        return type(self)(limits, workers=self.workers, os_isolation=self.os_isolation, base_dir=self.base_dir)

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
        also records which arcs of solution.py it executed (Ran.coverage; coverage_probe.py).
        """
        groups: dict[Module, list[int]] = {}
        out: list[Ran | None] = [None] * len(requests)
        flagged: dict[str, str | None] = {}
        for i, (module, _test_id) in enumerate(requests):
            if module.tests not in flagged:
                flagged[module.tests] = tamper_scan.scan(module.tests) if self.static_scan else None
            why = flagged[module.tests]
            if why:  # decided on the host before any of the file runs: nothing inside it can change this
                out[i] = Ran("tampered", f"reaches into the test harness: {why}"[: self.limits.detail_chars], 0.0)
            else:
                groups.setdefault(module, []).append(i)
        ops: list[tuple[str, Module, list[str] | None]] = [("run", m, [requests[i][1] for i in idx])
                                                          for m, idx in groups.items()]
        replies = self._execute(ops, coverage)
        for (_module, idx), reply in zip(groups.items(), replies):
            results = reply.get("results") or [reply] * len(idx)
            for i, r in zip(idx, results):
                out[i] = Ran(r["status"], r.get("detail", ""), float(r.get("seconds", 0.0)), r.get("coverage"))
        return [r or Ran("crashed", "no result from the sandbox", 0.0) for r in out]

    def _execute(self, ops: list[tuple[str, Module, list[str] | None]], coverage: bool = False) -> list[dict[str, Any]]:
        if not ops:
            return []
        if self.base_dir and self.os_isolation and os.geteuid() == 0:
            closed = first_closed_dir(os.path.realpath(self.base_dir))
            if closed:  # the tests' own uid could not reach their files: every file would "fail to collect"
                raise SandboxUnavailable(
                    f"the sandbox base folder {self.base_dir} is below {closed[0]}, which other users cannot "
                    "enter; the tests run as a user of their own: use a folder every user can traverse (e.g. /tmp)")
        limits = self.host_limits()
        missing = seccomp.unavailable()
        if missing:  # every test process is filtered (kernel_state.py): never run one without
            raise SandboxUnavailable(missing)
        try:
            root = tempfile.mkdtemp(prefix="evalmislead-sandbox-", dir=self._batch_parent())
        except OSError as exc:
            raise SandboxUnavailable(f"the test sandbox cannot make its folder ({exc.strerror or exc})"
                                     f"{_space_note(self.base_dir)}; nothing was recorded for this batch") from None
        try:
            os.chmod(root, 0o755)
            try:
                dirs = _write_modules(root, [m for _, m, _ in ops])
            except OSError as exc:
                raise SandboxUnavailable(f"the test sandbox cannot write the tests' files in {root} "
                                         f"({exc.strerror or exc}){_space_note(self.base_dir)}; nothing was "
                                         "recorded for this batch") from None
            work: queue.Queue[int] = queue.Queue()
            for i in sorted(range(len(ops)), key=lambda i: -len(ops[i][2] or ())):  # longest first
                work.put(i)
            results: list[dict[str, Any] | None] = [None] * len(ops)
            n = min(self.workers, len(ops))
            start_errors: list[str] = []
            threads = [
                threading.Thread(target=self._serve,
                                 args=(root, limits, ops, dirs, work, results, coverage, start_errors), daemon=True)
                for _ in range(n)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            runner_errors = [r["runner_error"] for r in results if r is not None and "runner_error" in r]
            if runner_errors:  # set-up failed before any test code ran: recording it would read as zero tests
                raise SandboxUnavailable(
                    f"{runner_errors[0][:300]}{_space_note(self.base_dir)}; nothing was recorded for this batch: fix "
                    "the host (its limits, mounts, free space) and re-run")
            if start_errors and any(r is None for r in results):
                # No test code runs before a zygote is ready, so this is the machine, not the tests: recording
                # the unserved files as "crashed" would silently turn them into zero tests.
                raise SandboxUnavailable(
                    f"the test sandbox could not start a runner ({start_errors[0][:300]}){_space_note(self.base_dir)}; "
                    "nothing was recorded for this batch: check free memory, processes and disk space, then re-run")
            return [r or {"status": "crashed", "detail": "no result from the sandbox", "seconds": 0.0}
                    for r in results]
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _serve(self, root: str, limits: Limits, ops: list[tuple[str, Module, list[str] | None]], dirs: dict[Module, str],
               work: queue.Queue[int], results: list[dict[str, Any] | None], coverage: bool = False,
               start_errors: list[str] | None = None) -> None:
        zygote: ZygoteProcess | None = None
        failures = 0
        zroot = self._zygote_root(root)
        prefix = "" if zroot == root else os.path.relpath(root, zroot)  # the batch folder as the zygote names it
        try:
            while True:
                try:
                    i = work.get_nowait()
                except queue.Empty:
                    return
                kind, module, test_ids = ops[i]
                request: dict[str, Any] = {"op": kind, "dir": os.path.join(prefix, dirs[module]) if prefix else dirs[module],
                                           "test_ids": test_ids}
                if coverage:
                    request["coverage"] = True
                if zygote is None:
                    zygote = self._idle_zygote(limits, coverage)
                if zygote is None:
                    for _attempt in range(_START_ATTEMPTS):
                        try:
                            zygote = start_zygote(zroot, limits, self.os_isolation)
                            break
                        except RuntimeError as exc:
                            last = str(exc)
                    if zygote is None:
                        # the op stays unserved (None): _execute raises SandboxUnavailable
                        if start_errors is not None:
                            start_errors.append(last)
                        return
                    self._note_isolation(Isolation(**zygote.ready["isolation"]))
                # the zygote enforces every limit itself; this only guards against the zygote hanging
                budget = (len(test_ids or ()) + 1) * (limits.timeout_s + 5.0) + 30.0
                reply = zygote.request(request, budget)
                if reply is None:
                    failures += 1
                    detail = f"sandbox zygote died or hung ({zygote.stderr_tail()})"
                    results[i] = {"status": "crashed", "detail": detail[:500], "seconds": 0.0}
                    zygote.close()
                    zygote = None
                else:
                    results[i] = reply
                    if "runner_error" in reply:  # the batch fails: leave the rest of the work undone
                        _drain(work)
        finally:
            if zygote is not None:
                self._release_zygote(zygote, limits, coverage)

    # The zygotes' life: here one batch (each starts in the batch folder and is closed after it); WarmSandbox
    # keeps them between batches.
    def _batch_parent(self) -> str | None:
        """The folder the batch folder is made in."""
        return self.base_dir

    def _zygote_root(self, batch_root: str) -> str:
        """The folder a zygote of this batch is started in (its root)."""
        return batch_root

    def _idle_zygote(self, limits: Limits, coverage: bool) -> ZygoteProcess | None:
        """A running zygote left by an earlier batch, or None: start one."""
        return None

    def _release_zygote(self, zygote: ZygoteProcess, limits: Limits, coverage: bool) -> None:
        """A zygote whose batch has no more work for it."""
        zygote.close()

    def host_limits(self) -> Limits:
        """The limits the chains get: ``self.limits`` fitted under this process's hard limits (a warning, once per
        change, says what was lowered); SandboxUnavailable, one line, when one would be too low to run pytest."""
        try:
            limits, notes = fit_to_host(self.limits)
        except TooLow as exc:
            raise SandboxUnavailable(str(exc)) from None
        key = "limits:" + "; ".join(notes)
        if notes and key not in _warned:
            _warned.add(key)
            log.warning("sandbox: lowered to what this host allows: %s; tests that need more fail as they would "
                        "on any machine with these limits", "; ".join(notes))
        return limits

    def _note_isolation(self, iso: Isolation) -> None:
        """Keep the weakest isolation any zygote of this sandbox got; warn once per kind of gap."""
        with self._lock:
            if self.isolation is None:
                self.isolation = iso
            else:
                old = self.isolation
                self.isolation = weakest(old, iso)
            missing = iso.missing()
            key = ",".join(missing)
            if missing and key not in _warned:
                _warned.add(key)
                why = "; ".join(iso.notes) or "not available"
                log.warning("sandbox: running without %s (%s); time, memory, file, process and "
                            "output limits still apply", ", ".join(missing), why)


class WarmSandbox(Sandbox):
    """A sandbox whose zygotes serve batch after batch (a long-lived process, e.g. a Dask worker, that runs many
    small batches): each batch's folder is made inside one folder that stays (``home``), the zygotes are started
    there, and a zygote that is still running when its batch ends waits for the next batch with the same limits
    (and the same coverage setting: a zygote that loaded coverage.py serves only coverage batches).

    Only where each run sees nothing of that folder but its own module (``chain_namespaces``: a fresh tmpfs over
    the folder in every chain, so nothing a test writes outlives its run): once a zygote reports less, every later
    batch runs as in ``Sandbox``, in a folder of its own with zygotes of its own. ``close()`` ends the waiting
    zygotes and removes the folder."""

    def __init__(self, limits: Limits | None = None, workers: int | None = None,
                 os_isolation: bool = True, base_dir: str | None = None, static_scan: bool = True) -> None:
        super().__init__(limits, workers=workers, os_isolation=os_isolation, base_dir=base_dir,
                         static_scan=static_scan)
        self.home: str | None = None
        self._idle: dict[tuple[Limits, bool], list[ZygoteProcess]] = {}
        self.started = 0  # zygotes started (a measure of how warm the batches ran)

    def _warm(self) -> bool:
        """Whether batches share the zygotes: until a zygote reports no per-run tmpfs."""
        return self.isolation is None or self.isolation.chain_namespaces

    def _batch_parent(self) -> str | None:
        with self._lock:
            if not self._warm():
                return self.base_dir
            if self.home is None:
                home = tempfile.mkdtemp(prefix="evalmislead-warm-", dir=self.base_dir)
                os.chmod(home, 0o755)
                _write_modules(home, [])  # what a zygote's root holds: empty/, w/, tmp/, warm/, pytest.ini
                self.home = home
            return self.home

    def _zygote_root(self, batch_root: str) -> str:
        home = self.home
        return home if home is not None and os.path.dirname(batch_root) == home else batch_root

    def _idle_zygote(self, limits: Limits, coverage: bool) -> ZygoteProcess | None:
        if not self._warm():  # this batch has a folder of its own; the waiting zygotes serve only the home's
            return None
        with self._lock:
            idle = self._idle.get((limits, coverage), [])
            while idle:
                zygote = idle.pop()
                if zygote.proc.poll() is None:
                    return zygote
                zygote.close()
        return None

    def _release_zygote(self, zygote: ZygoteProcess, limits: Limits, coverage: bool) -> None:
        if zygote.proc.poll() is None and zygote.ready.get("isolation", {}).get("chain_namespaces") and self._warm():
            with self._lock:
                self._idle.setdefault((limits, coverage), []).append(zygote)
            return
        zygote.close()

    def _note_isolation(self, iso: Isolation) -> None:
        self.started += 1
        super()._note_isolation(iso)

    def close(self) -> None:
        with self._lock:
            idle = [z for zs in self._idle.values() for z in zs]
            self._idle.clear()
            home, self.home = self.home, None
        for zygote in idle:
            zygote.close()
        if home:
            shutil.rmtree(home, ignore_errors=True)


def _drain(work: queue.Queue[int]) -> None:
    while True:
        try:
            work.get_nowait()
        except queue.Empty:
            return


def weakest(a: Isolation, b: Isolation) -> Isolation:
    """The isolation both got."""
    return Isolation(a.network and b.network, a.readonly_fs and b.readonly_fs, a.pid_namespace and b.pid_namespace,
                     a.own_uid and b.own_uid, a.notes + [n for n in b.notes if n not in a.notes],
                     a.user_namespace or b.user_namespace, a.chain_namespaces and b.chain_namespaces,
                     a.test_namespaces and b.test_namespaces)


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
            # a lone surrogate (UTF-8 cannot hold it) is written as its \uXXXX escape: the file as the
            # warehouse stores it, so collection and the later run read the same text
            with open(os.path.join(path, fname), "w", encoding="utf-8", errors="backslashreplace") as fh:
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


def start_zygote(root: str, limits: Limits, os_isolation: bool) -> ZygoteProcess:
    """A fresh zygote for the batch in ``root``, ready to serve (RuntimeError when it does not start)."""
    args = [sys.executable, "-s", "-B", _ZYGOTE_SCRIPT, "--zygote", root]
    if not os_isolation:
        args.append("--no-os-isolation")
    return ZygoteProcess(args, root, scrubbed_env(os.path.join(root, "tmp")), _ZYGOTE_START_TIMEOUT_S,
                         first_line=asdict(limits))
