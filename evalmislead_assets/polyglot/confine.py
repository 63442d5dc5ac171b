"""Start one untrusted test process (node, java) confined: the launcher that execs it.

Run as a script, ``python -I -S confine.py CONFIG_JSON -- argv...``, by ``process.run_confined``. It applies
the confinement to itself and then ``exec``s the test process, so nothing of the host's Python stays in it:

- as root (or in a user namespace it can enter as a normal user): new mount, network, IPC and PID
  namespaces; every mount read-only except the run's own work folder (a bind mount of itself); /proc
  covered by an empty read-only tmpfs (the test cannot list its descriptors nor read its own memory,
  where the harness keeps the run's nonce; the JVM's launcher then finds libjli through LD_LIBRARY_PATH);
  the launcher forks and its child, the PID namespace's init, execs the test process, so when that dies
  the kernel kills everything it left running (children, daemons);
- as root, the uid and gid the host picked for this run (``uid`` in the config) with no supplementary groups;
- always: its own session, rlimits (CPU seconds, data segment, file size, open files, processes, no core
  file), no new privileges, the scrubbed environment it is given, the work folder as its cwd.

What the OS refuses is skipped and named on stderr in one line starting ``confine:`` (the caller reports it).
Standard library only; the namespace calls come from the sandbox's isolation.py, loaded by path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import secrets
import sys
from types import ModuleType

_HERE = os.path.dirname(os.path.abspath(__file__))
_ISOLATION = os.path.join(os.path.dirname(_HERE), "sandbox", "isolation.py")


def _isolation() -> ModuleType:
    if "_evalmislead_isolation" in sys.modules:
        return sys.modules["_evalmislead_isolation"]
    spec = importlib.util.spec_from_file_location("_evalmislead_isolation", _ISOLATION)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def _readonly_except(iso: ModuleType, keep: str) -> list[str]:
    """Remount every mount read-only except ``keep`` (bound onto itself first); the mounts that refused."""
    iso._mount(None, "/", iso.MS_REC | iso.MS_PRIVATE)
    iso._mount(keep, keep, iso.MS_BIND | iso.MS_REC)
    failed = []
    with open("/proc/self/mountinfo") as fh:
        mounts = [(ln.split()[4], set(ln.split()[5].split(","))) for ln in fh]
    for point, opts in mounts:
        if point == keep or point.startswith(keep + "/") or "ro" in opts or point.startswith("/proc"):
            continue
        flags = iso.MS_REMOUNT | iso.MS_BIND | iso.MS_RDONLY
        for opt, bit in iso._OPT_FLAGS.items():
            flags |= bit if opt in opts else 0
        try:
            iso._mount(None, point, flags)
        except OSError:
            failed.append(point)
    return failed


def _namespaces(cfg: dict) -> list[str]:
    """Enter the namespaces and make the filesystem read-only; what could not be done."""
    missing: list[str] = []
    iso = _isolation()
    try:
        if os.geteuid() != 0:
            iso.enter_user_namespace()
        iso.unshare(iso.CLONE_NEWNS | iso.CLONE_NEWNET | iso.CLONE_NEWIPC | iso.CLONE_NEWPID)
    except OSError as exc:
        return [f"namespaces ({exc.strerror or exc})"]
    try:
        failed = _readonly_except(iso, cfg["workdir"])
        if failed:
            missing.append("read-only " + ",".join(failed[:3]))
    except OSError as exc:
        missing.append(f"read-only filesystem ({exc.strerror or exc})")
    pid = os.fork()  # the child is the PID namespace's init: its death kills all it left running
    if pid:
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)
    try:
        iso._mount("tmpfs", "/proc", iso.MS_NOSUID | iso.MS_NODEV | iso.MS_NOEXEC | iso.MS_RDONLY, "tmpfs",
                   "size=4k,mode=555")
    except OSError as exc:
        missing.append(f"hidden /proc ({exc.strerror or exc})")
    return missing


def _limits(cfg: dict) -> None:
    for name, value in (("RLIMIT_CPU", cfg["cpu_s"]), ("RLIMIT_DATA", cfg["data_mb"] << 20),
                        ("RLIMIT_FSIZE", cfg["file_mb"] << 20), ("RLIMIT_NOFILE", cfg["open_files"]),
                        ("RLIMIT_CORE", 0)):
        res = getattr(resource, name)
        hard = resource.getrlimit(res)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(res, (value, value))


def _drop_uid(cfg: dict) -> None:
    uid = cfg.get("uid")
    if os.geteuid() != 0 or uid is None:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _move_fds(cfg: dict) -> None:
    """Move each channel's descriptor to a random number (named to the harness in the environment only)."""
    taken = {int(fd) for fd in cfg["fd_map"].values()} | {0, 1, 2}
    for name, fd in cfg["fd_map"].items():
        while True:
            target = 10 + secrets.randbelow(max(cfg["open_files"] - 20, 20))
            if target not in taken:
                break
        taken.add(target)
        os.dup2(int(fd), target, inheritable=True)
        os.close(int(fd))
        cfg["env"][name] = str(target)


def main(argv: list[str]) -> None:
    cfg = json.loads(argv[1])
    cmd = argv[argv.index("--") + 1:]
    _move_fds(cfg)
    missing = _namespaces(cfg) if cfg.get("isolate", True) else ["namespaces (switched off)"]
    os.chdir(cfg["workdir"])
    _limits(cfg)
    if cfg.get("processes") and os.geteuid() == 0 and cfg.get("uid") is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (cfg["processes"], cfg["processes"]))
    _drop_uid(cfg)
    try:
        _isolation().prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    except OSError:
        missing.append("no_new_privs")
    if missing:
        os.write(2, ("confine: missing " + "; ".join(missing) + "\n").encode())
    os.execve(cmd[0], cmd, cfg["env"])


if __name__ == "__main__":
    main(sys.argv)
