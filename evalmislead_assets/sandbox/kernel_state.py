"""Kernel state a test could share with another test or with the host, closed per process.

Two seccomp filters (libseccomp, through seccomp.py), built once in the zygote:

- ``MODULE_RULES``, loaded by each module process before the test module is imported (so it binds the
  import's code and, inherited, every test process and whatever they start, across ``execve`` too):
  EPERM for the key syscalls except joining a fresh *anonymous* session keyring, for ``ptrace``,
  ``process_vm_readv``/``writev``, ``setns``, every mount call (old and new API), ``pivot_root``,
  ``bpf``, ``perf_event_open``, ``userfaultfd``, ``kcmp``, ``pidfd_getfd``, ``process_madvise``,
  ``io_uring_*``; ``unshare`` and ``clone`` with a namespace flag, except the one set a test process
  enters below; scheduling and limit calls aimed at any process but the caller (``prlimit64``,
  ``setpriority``, ``sched_set*``, ``ioprio_set``, ``migrate_pages``, ``move_pages`` with a pid,
  ``setpriority`` for a process group or user); ``clone3`` answers ENOSYS (its flags are behind a
  pointer a filter cannot read), so the C library falls back to ``clone``, whose flags it can.
- ``TEST_RULES``, loaded by each test process on top, after it entered its own namespaces and joined
  its own keyring: EPERM for every ``keyctl`` and ``unshare``.

Per test process, before the filter (``enter_test_world``): a new user namespace mapped to the same
uid and gid (no new privilege: its capabilities are dropped right after), a new IPC namespace (SysV
shared memory, semaphores, queues and POSIX queues of one test are gone for the next) and a new
network namespace (abstract Unix sockets are per network namespace), then a fresh anonymous session
keyring. Everything the test's processes hold is killed after it (the module process is the PID
namespace's init), so nothing a test made in the kernel survives it.

What this does not cover, by design: descriptors the module opened at import are inherited by each
of its tests (a pipe or socket made at import is shared by the file's own tests, as every object is
under plain pytest, where the tests share one process); other files, see import_files.py.

Standard library only: the zygote imports it.
"""

from __future__ import annotations

import ctypes
import errno
import os

from evalmislead_assets.sandbox.isolation import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_BIND,
    PR_SET_DUMPABLE,
    _mount,
    drop_capabilities,
    mount_own_proc,
    prctl,
    unshare,
)
from evalmislead_assets.sandbox.seccomp import CMP_MASKED_EQ, CMP_NE, Cmp, Filter, Library, Rule, act_errno

CLONE_NEWTIME, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00000080, 0x02000000, 0x04000000
NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS,
                   CLONE_NEWCGROUP, CLONE_NEWTIME)
TEST_NAMESPACES = CLONE_NEWUSER | CLONE_NEWIPC | CLONE_NEWNET
KEYCTL_JOIN_SESSION_KEYRING = 1
PRIO_PROCESS, IOPRIO_WHO_PROCESS = 0, 1
SYS_KEYCTL = 250  # x86_64 (the filter is built for the native architecture only)
DENY = act_errno(errno.EPERM)

ALWAYS_DENIED = ("add_key", "request_key", "ptrace", "process_vm_readv", "process_vm_writev", "setns", "mount",
                 "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
                 "mount_setattr", "bpf", "perf_event_open", "userfaultfd", "kcmp", "pidfd_getfd", "process_madvise",
                 "io_uring_setup", "io_uring_enter", "io_uring_register")
# the first argument is a pid; 0 is the caller
OWN_PID_ONLY = ("prlimit64", "sched_setattr", "sched_setscheduler", "sched_setparam", "sched_setaffinity",
                "migrate_pages", "move_pages")


def _module_rules() -> tuple[Rule, ...]:
    rules = [Rule(name, DENY) for name in ALWAYS_DENIED]
    rules += [Rule(name, DENY, (Cmp(0, CMP_NE, 0),)) for name in OWN_PID_ONLY]
    rules += [Rule("setpriority", DENY, (Cmp(0, CMP_NE, PRIO_PROCESS),)), Rule("setpriority", DENY, (Cmp(1, CMP_NE, 0),)),
              Rule("ioprio_set", DENY, (Cmp(0, CMP_NE, IOPRIO_WHO_PROCESS),)), Rule("ioprio_set", DENY, (Cmp(1, CMP_NE, 0),)),
              Rule("keyctl", DENY, (Cmp(0, CMP_NE, KEYCTL_JOIN_SESSION_KEYRING),)),
              Rule("keyctl", DENY, (Cmp(1, CMP_NE, 0),)),  # a named keyring is shared by name: anonymous only
              Rule("unshare", DENY, (Cmp(0, CMP_NE, TEST_NAMESPACES),)),
              Rule("clone3", act_errno(errno.ENOSYS))]
    rules += [Rule("clone", DENY, (Cmp(0, CMP_MASKED_EQ, flag, flag),)) for flag in NAMESPACE_FLAGS]
    return tuple(rules)


