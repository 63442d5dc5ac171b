"""Inside a sandbox chain: the module process and the per-test child (untrusted code runs here).

The module process (the chain's PID 1 where there is a PID namespace) drops to the chain's
user id, sets the limits, imports and collects the test module once with pytest's own
machinery and then, per request, forks one test child, waits for it and kills whatever it
left running. The test child runs pytest's runtest protocol and reports once, with the
request's nonce, from its own pid only. The mapping of pytest's reports and of exit codes to
the statuses is in verdicts.py.

Standard library only at module level: the zygote imports it.
"""

from __future__ import annotations

import functools
import io
import json
import os
import resource
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from evalmislead_assets.sandbox import guard as sandbox_guard
from evalmislead_assets.sandbox.host import MODULE_UNDER_TEST, TEST_FILE, scrubbed_env
from evalmislead_assets.sandbox.import_files import Snapshot as ImportSnapshot
from evalmislead_assets.sandbox.ipc import write_line
from evalmislead_assets.sandbox.isolation import PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, drop_capabilities, mount_own_proc, prctl
from evalmislead_assets.sandbox.kernel_state import hide_key_lists
from evalmislead_assets.sandbox.limits import CHAIN_PROCESSES
from evalmislead_assets.sandbox.limits import clamp as limit_to_host
from evalmislead_assets.sandbox.verdicts import collect_error, status_of

# The zygote's pytest plugin (zygote.ZygotePlugin), which calls into this module: named loosely here,
# so that child never imports the module that imports it (no cycle, not even a type-only one).
ZygotePlugin = Any


def replace_environment(env: dict[str, str]) -> None:
    """Replace this test process's environment with the scrubbed one (the host's settings never reach a test)."""
    os.environ.clear()
    os.environ.update(env)


def kill_pid(pid: int, group: bool = False) -> None:
    """SIGKILL a process, or the process group it leads, by number; one gone or out of reach is left alone."""
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reap(deadline: float | None = None) -> None:
    """Reap ended children: those ended by now, or, with a deadline, every child until then."""
    while deadline is None or time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if deadline is None:
                return
            time.sleep(0.001)


def sweep_children(rounds: int = 50) -> None:
    """Kill and reap every process reparented to this subreaper (only without a PID namespace are there any).

    Each pid signalled is a child of this process that it has not reaped, so the number cannot
    belong to anyone else.
    """
    me = os.getpid()
    for _ in range(rounds):
        kids = _children(me)
        if not kids:
            return
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _pid in kids:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                return


