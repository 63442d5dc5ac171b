"""OS isolation for the sandbox's zygotes: namespaces, read-only mounts, prctl, through libc.

Split out of host.py. Like the other sandbox modules, this one imports only the standard
library: the zygote (zygote.py, started as a script) imports it.
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
    user_namespace: bool = False  # entered as a normal user: mapped to the invoking user, no second uid
    chain_namespaces: bool = False  # each chain: own mount, IPC and network namespace, /proc, tmpfs
    test_namespaces: bool = False  # each test process: own user, IPC and network namespace (kernel_state.py)

    def missing(self) -> list[str]:
        """What is missing; a separate uid is not missing in a user namespace (the mounts do its job)."""
        names = {"network": "no-network namespace", "readonly_fs": "read-only filesystem",
                 "pid_namespace": "PID namespace", "own_uid": "separate user id",
                 "chain_namespaces": "per-run mount/IPC namespaces",
                 "test_namespaces": "per-test IPC/network namespaces"}
        out = []
        for key, text in names.items():
            if key == "own_uid" and self.user_namespace:
                continue
            if not getattr(self, key):
                out.append(text)
        return out


CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_OPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
              "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE = 36, 38, 4
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
    def enc(x: str | None) -> bytes | None:
        return x.encode() if x else None

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
        try:
            enter_user_namespace()
            iso.user_namespace = True
        except OSError as exc:
            iso.notes.append(f"not running as root and user namespaces refused ({exc})")
            return iso
    try:
        unshare(CLONE_NEWNS | CLONE_NEWNET)
        iso.network = True
    except OSError as exc:
        iso.notes.append(f"namespaces refused ({exc})")
        iso.own_uid = not iso.user_namespace and not any(first_closed_dir(p) for p in python_paths())
        return iso
    try:
        _mount(None, "/", MS_REC | MS_PRIVATE)
        if not iso.user_namespace:
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
            for opt, bit in _OPT_FLAGS.items():  # keep the flags a user namespace may not change
                flags |= bit if opt in opts else 0
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
    iso.chain_namespaces = iso.network and _probe_chain_namespaces()
    if iso.network and not iso.chain_namespaces:
        iso.notes.append("per-run mount/IPC/network namespaces refused")
    return iso


def enter_user_namespace() -> None:
    """A new user namespace mapping the invoking user to itself (as `unshare --user` does, minus root)."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1\n"), ("gid_map", f"{gid} {gid} 1\n")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


CHAIN_FLAGS = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET


def _probe_chain_namespaces() -> bool:
    pid = os.fork()
    if pid == 0:
        try:
            unshare(CHAIN_FLAGS)
            _mount("tmpfs", "/tmp", MS_NOSUID | MS_NODEV, "tmpfs", "size=1m")
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def chain_view(root: str, moddir: str, disk_mb: int, uid: int | None) -> tuple[str, str]:
    """In a fresh mount namespace: cover the batch root with a tmpfs that holds only this run's module
    folder (read-only, always at ``root/m``) and a fresh, size-limited work folder (``root/w``, a tmpfs of
    its own), then make the batch root itself read-only.

    Every run sees the same layout whatever the batch holds; nothing written survives the namespace. The
    work folder is the only place a test can write (every other mount is read-only), and the module
    process removes whatever a test left there before the next test id, so no test id sees another's
    files, as root or as a normal user (who owns the root tmpfs in its user namespace, so only its being
    read-only keeps a test from writing there).
    Returns (module folder, work folder) as the run sees them.
    """
    keep = os.open(moddir, os.O_PATH | os.O_DIRECTORY)
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    try:
        _mount("tmpfs", root, flags, "tmpfs", "size=64k,nr_inodes=64,mode=755")
        mdir, wdir = os.path.join(root, "m"), os.path.join(root, "w")
        os.mkdir(mdir, 0o755)
        os.mkdir(wdir, 0o700)
        _mount("tmpfs", wdir, flags, "tmpfs", f"size={disk_mb}m,nr_inodes=16384,mode=700")
        if uid is not None:
            os.chown(wdir, uid, uid)
        _mount(f"/proc/self/fd/{keep}", mdir, MS_BIND)
        _mount(None, mdir, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        _mount(None, root, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
    finally:
        os.close(keep)
    return mdir, wdir


def mount_own_proc() -> bool:
    """Mount a /proc of the caller's (new) PID namespace; else hide the host's under an empty tmpfs."""
    try:
        _mount("proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "proc")
        return True
    except OSError:
        _mount("tmpfs", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "tmpfs", "size=4k,mode=555")
        return False


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Clear every capability of this process (those a user namespace gave it), before untrusted code."""
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_c().capset(ctypes.byref(header), data), "capset")


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
