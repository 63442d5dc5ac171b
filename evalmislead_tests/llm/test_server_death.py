"""The embedded llama-server killed mid-batch: its death is named (signal, log) and it is restarted once, so the
batch completes; a server that keeps dying ends the batch with one line that says so."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest

from evalmislead_assets import study_models
from evalmislead_assets.llm.llama_server import smollm2_model
from evalmislead_assets.llm.types import ChatRequest
from evalmislead_assets.resources import EmbeddedServerResource, LLMResource
from evalmislead_assets.store.database import Warehouse


def _requests(n: int) -> list[ChatRequest]:
    return [ChatRequest(asset="test_generations", condition="buggy_code", thinking="off", task_id=f"Python/{i}",
                        messages=[{"role": "user", "content": f"Count to {i}."}], max_tokens=8,
                        enable_thinking=False) for i in range(n)]


def kill_on_send(monkeypatch, server: EmbeddedServerResource, times: int) -> None:
    """SIGKILL each embedded server (up to ``times`` of them) as the client writes the row of its first request to
    it (the row is written just before the request goes out): a death mid-batch, with no race."""
    from evalmislead_assets.llm.call_store import CallStore

    original = CallStore.begin
    killed: set[int] = set()

    def begin(self, req, cache_key, server_url):
        for srv in list(server._servers.values()):
            if len(killed) < times and srv.pid not in killed and srv.is_running():
                killed.add(srv.pid)
                os.kill(srv.pid, signal.SIGKILL)
                srv.proc.wait()
        return original(self, req, cache_key, server_url)

    monkeypatch.setattr(CallStore, "begin", begin)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kills", [1, 2])
def test_a_dead_embedded_server_is_named_and_restarted_once(tmp_path: Path, monkeypatch, kills: int) -> None:
    monkeypatch.setenv("EVALMISLEAD_EMBEDDED_MODEL", str(smollm2_model().path))
    monkeypatch.delenv("EVALMISLEAD_LLM_URL", raising=False)
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(tmp_path / "study.toml"))
    (tmp_path / "study.toml").write_text('[[models]]\nname = "m"\nbundled = "qwen2.5-coder-0.5b"\nslots = 1\n')
    study_models.reset()
    server = EmbeddedServerResource()
    llm = LLMResource(embedded_server=server, retries=1, backoff_s=0.1)
    log = logging.getLogger(f"death-{kills}")
    log.setLevel(logging.INFO)
    records: list[str] = []
    kill_on_send(monkeypatch, server, kills)

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    log.addHandler(Keep())
    wh = Warehouse(tmp_path / "db.duckdb")
    try:
        # the first call starts the server (the handler kills it as the batch begins to send)
        if kills == 1:
            results = llm.run_batch(wh, _requests(3), log=log)
            assert all(r.error is None for r in results)
            named = [m for m in records if "killed by signal 9" in m and "restarting it once" in m]
            assert named, records
        else:  # it dies again after the restart: one line naming the death, no third start
            from evalmislead_assets.llm.types import LLMUnreachable

            with pytest.raises(LLMUnreachable) as info:
                llm.run_batch(wh, _requests(3), log=log)
            text = str(info.value)
            assert "\n" not in text and "killed by signal 9" in text and "restarted once already" in text
    finally:
        server.stop()
        study_models.reset()