def _children(me: int) -> list[int]:
    try:
        with open(f"/proc/{me}/task/{me}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        pass
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _private_fd(fd: int, exclude: set[int], ceiling: int) -> int:
    """Move fd to a random high number (below ``ceiling``, the open-file limit) the tests cannot guess from
    the usual small ones."""
    high = min(250, ceiling)
    low = min(100, high // 2)
    while True:
        target = low + secrets.randbelow(high - low)
        if target not in exclude and target != fd:
            os.dup2(fd, target)
            os.close(fd)
            return target


def module_process(plugin: ZygotePlugin, session: Any, moddir: str, collect_only: bool, ctrl_r: int,
                   rep_w: int, workdir: str, uid: int | None) -> None:
    """Untrusted from here on: drop privileges, import and collect the module once, fork one child per test.

    The first line on the report pipe is the set-up's own, written before any of the test module runs:
    ``{"setup": "ok"}``, or ``{"setup": "failed", "error": ...}`` when the runner could not set up the
    process (a limit, a mount): the zygote then reports a runner failure, never the module's.
    """
    try:
        limits = plugin.limits
        fds = [ctrl_r, rep_w]
        try:
            _set_up(plugin, workdir, uid, fds)
            plugin.filters.seal_module_process()  # own keyring, then the syscall filter: before the module runs
        except BaseException as exc:
            write_line(fds[1], {"setup": "failed", "error": f"{type(exc).__name__}: {exc}"[:300]})
            return
        ctrl_r, rep_w = fds
        unchanged = plugin.pristine  # held here: the module cannot swap it
        # the same for what each test process enters (kernel_state.py): bound here, before the module runs
        enter_world = functools.partial(plugin.filters.enter_test_world,
                                        plugin.iso.test_namespaces and os.path.exists("/proc/self/uid_map"))
        sandbox_guard.arm(rep_w, os.path.join(moddir, TEST_FILE))
        write_line(rep_w, {"setup": "ok"})
        me = os.getpid()
        items, error = _collect(plugin, session, moddir)
        if os.getpid() != me:  # module code forked and returned into the harness
            os._exit(0)
        if not unchanged(session.config):
            write_line(rep_w, {"tampered": "the test module changed the test harness while importing"})
            return
        ids = [_test_id(item) for item in items] if items is not None and not error else []
        if len(ids) > limits.max_tests:
            ids, error = [], f"too many tests: {len(ids)} > {limits.max_tests}"
        elif any(len(t) > limits.max_id_chars for t in ids):
            longest = max(len(t) for t in ids)
            ids, error = [], f"test id too long: {longest} > {limits.max_id_chars} characters"
        write_line(rep_w, {"ids": ids, "error": error[: limits.detail_chars] if error else None})
        if collect_only or not ids:
            return
        after_import = _entries(workdir)
        import_state = ImportSnapshot.take(workdir)
        by_id = dict(zip(ids, items or []))
        probe = None  # coverage_probe.Probe, built on the first request that asks for coverage
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
                write_line(rep_w, {"done": req["test_id"], "missing": True}, prefix=req["nonce"] + "\t")
                continue
            if req.get("coverage") and probe is None:
                probe = coverage_hooks().Probe(os.path.join(moddir, f"{MODULE_UNDER_TEST}.py"))
            code = _fork_test(plugin, item, req["nonce"], rep_w, ctrl_r, workdir, uid,
                              probe if req.get("coverage") else None, unchanged, enter_world)
            _remove_new(workdir, after_import)  # every test starts from the files as they were after import:
            import_state.restore()  # the new ones gone, the ones made at import as they were
            write_line(rep_w, {"done": req["test_id"], "code": code}, prefix=req["nonce"] + "\t")
    finally:
        os._exit(0)


def _set_up(plugin: ZygotePlugin, workdir: str, uid: int | None, fds: list[int]) -> None:
    """The module process's own set-up, before any test code: session, /proc, descriptors (``fds``, [control,
    report], updated as they move), environment, folder, limits (never above the host's: limits.py), uid."""
    limits = plugin.limits
    iso = plugin.iso
    os.setsid()
    if iso.pid_namespace and iso.chain_namespaces:
        if mount_own_proc():  # this process is PID 1 of the new namespace: /proc shows only the namespace
            hide_key_lists()  # best effort: the key calls themselves are filtered (kernel_state.py)
    log_fd = os.open(os.path.join(workdir, "collect.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if uid is not None:
        os.fchown(log_fd, uid, uid)
    nul = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nul, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    mb = 1 << 20
    limit_to_host(resource.RLIMIT_NOFILE, limits.open_files)  # first: the private descriptors go below it
    ceiling = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    fds[1] = rep_w = _private_fd(fds[1], {fds[0]}, ceiling)
    fds[0] = ctrl_r = _private_fd(fds[0], {rep_w}, ceiling)
    low, high = min(rep_w, ctrl_r), max(rep_w, ctrl_r)
    os.closerange(3, low)
    os.closerange(low + 1, high)
    os.closerange(high + 1, 1 << 16)
    replace_environment(scrubbed_env(workdir))
    tempfile.tempdir = workdir
    os.chdir(workdir)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized writes raise OSError instead of killing
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    limit_to_host(resource.RLIMIT_AS, limits.memory_mb * mb)
    limit_to_host(resource.RLIMIT_FSIZE, limits.file_mb * mb)
    if uid is not None:
        limit_to_host(resource.RLIMIT_NPROC, limits.processes)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)  # from root to a uid of its own: every capability goes
    elif iso.user_namespace:
        # counted per user in this zygote's user namespace (the zygote, this chain's supervisor and
        # module process included)
        limit_to_host(resource.RLIMIT_NPROC, limits.processes + CHAIN_PROCESSES)
        drop_capabilities()  # what the user namespace gave: no remounting the read-only mounts
    for option in (PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE):  # dumpable 0: no other process reads our memory
        try:
            prctl(option, 1 if option == PR_SET_NO_NEW_PRIVS else 0)
        except OSError:
            pass
    sys.dont_write_bytecode = True


def _entries(top: str) -> set[str]:
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(top):
        found.update(os.path.join(dirpath, n) for n in dirnames + filenames)
    return found


def _remove_new(top: str, keep: set[str]) -> None:
    """Remove whatever appeared under ``top`` since ``keep`` was taken (a test's leftovers outside its folder)."""
    for path in sorted(_entries(top) - keep, key=len, reverse=True):
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass


def _fork_test(plugin: ZygotePlugin, item: Any, nonce: str, rep_w: int, ctrl_r: int, workdir: str,
               uid: int | None, probe: Any, guard: Any, enter_world: Callable[[], None]) -> int:
    """Run one collected item in a fresh child (own session, directory); clean up after it; its exit code."""
    testdir = tempfile.mkdtemp(dir=workdir)
    pid = os.fork()
    if pid == 0:
        _test_child(plugin, item, nonce, rep_w, ctrl_r, testdir, probe, guard, enter_world)
    _, status = os.waitpid(pid, 0)
    if plugin.iso.pid_namespace:
        # This process is the namespace's init: kill whatever the test left running (kill(-1)
        # spares init and the caller) and reap it, as orphans are reparented here.
        kill_pid(-1)
        reap(time.monotonic() + 2.0)
    else:
        kill_pid(pid, group=True)
    shutil.rmtree(testdir, ignore_errors=True)
    return os.waitstatus_to_exitcode(status)


def _test_child(plugin: ZygotePlugin, item: Any, nonce: str, rep_w: int, ctrl_r: int, testdir: str,
                probe: Any, guard: Any, enter_world: Callable[[], None]) -> None:
    """The test process: report once, from this pid only, after pytest's protocol returned."""
    try:
        limits = plugin.limits
        os.setsid()
        os.close(ctrl_r)
        out = os.open(os.path.join(testdir, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        sys.stdout, sys.stderr = _output_stream(1), _output_stream(2)
        replace_environment(scrubbed_env(testdir))
        tempfile.tempdir = testdir
        os.chdir(testdir)
        cpu = int(limits.cpu_s if limits.cpu_s is not None else limits.timeout_s + 2)
        limit_to_host(resource.RLIMIT_CPU, cpu)
        # own user/IPC/network namespaces and session keyring, then the test filter (kernel_state.py); a
        # failure here ends the process before the test runs (no report: crashed)
        enter_world()
        me = os.getpid()
        plugin.reports.clear()
        plugin.guard = guard
        if probe is not None:
            probe.start()
        try:
            item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
            status, detail = status_of(plugin.reports, _output_full(testdir))
        except BaseException as exc:  # pytest.exit() or KeyboardInterrupt inside the test, or a broken hook
            if any(r.when == "call" for r in plugin.reports):
                status, detail = status_of(plugin.reports, _output_full(testdir))
                status = "error" if status == "passed" else status  # the protocol did not finish
            else:
                status, detail = "error", f"{type(exc).__name__}: {exc}"
        if os.getpid() != me:  # a fork of the test that returned into the harness: not evidence
            os._exit(0)
        if not guard(item.config):
            write_line(rep_w, {"tampered": "the test changed the test harness"})
            os._exit(sandbox_guard.TAMPER_EXIT)
        report: dict[str, Any] = {"status": status, "detail": detail[: limits.detail_chars]}
        if probe is not None:  # a failing test still reports the lines it ran
            report["coverage"] = probe.stop()
        write_line(rep_w, report, prefix=nonce + "\t")
    finally:
        os._exit(0)


class RawOutput(io.RawIOBase):
    """The test's stdout/stderr below the text layer: writes go to a descriptor, as under ``pytest -s``.

    Not an ``io.FileIO``: the type of a real file's raw stream opens any path it is given
    (``type(sys.stdout.buffer.raw)("solution.py")``), this one opens nothing."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return os.write(self._fd, data)

    def fileno(self) -> int:
        return self._fd


def _output_stream(fd: int) -> io.TextIOWrapper:
    """A text stream like the interpreter's own on ``fd`` (UTF-8; text it cannot encode written escaped, as
    plain pytest's capture does), over ``RawOutput``."""
    return io.TextIOWrapper(io.BufferedWriter(RawOutput(fd)), encoding="utf-8", errors="backslashreplace",
                            line_buffering=fd == 2, write_through=fd == 2)


def _output_full(testdir: str) -> bool:
    """Whether the test's output log reached the file-size cap (its writes then fail with EFBIG)."""
    cap = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    try:
        size = os.stat(os.path.join(testdir, "output.log")).st_size
    except OSError:
        return False
    return cap != resource.RLIM_INFINITY and size >= cap


def coverage_hooks() -> Any:
    """coverage_probe, imported only when a request asks for coverage (the normal path never loads it)."""
    from evalmislead_assets.sandbox import coverage_probe

    return coverage_probe


def _collect(plugin: ZygotePlugin, session: Any, moddir: str) -> tuple[list[Any] | None, str | None]:
    try:
        items = session.perform_collect([os.path.join(moddir, TEST_FILE)])
    except BaseException as exc:  # UsageError, or something the module raised past pytest
        return None, f"{type(exc).__name__}: {exc}"
    if plugin.collect_failures:
        return None, collect_error(plugin.collect_failures, moddir)
    return list(items), None


def _test_id(item: Any) -> str:
    return item.nodeid.split("::", 1)[1] if "::" in item.nodeid else item.nodeid