MODULE_RULES = _module_rules()
TEST_RULES = (Rule("keyctl", DENY), Rule("unshare", DENY))


class Filters:
    """The two filters, built in the zygote (libseccomp missing: seccomp.Unavailable, one line)."""

    def __init__(self) -> None:
        lib = Library()
        self.module: Filter = lib.build(MODULE_RULES)
        self.test: Filter = lib.build(TEST_RULES)
        libc = ctypes.CDLL(None, use_errno=True)
        self._syscall = libc.syscall
        self._syscall.restype = ctypes.c_long
        self._get_errno = ctypes.get_errno

    def join_anonymous_session_keyring(self) -> bool:
        """A new, empty session keyring, not shared by name with anyone; False where the kernel (or an outer
        filter, e.g. a container's) has no keyrings for this process: then there are none to share either."""
        rc = self._syscall(ctypes.c_long(SYS_KEYCTL), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), ctypes.c_void_p(None))
        if rc >= 0:
            return True
        err = self._get_errno()
        if err in (errno.ENOSYS, errno.EPERM, errno.EACCES):
            return False
        raise OSError(err, f"keyctl(KEYCTL_JOIN_SESSION_KEYRING): {os.strerror(err)}")

    def seal_module_process(self) -> None:
        """In the module process, before the test module is imported: own keyring, then the module filter."""
        self.join_anonymous_session_keyring()
        self.module.load()

    def enter_test_world(self, namespaces: bool) -> None:
        """In a test process, before the test runs: own user/IPC/network namespaces (when the chain has
        namespaces), own keyring, then the test filter on top of the module's."""
        if namespaces:
            enter_test_namespaces()
        self.join_anonymous_session_keyring()
        self.test.load()


KEY_LISTS = ("/proc/keys", "/proc/key-users")


def hide_key_lists() -> list[str]:
    """Cover /proc/keys and /proc/key-users of the chain's own /proc with /dev/null (as container runtimes
    do): they list the descriptions of every key the uid may view, the invoking user's host keys included.
    The module process calls it while it may still mount; returns what it could not cover."""
    failed = []
    for path in KEY_LISTS:
        if os.path.exists(path):
            try:
                _mount("/dev/null", path, MS_BIND)
            except OSError:
                failed.append(path)
    return failed


def enter_test_namespaces() -> None:
    """New user (same uid and gid), IPC and network namespaces for this process; no capability kept."""
    uid, gid = os.getuid(), os.getgid()
    unshare(TEST_NAMESPACES)
    # /proc/self is root's while the process is not dumpable (child.py makes it so): the maps are the
    # process's own to write only while it is; no test code runs in this window
    prctl(PR_SET_DUMPABLE, 1)
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1\n"), ("gid_map", f"{gid} {gid} 1\n")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    finally:
        prctl(PR_SET_DUMPABLE, 0)
    drop_capabilities()


def probe_test_namespaces(uid: int | None) -> str | None:
    """None when a test process can enter TEST_NAMESPACES; else why not (one line). Checked in the zygote the
    way a test process gets there: new PID and mount namespaces, a /proc of its own, the chain's uid (``uid``)
    or no capabilities, not dumpable."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            unshare(CLONE_NEWPID | CLONE_NEWNS)
            inner = os.fork()
            if inner == 0:
                try:
                    if not mount_own_proc():
                        os._exit(2)
                    if uid is not None:
                        os.setgroups([])
                        os.setgid(uid)
                        os.setuid(uid)
                    else:
                        drop_capabilities()
                    prctl(PR_SET_DUMPABLE, 0)
                    enter_test_namespaces()
                    os._exit(0)
                except BaseException:
                    os._exit(1)
            _, status = os.waitpid(inner, 0)
            code = os.waitstatus_to_exitcode(status)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return "per-test user/IPC/network namespaces refused (unprivileged user namespaces off?)"
