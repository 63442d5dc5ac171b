"""OS isolation for the sandbox's zygotes: namespaces, read-only mounts, prctl, through libc.

Split out of sandbox.py. Like the other sandbox modules, this one imports only the standard
library: the zygote (sandbox_zygote.py, started as a script) imports it.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Isolation:
    """Which OS protections the zygotes got (reported by the first zygote of a batch)."""

    network: bool = False
    readonly_fs: bool = False
    pid_namespace: bool = False
    own_uid: bool = False
    notes: list[str] = field(default_factory=list)

    def missing(self) -> list[str]:
        names = {"network": "no-network namespace", "readonly_fs": "read-only filesystem",
                 "pid_namespace": "PID namespace", "own_uid": "separate user id"}
        return [text for key, text in names.items() if not getattr(self, key)]


CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
_libc: Any = None


def _c() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_c().unshare(ctypes.c_int(flags)), "unshare")


def _mount(src: str | None, target: str, flags: int, fstype: str | None = None, data: str | None = None) -> None:
    enc = (lambda x: x.encode() if x else None)
    _check(_c().mount(enc(src), target.encode(), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _umount(target: str) -> None:
    _check(_c().umount2(target.encode(), ctypes.c_int(2)), f"umount {target}")  # MNT_DETACH


def python_paths() -> list[str]:
    """Directories the test process must be able to read: the interpreter, stdlib, site-packages."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), *[p for p in sys.path if p]}
    return sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})


def first_closed_dir(path: str) -> tuple[str, str] | None:
    """(dir, child) where dir on the way to path cannot be searched by other users; None if all can."""
    current = "/"
    for part in path.strip("/").split("/"):
        if not os.stat(current).st_mode & 0o001:
            return current, os.path.join(current, part)
        current = os.path.join(current, part)
    return None


def _expose(paths: list[str], stash_root: str) -> None:
    """Let an unprivileged uid reach `paths` in this mount namespace.

    A closed directory on the way (e.g. /root, mode 0700, when Python lives under
    /root/.pyenv) is covered by an empty tmpfs that only holds the needed children,
    bound back in; everything else in it stays hidden from the tests.
    """
    for _ in range(6):
        closed: dict[str, set[str]] = {}
        for p in paths:
            hit = first_closed_dir(p)
            if hit:
                closed.setdefault(hit[0], set()).add(hit[1])
        if not closed:
            return
        for n, (directory, children) in enumerate(sorted(closed.items())):
            stashes = []
            for k, child in enumerate(sorted(children)):
                stash = os.path.join(stash_root, f"{n}-{k}")
                if os.path.isdir(child):
                    os.makedirs(stash, exist_ok=True)
                else:
                    open(stash, "a").close()
                _mount(child, stash, MS_BIND | MS_REC)
                stashes.append((stash, child))
            _mount("tmpfs", directory, MS_NOSUID | MS_NODEV, "tmpfs", "mode=755")
            for stash, child in stashes:
                if os.path.isdir(stash):
                    os.mkdir(child, 0o755)
                else:
                    open(child, "a").close()
                _mount(stash, child, MS_BIND | MS_REC)
                _umount(stash)
    raise OSError("could not expose the Python installation to unprivileged test processes")


def prctl(option: int, arg: int) -> None:
    _check(_c().prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)), "prctl")


def setup_isolation(root: str, wanted: bool) -> Isolation:
    """Network and mount namespaces for this zygote; probe PID namespaces for its children."""
    iso = Isolation()
    if not wanted:
        iso.notes.append("OS isolation switched off")
        return iso
    if os.geteuid() != 0:
        iso.notes.append("not running as root")
        return iso
    try:
        unshare(CLONE_NEWNS | CLONE_NEWNET)
        iso.network = True
    except OSError as exc:
        iso.notes.append(f"namespaces refused ({exc})")
        iso.own_uid = not any(first_closed_dir(p) for p in python_paths())
        return iso
    try:
        _mount(None, "/", MS_REC | MS_PRIVATE)
        stash = os.path.join(root, f".expose-{os.getpid()}")  # one per zygote: they share the batch root
        os.mkdir(stash, 0o700)
        try:
            _expose(python_paths(), stash)
            iso.own_uid = True
        except OSError as exc:
            iso.notes.append(f"Python is not readable by other users ({exc}); tests run as root")
        _mount(root, root, MS_BIND | MS_REC)
        failed = []
        with open("/proc/self/mountinfo") as fh:
            mounts = [(ln.split()[4], set(ln.split()[5].split(","))) for ln in fh]
        for point, opts in mounts:
            if point == root or point.startswith(root + "/") or ("ro" in opts and point != "/"):
                continue
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY
            flags |= (MS_NOSUID if "nosuid" in opts else 0) | (MS_NODEV if "nodev" in opts else 0)
            flags |= MS_NOEXEC if "noexec" in opts else 0
            try:
                _mount(None, point, flags)
            except OSError:
                failed.append(point)
        iso.readonly_fs = "/" not in failed
        if failed:
            iso.notes.append(f"could not make read-only: {', '.join(failed[:5])}")
    except OSError as exc:
        iso.notes.append(f"read-only remount failed ({exc})")
    iso.pid_namespace = _probe_pid_namespace()
    if not iso.pid_namespace:
        iso.notes.append("PID namespaces refused")
    return iso


def _probe_pid_namespace() -> bool:
    pid = os.fork()
    if pid == 0:
        try:
            unshare(CLONE_NEWPID)
            inner = os.fork()
            if inner == 0:
                os._exit(0 if os.getpid() == 1 else 1)
            _, status = os.waitpid(inner, 0)
            os._exit(os.waitstatus_to_exitcode(status))
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
