"""Run Python as an unprivileged user (uid/gid 65534) from a root test, so the sandbox's user-namespace
path is exercised in CI (which runs as root) too.

The child gets a private mount namespace in which the closed directories on the way to the
interpreter and the repository (e.g. /root, mode 0700, when Python lives under /root/.pyenv) are
covered by a tmpfs that holds only those paths (sandbox_isolation's own ``_expose``), then drops
to the user: it can read the interpreter and the code, write only the folder it is given.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from evalmislead_assets.sandbox import isolation as si

NOBODY = 65534
REPO = Path(__file__).resolve().parents[1]


def can_drop_privileges() -> bool:
    return os.geteuid() == 0


def run_python_as_user(code: str, workdir: Path, timeout_s: float = 300.0) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with this interpreter as uid/gid 65534; ``workdir`` becomes its HOME and is writable to it."""
    stash = tempfile.mkdtemp(prefix="evalmislead-expose-")
    os.chown(workdir, NOBODY, NOBODY)
    os.chmod(workdir, 0o700)
    paths = si.python_paths() + [str(REPO), str(workdir)]

    def drop() -> None:
        si.unshare(si.CLONE_NEWNS)
        si._mount(None, "/", si.MS_REC | si.MS_PRIVATE)
        si._expose(paths, stash)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir),
           "PYTHONPATH": str(REPO), "LANG": "C.UTF-8"}
    try:
        return subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, preexec_fn=drop,
                              capture_output=True, text=True, timeout=timeout_s)
    finally:
        shutil.rmtree(stash, ignore_errors=True)


def json_result(proc: subprocess.CompletedProcess[str]) -> dict:
    """The last stdout line of a child that printed json.dumps(result) last."""
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, f"rc {proc.returncode}: {proc.stderr[-2000:]}"
    return json.loads(lines[-1])
