"""A chain's supervisor: the trusted process between the zygote and a chain's module process.

Forked by the zygote (``zygote.Chain``) per test module and version: it makes the chain's uid and
view, enters new namespaces, starts the module process (child.py; PID 1 of the new PID namespace)
and stays until that process ends, so that its pid, and with it the uid, stays unique. It ends the
module process only when the zygote closes the kill pipe.

Standard library only at module level: the zygote imports it.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
from typing import Any

from evalmislead_assets.sandbox.child import module_process, sweep_children
from evalmislead_assets.sandbox.host import UID_BASE
from evalmislead_assets.sandbox.isolation import CHAIN_FLAGS, CLONE_NEWPID, PR_SET_CHILD_SUBREAPER, chain_view, prctl, unshare

# The zygote's pytest plugin (zygote.ZygotePlugin): named loosely, so this module never imports the zygote.
ZygotePlugin = Any


def chain_supervisor(plugin: ZygotePlugin, session: Any, moddir: str, collect_only: bool,
                     ctrl_r: int, rep_w: int, kill_r: int) -> None:
    """Trusted: make the chain's uid and view, enter new namespaces, start the module process (PID 1
    there), and stay until it ends, so that this pid, and with it the uid, stays unique.

    It signals only its own child, through a pidfd (never a number from the chain), when the
    zygote closes the kill pipe; then it kills whatever was reparented to it (it is a subreaper).
    """
    iso = plugin.iso
    for fd in (plugin.proto_in, plugin.proto_out):  # the host's pipes: only the zygote talks to the host
        os.close(fd)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    uid = UID_BASE + os.getpid() if iso.own_uid else None
    flags = (CLONE_NEWPID if iso.pid_namespace else 0) | (CHAIN_FLAGS if iso.chain_namespaces else 0)
    if flags:
        unshare(flags)
    if iso.chain_namespaces:
        moddir, workdir = chain_view(plugin.root, moddir, plugin.limits.disk_mb, uid)
    else:
        workdir = os.path.join(plugin.root, "w", str(os.getpid()))
        os.mkdir(workdir, 0o700)
        if uid is not None:
            os.chown(workdir, uid, uid)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(kill_r)
            module_process(plugin, session, moddir, collect_only, ctrl_r, rep_w, workdir, uid)
        finally:
            os._exit(70)
    os.close(rep_w)
    os.close(ctrl_r)
    _await_kill_or_exit(pid, kill_r)
    sweep_children()
    if not iso.chain_namespaces:
        shutil.rmtree(workdir, ignore_errors=True)


def _await_kill_or_exit(pid: int, kill_r: int) -> None:
    """Wait until the child ``pid`` ends or the kill pipe is readable (data or EOF), then kill and reap it.

    ``pid`` is this process's own unreaped child, so the number cannot name anyone else; a pidfd
    (Linux >= 5.3) makes the wait exact, polling stands in where there is none.
    """
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (OSError, AttributeError):
        pidfd = None
    while True:
        ready, _, _ = select.select([kill_r] + ([pidfd] if pidfd is not None else []), [], [],
                                    None if pidfd is not None else 0.05)
        if kill_r in ready:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            break
        if ready or os.waitpid(pid, os.WNOHANG)[0]:
            break
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    if pidfd is not None:
        os.close(pidfd)
