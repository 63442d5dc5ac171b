"""Kernel state: the seccomp filters (real libseccomp, loaded in forked processes), the per-test
namespaces and keyring, the import-time file snapshot, and the one-line refusal without libseccomp.

The hostile corpus files for each class (hostile/kernel_*.py) run through the whole sandbox, as root and as
an unprivileged user, in test_sandbox_adversarial.py.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from evalmislead_assets.sandbox import kernel_state, seccomp
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox, SandboxUnavailable
from evalmislead_assets.sandbox.import_files import Snapshot

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SYS_CLONE, SYS_ADD_KEY, SYS_KEYCTL, SYS_CLONE3, SYS_PTRACE = 56, 248, 250, 435, 101


def _sys(*args: int | bytes | None) -> int:
    """A raw syscall: its result, or -errno."""
    rc = _libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return rc if rc >= 0 else -ctypes.get_errno()


def _in_child(body: Callable[[], dict]) -> dict:
    """Run ``body`` in a forked child (the filters cannot be unloaded) and return what it returned."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.write(w, json.dumps(body()).encode())
        except BaseException as exc:  # reported to the parent
            os.write(w, json.dumps({"error": repr(exc)}).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def _clone(flags: int) -> int:
    """clone(flags) as fork does it; the child (if any) leaves at once."""
    rc = _sys(SYS_CLONE, flags | 17, 0, 0, 0, 0)  # | SIGCHLD
    if rc == 0:
        os._exit(0)
    if rc > 0:
        os.waitpid(rc, 0)
    return rc


def test_module_filter_denies_the_listed_calls_and_keeps_what_tests_use() -> None:
    def body() -> dict:
        filters = kernel_state.Filters()
        filters.seal_module_process()
        parent = os.getppid()
        got = {
            "join anonymous keyring": _sys(SYS_KEYCTL, 1, None) > 0,
            "join named keyring": _sys(SYS_KEYCTL, 1, b"shared-by-name"),
            "search session keyring": _sys(SYS_KEYCTL, 10, -3, b"user", b"x", 0),
            "add_key": _sys(SYS_ADD_KEY, b"user", b"x", b"y", 1, -3),
            "ptrace": _sys(SYS_PTRACE, 0, 0, 0, 0),  # PTRACE_TRACEME
            "clone with a new user namespace": _clone(kernel_state.CLONE_NEWUSER),
            "clone3": _sys(SYS_CLONE3, None, 0),
            "prlimit of the parent": _prlimit(parent),
            "renice the parent": _errno(lambda: os.setpriority(os.PRIO_PROCESS, parent, 19)),
            "renice the user": _errno(lambda: os.setpriority(os.PRIO_USER, 0, 19)),
            "idle the parent": _errno(lambda: os.sched_setscheduler(parent, os.SCHED_IDLE, os.sched_param(0))),
        }
        # what honest tests do: their own limits and nice value, threads, subprocesses, fork
        resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
        os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0))
        seen: list[int] = []
        thread = threading.Thread(target=lambda: seen.append(1))
        thread.start()
        thread.join()
        got["thread"] = seen == [1]
        got["subprocess"] = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                                           text=True).stdout.strip()
        got["fork"] = _clone(0) > 0
        got["unshare for a test"] = kernel_state.enter_test_namespaces() is None
        return got

    got = _in_child(body)
    eperm = -errno.EPERM
    assert got == {"join anonymous keyring": True, "join named keyring": eperm, "search session keyring": eperm,
                   "add_key": eperm, "ptrace": eperm, "clone with a new user namespace": eperm,
                   "clone3": -errno.ENOSYS, "prlimit of the parent": errno.EPERM, "renice the parent": errno.EPERM,
                   "renice the user": errno.EPERM, "idle the parent": errno.EPERM, "thread": True,
                   "subprocess": "42", "fork": True, "unshare for a test": True}


def _errno(call: Callable[[], object]) -> int:
    try:
        call()
    except OSError as exc:
        return exc.errno or 0
    return 0


def _prlimit(pid: int) -> int:
    return _errno(lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE))


