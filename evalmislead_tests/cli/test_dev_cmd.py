"""`evalmislead dev` stops on the first SIGINT with all its children, even started in the background.

`dagster dev -w workspace.yaml`, started in the background by a non-interactive shell (a script, a CI step),
inherits SIGINT ignored, and Dagster copies that to SIGTERM: it ignored both (200 s measured) until SIGKILL,
which leaves its webserver, daemon and code servers behind. Both tests start the command that way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from evalmislead_tests.dagster_services import BIN, PROJECT_ROOT, free_port

SIGINT_BIT, SIGTERM_BIT = 1 << (signal.SIGINT - 1), 1 << (signal.SIGTERM - 1)


def _in_background(cmd: str, tmp_path: Path, port: int) -> int:
    """``cmd`` started as `cmd &` by a non-interactive bash (which exits at once); its pid, in its own session."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALMISLEAD_")}
    env.update({"DAGSTER_HOME": str(tmp_path / "dagster_home"), "EVALMISLEAD_DB": str(tmp_path / "s.duckdb"),
                "EVALMISLEAD_HOME": str(tmp_path / "data"), "PYTHONPATH": str(PROJECT_ROOT)})
    (tmp_path / "dagster_home").mkdir()
    (tmp_path / "dagster_home" / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    out = subprocess.run(["bash", "-c", f"setsid {cmd} > {tmp_path / 'dev.log'} 2>&1 & echo $!"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout.strip())


def _session(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def _signals(pid: int, field: str) -> int:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith(field + ":"))
    return int(line.split()[1], 16)


def _wait(predicate, what: str, timeout: float, log: Path):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n"
                                 + (log.read_text(errors="replace")[-3000:] if log.exists() else ""))
        time.sleep(1.0)


def _kill_session(sid: int) -> None:
    """SIGKILL what is left of the session, again until nothing is (a child may be forking as we scan)."""
    deadline = time.monotonic() + 60
    while _session(sid) and time.monotonic() < deadline:
        for pid in _session(sid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_evalmislead_dev_in_the_background_stops_on_the_first_sigint(tmp_path: Path) -> None:
    import httpx

    port = free_port()
    pid = _in_background(f"{BIN / 'python'} -m evalmislead_assets.cli dev -p {port}", tmp_path, port)
    log = tmp_path / "dev.log"
    try:
        def ready() -> bool:
            try:
                r = httpx.post(f"http://127.0.0.1:{port}/graphql", timeout=10, json={
                    "query": "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }"})
                return '"LOADED"' in r.text
            except httpx.HTTPError:
                return False

        _wait(ready, "the webserver with its code location loaded", 600, log)
        # the same process, now dagster dev, catches both signals instead of ignoring them
        assert "dagster dev" in " ".join(Path(f"/proc/{pid}/cmdline").read_text().split("\0"))
        assert not _signals(pid, "SigIgn") & (SIGINT_BIT | SIGTERM_BIT)
        assert _signals(pid, "SigCgt") & SIGINT_BIT and _signals(pid, "SigCgt") & SIGTERM_BIT
        children = set(_session(pid)) - {pid}
        assert len(children) >= 3, children  # webserver, daemon, code server(s)
        os.kill(pid, signal.SIGINT)  # once, to the leader only
        _wait(lambda: not _session(pid), "every process of dagster dev to end after one SIGINT", 150, log)
        assert "Dagster services shut down." in log.read_text()
    finally:
        _kill_session(pid)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_plain_dagster_dev_in_the_background_ignores_sigint_and_sigterm(tmp_path: Path) -> None:
    """The cause, as Dagster behaves today: `dagster dev` started the same way ignores both signals."""
    pid = _in_background(f"{BIN / 'dagster'} dev -w {PROJECT_ROOT / 'workspace.yaml'} -p {free_port()}",
                         tmp_path, 0)
    log = tmp_path / "dev.log"
    try:
        _wait(lambda: "Launching Dagster services" in (log.read_text() if log.exists() else ""),
              "dagster dev to set its signal handlers", 300, log)
        assert _signals(pid, "SigIgn") & SIGINT_BIT and _signals(pid, "SigIgn") & SIGTERM_BIT
    finally:
        _kill_session(pid)
