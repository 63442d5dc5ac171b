"""Run one confined test process and read its verdict channel: the host side of confine.py.

Each run gets a private work folder (created here, owned by the run's uid, removed after), its own
session, a wall-clock limit that kills the whole process group (and, through the PID namespace, all
it started), stdout and stderr to files outside the work folder (capped by the file-size limit: a
flood dies of SIGXFSZ), and two pipes: the *nonce* pipe, read once by the harness before any test
code loads, and the *result* pipe, on which the harness writes ``<nonce> <word> ...`` lines. Only
lines that start with the run's nonce count; anything else on any channel is ignored.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from evalmislead_assets.sandbox.processes import signal_group

_CONFINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "confine.py")
RESULT_FD_ENV, NONCE_FD_ENV = "EVALMISLEAD_RESULT_FD", "EVALMISLEAD_NONCE_FD"
_MAX_RESULT_BYTES = 1 << 20
_TAIL_BYTES = 4000


@dataclass(frozen=True)
class ProcessLimits:
    timeout_s: float = 10.0
    data_mb: int = 1024  # RLIMIT_DATA: the heap (node and the JVM reserve far more address space than they use)
    file_mb: int = 16  # RLIMIT_FSIZE: files written and captured output
    open_files: int = 256
    processes: int = 256  # RLIMIT_NPROC for the run's own uid (threads count: a JVM starts ~20)
    isolate: bool = True  # namespaces, read-only filesystem, hidden /proc


@dataclass
class ProcessRun:
    exit_code: int | None  # None: killed at the time limit
    results: list[list[str]]  # the nonce lines, nonce removed, split on tabs
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    missing: list[str] = field(default_factory=list)  # confinement the OS refused (from confine.py)


def scrubbed_env(home: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": home,
            "TMPDIR": home, **(extra or {})}


def _tail(path: str) -> str:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - _TAIL_BYTES))
        return fh.read().decode("utf-8", "replace")


def _reader(fd: int, sink: bytearray) -> None:
    with os.fdopen(fd, "rb", buffering=0) as fh:
        while chunk := fh.read(65536):
            if len(sink) < _MAX_RESULT_BYTES:
                sink.extend(chunk[: _MAX_RESULT_BYTES - len(sink)])


def run_confined(cmd: list[str], files: Mapping[str, str | bytes], limits: ProcessLimits,
                 env: dict[str, str] | None = None, channel: str = "fds",
                 copy_back: tuple[str, str] | None = None) -> ProcessRun:
    """Run ``cmd`` in a fresh work folder holding ``files`` (relative name -> text or bytes).

    ``channel``: ``fds`` (the nonce and result pipes at random descriptors, named in the environment) or
    ``stdio`` (the nonce on stdin, result lines on stdout; for the JVM, which cannot open a descriptor by
    number without /proc). ``copy_back``: (folder in the work folder, host folder) copied out after the run
    (compiled classes)."""
    nonce = secrets.token_hex(16)
    host_dir = tempfile.mkdtemp(prefix="evalmislead-pg-")
    workdir = os.path.join(host_dir, "w")
    os.mkdir(workdir, 0o700)
    uid = 1_000_000 + secrets.randbelow(1_000_000) if os.geteuid() == 0 else None
    try:
        for name, text in files.items():
            path = os.path.join(workdir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(text.encode("utf-8") if isinstance(text, str) else text)
        if uid is not None:
            os.chmod(host_dir, 0o711)
            for root, dirs, names in os.walk(workdir):
                for name in [*dirs, *names]:
                    os.chown(os.path.join(root, name), uid, uid)
            os.chown(workdir, uid, uid)
        nonce_r, nonce_w = os.pipe()
        result_r, result_w = os.pipe()
        os.write(nonce_w, nonce.encode() + b"\n")
        os.close(nonce_w)
        stdio = channel == "stdio"
        fd_map = {} if stdio else {NONCE_FD_ENV: nonce_r, RESULT_FD_ENV: result_w}
        cfg = {"workdir": workdir, "uid": uid, "isolate": limits.isolate, "cpu_s": int(limits.timeout_s) + 2,
               "data_mb": limits.data_mb, "file_mb": limits.file_mb, "open_files": limits.open_files,
               "processes": limits.processes, "env": scrubbed_env(workdir, env),
               "fd_map": fd_map}
        sink = bytearray()
        start = time.monotonic()
        with open(os.path.join(host_dir, "out"), "wb") as out, open(os.path.join(host_dir, "err"), "wb") as err:
            try:
                proc = subprocess.Popen([sys.executable, "-I", "-S", _CONFINE, json.dumps(cfg), "--", *cmd],
                                        stdin=nonce_r if stdio else subprocess.DEVNULL, stdout=out, stderr=err,
                                        start_new_session=True, pass_fds=() if stdio else (nonce_r, result_w),
                                        env={"PATH": "/usr/bin:/bin"})
            except BaseException:
                os.close(result_r)
                raise
            finally:
                os.close(nonce_r)
                os.close(result_w)
            reader = threading.Thread(target=_reader, args=(result_r, sink), daemon=True)
            reader.start()
            timed_out = False
            try:
                code: int | None = proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out, code = True, None
            signal_group(proc)
            proc.wait()
            reader.join(timeout=5)
        seconds = time.monotonic() - start
        stderr = _tail(os.path.join(host_dir, "err"))
        missing = [ln.split("missing ", 1)[1] for ln in stderr.splitlines() if ln.startswith("confine: missing ")]
        if stdio:
            with open(os.path.join(host_dir, "out"), "rb") as fh:
                sink = bytearray(b"\n".join(ln for ln in fh if ln.startswith(nonce.encode())))
        results = [ln.split("\t")[1:] for ln in sink.decode("utf-8", "replace").splitlines()
                   if ln.split("\t", 1)[0] == nonce]
        if copy_back and os.path.isdir(os.path.join(workdir, copy_back[0])):
            shutil.copytree(os.path.join(workdir, copy_back[0]), copy_back[1], dirs_exist_ok=True)
        return ProcessRun(code, results, _tail(os.path.join(host_dir, "out")), stderr, seconds, timed_out, missing)
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)