def test_a_test_process_gets_its_own_namespaces_and_keyring_and_no_keyctl() -> None:
    def namespaces() -> dict:
        return {name: os.readlink(f"/proc/self/ns/{name}") for name in ("user", "ipc", "net")}

    def body() -> dict:
        filters = kernel_state.Filters()
        filters.seal_module_process()
        before = namespaces()
        session = _sys(SYS_KEYCTL, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID: denied in a module process already
        filters.enter_test_world(namespaces=True)
        after = namespaces()
        return {"changed": [n for n in before if before[n] != after[n]], "session before": session,
                "join again": _sys(SYS_KEYCTL, 1, None), "unshare again": _errno(lambda: kernel_state.unshare(
                    kernel_state.TEST_NAMESPACES)), "uid": os.getuid(), "gid": os.getgid(),
                "capabilities": _capabilities()}

    got = _in_child(body)
    assert got == {"changed": ["user", "ipc", "net"], "session before": -errno.EPERM, "join again": -errno.EPERM,
                   "unshare again": errno.EPERM, "uid": os.getuid(), "gid": os.getgid(), "capabilities": "0" * 16}


def _capabilities() -> str:
    with open("/proc/self/status") as fh:
        return next(ln.split()[1] for ln in fh if ln.startswith("CapEff:"))


def test_filters_are_built_for_this_architecture_only() -> None:
    """libseccomp's own text of the filter: another ABI (i386 through int 0x80, x32) is not let through."""
    built = seccomp.Library().build(kernel_state.MODULE_RULES)
    text = built.pfc()
    assert "arch x86_64" in text and "arch x86\n" not in text
    assert "action KILL" in text  # the default for a foreign architecture
    # x32 shares x86_64's audit arch: its numbers (bit 30 set) go the foreign-architecture way, before any rule
    program = built.bpf()
    assert program[2] == (0x20, 0, 0, 0)  # load the syscall number
    assert program[3][0] == 0x35 and program[3][3] == 0x40000000  # jge X32_SYSCALL_BIT
    for name in ("keyctl", "add_key", "ptrace", "process_vm_writev", "unshare", "setns", "mount", "bpf",
                 "perf_event_open", "userfaultfd", "prlimit64", "setpriority", "fsopen", "io_uring_setup"):
        assert f"syscall \"{name}\"" in text, name


def test_the_import_snapshot_puts_back_what_a_test_changed(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("import")
    (tmp_path / "gone.txt").write_text("still here")
    (tmp_path / "folder").mkdir(mode=0o755)
    (tmp_path / "folder" / "inner.bin").write_bytes(b"\0\1\2")
    (tmp_path / "link").symlink_to("data.txt")
    snap = Snapshot.take(str(tmp_path))
    assert snap.complete
    (tmp_path / "data.txt").write_text("changed")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "folder" / "inner.bin").unlink()
    (tmp_path / "folder").chmod(0o500)
    (tmp_path / "link").unlink()
    (tmp_path / "link").mkdir()
    snap.restore()
    assert (tmp_path / "data.txt").read_text() == "import"
    assert (tmp_path / "gone.txt").read_text() == "still here"
    assert (tmp_path / "folder" / "inner.bin").read_bytes() == b"\0\1\2"
    assert (tmp_path / "folder").stat().st_mode & 0o777 == 0o755
    assert os.readlink(tmp_path / "link") == "data.txt"


def test_without_libseccomp_the_batch_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seccomp, "SONAME", "libseccomp-not-installed.so.9")
    monkeypatch.setattr(seccomp, "_checked", [])
    with pytest.raises(SandboxUnavailable) as caught:
        Sandbox(Limits(timeout_s=2.0), workers=1).run([(Module("x = 1\n", "def test_x():\n    pass\n"), "test_x")])
    message = str(caught.value)
    assert "\n" not in message and "apt-get install libseccomp2" in message and "nothing was run" in message


def test_honest_tests_run_under_the_filter() -> None:
    """Threads, subprocesses, their own limits and nice value, a local abstract socket: as under plain pytest."""
    source = '''
import os, resource, socket, subprocess, sys, threading
from solution import get_positive

def test_thread_and_subprocess():
    out = []
    t = threading.Thread(target=lambda: out.append(get_positive([1, -1])))
    t.start(); t.join()
    assert out == [[1]]
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, text=True).stdout == "1\\n"

def test_own_limits_and_nice():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft - 1, hard))
    os.nice(1)

def test_abstract_socket_pair():
    a = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.bind("\\0evalmislead-honest")
    b = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    b.sendto(b"hi", "\\0evalmislead-honest")
    assert a.recv(10) == b"hi"
'''
    fixed = "def get_positive(l):\n    return [e for e in l if e > 0]\n"
    ids = ["test_thread_and_subprocess", "test_own_limits_and_nice", "test_abstract_socket_pair"]
    box = Sandbox(Limits(timeout_s=5.0), workers=1)
    ran = box.run([(Module(fixed, source), t) for t in ids])
    assert [r.status for r in ran] == ["passed"] * 3, [r.detail for r in ran]
    assert box.isolation is not None and box.isolation.test_namespaces
