"""The LLM client against a misbehaving server over real HTTP (fake_llm_server): an error is never
an answer, deadlines hold, waits say what they wait for, a stop abandons what is in flight."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from evalmislead_assets.llm import server_props as llm_servers
from evalmislead_assets.llm import stop_signals
from evalmislead_assets.llm.client import ChatClient
from evalmislead_assets.llm.stop_signals import StopRequested
from evalmislead_assets.llm.types import ChatRequest, LLMFailing, LLMUnreachable
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.fake_llm_server import FakeLLMServer


def _reqs(n: int, max_tokens: int = 16) -> list[ChatRequest]:
    return [ChatRequest(asset="test_generations", condition="buggy_code", thinking="off", task_id=f"Python/{i}",
                        messages=[{"role": "user", "content": f"prompt {i}"}], max_tokens=max_tokens,
                        enable_thinking=False) for i in range(n)]


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def wh(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "faults.duckdb")


@pytest.fixture(autouse=True)
def _no_stop_left_behind() -> Iterator[None]:
    yield
    stop_signals.STOP.clear()


def _client(url: str, **kw) -> ChatClient:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("retries", 1)
    return ChatClient([url], **kw)


def _calls(wh: Warehouse):
    return wh.read_table("llm_calls", order_by="ts")


def _count(wh: Warehouse, table: str) -> int:
    return int(wh.query_df(f"SELECT count(*) AS n FROM {table}")["n"][0])


# ---- an answer is good only if it is one ----

BAD = [  # mode, the error's start, attempts with retries=1
    ("status:400", "HTTP 400: ", 1),
    ("status:429", "HTTP 429: ", 2),
    ("status:500", "HTTP 500: ", 2),
    ("status:503", "HTTP 503: ", 2),
    ("error_body", "HTTP 200 with an error body", 1),
    ("empty_choices", "HTTP 200 with no choices", 1),
    ("list", "HTTP 200 with a JSON list instead of an object", 1),
    ("null", "HTTP 200 with a JSON null instead of an object", 1),
    ("invalid_json", "HTTP 200 with a body that is not JSON", 1),
    ("html", "HTTP 200 with an HTML page", 1),
]


@pytest.mark.parametrize(("mode", "start", "attempts"), BAD, ids=[m for m, _, _ in BAD])
def test_an_error_is_an_error_row_never_cached_and_asked_again(fake, wh, mode, start, attempts) -> None:
    fake.mode = mode
    (result,), stats = _client(fake.url, model="m").run_batch(wh, _reqs(1))
    assert result.error and result.error.startswith(start), result.error
    assert "\n" not in result.error and result.text == ""
    assert stats.errors == 1 and stats.requests_sent == attempts == fake.chat_requests  # 5xx / 429 retried, 4xx not
    calls = _calls(wh)
    assert len(calls) == attempts and set(calls["state"]) == {"error"} and calls["error"].notna().all()
    assert calls["finished_at"].notna().all()
    assert calls["status_code"].tolist() == [int(mode.split(":")[1]) if ":" in mode else 200] * attempts
    assert _count(wh, "llm_cache") == 0
    # the next run asks again, and only now stores an answer
    fake.mode = "ok"
    (again,), s2 = _client(fake.url, model="m").run_batch(wh, _reqs(1))
    assert again.error is None and again.text == "echo: prompt 0" and s2.requests_sent == 1 and s2.cache_hits == 0
    assert _count(wh, "llm_cache") == 1


def test_a_rerun_asks_exactly_the_errored_requests(fake, wh) -> None:
    fake.script = ["ok", "status:400", "ok", "error_body"]
    results, _ = _client(fake.url, model="m", max_in_flight=1).run_batch(wh, _reqs(4))
    assert [r.error is None for r in results] == [True, False, True, False]
    fake.mode = "ok"
    before = len(fake.bodies)
    results, stats = _client(fake.url, model="m").run_batch(wh, _reqs(4))
    assert not any(r.error for r in results) and stats.cache_hits == 2 and stats.requests_sent == 2
    assert sorted(b["messages"][0]["content"] for b in fake.bodies[before:]) == ["prompt 1", "prompt 3"]


def test_a_stored_error_body_from_an_older_version_is_asked_again_and_replaced(fake, wh) -> None:
    (first,), _ = _client(fake.url, model="m").run_batch(wh, _reqs(1))
    wh.execute("UPDATE llm_cache SET response_json = ?", [json.dumps({"choices": []})])
    fake.answer = "fresh answer"
    (again,), stats = _client(fake.url, model="m").run_batch(wh, _reqs(1))
    assert stats.cache_hits == 0 and stats.requests_sent == 1 and again.text == "fresh answer"
    stored = wh.read_table("llm_cache")
    assert len(stored) == 1 and json.loads(stored["response_json"][0])["choices"][0]["message"]["content"] == "fresh answer"


def test_errors_in_a_row_stop_the_batch_with_one_line(fake, wh) -> None:
    fake.mode = "status:400"
    with pytest.raises(LLMFailing) as info:
        _client(fake.url, model="m", max_in_flight=2, error_streak=4).run_batch(wh, _reqs(20))
    msg = str(info.value)
    assert "requests in a row failed" in msg and "HTTP 400" in msg and "0 of 20 answers are stored" in msg
    assert "\n" not in msg and fake.chat_requests < 20


def test_a_truncated_body_says_so_and_is_not_unreachable(fake, wh) -> None:
    fake.mode = "truncated"
    (result,), stats = _client(fake.url, model="m").run_batch(wh, _reqs(1))
    assert result.error.startswith("truncated answer: HTTP 200, the connection closed after 100 of 1000 bytes")
    assert "unreachable" not in result.error and stats.requests_sent == 2  # retried once
    assert _count(wh, "llm_cache") == 0


def test_a_lone_surrogate_answer_is_stored_and_reads_back(fake, wh) -> None:
    fake.mode = "surrogate"
    (result,), _ = _client(fake.url, model="m").run_batch(wh, _reqs(1))
    assert result.error is None and result.text == "lone surrogate: \ud800 end"
    (cached,), stats = _client(fake.url, model="m").run_batch(wh, _reqs(1))
    assert stats.cache_hits == 1 and cached.text == result.text


# ---- deadlines and progress ----


def test_a_trickling_server_is_cut_at_the_request_deadline(wh) -> None:
    with FakeLLMServer("trickle", trickle_s=0.1, trickle_chunks=600) as fake:  # a minute of trickle
        (result,), _ = _client(fake.url, model="m", retries=3, timeout_s=5, deadline_s=1.0).run_batch(wh, _reqs(1))
        assert fake.chat_requests == 1  # the deadline covers the retries too
        assert result.error.startswith("no complete answer within the request deadline of 1 s")
        assert fake.wait_until_client_gone(1)
        assert fake.trickled_chunks[0] < 600
    assert _calls(wh)["state"].tolist() == ["error"] and _count(wh, "llm_cache") == 0


def test_a_hung_server_says_not_answering_and_progress_says_what_it_waits_for(fake, wh, caplog) -> None:
    fake.mode = "hang"
    client = _client(fake.url, model="m", retries=0, timeout_s=1.5, progress_every_s=0.2, max_in_flight=2)
    with caplog.at_level(logging.INFO, logger="evalmislead_assets.llm.client"):
        with pytest.raises(LLMUnreachable) as info:
            client.run_batch(wh, _reqs(3))
    msg = str(info.value)
    assert "not answering" in msg and fake.url in msg and "no byte from the server for 2 s" in msg
    lines = [r.getMessage() for r in caplog.records]
    assert any("waiting for 2 requests in flight (longest: Python/" in ln and fake.url in ln for ln in lines), lines


def test_the_props_probe_says_what_it_waits_for(fake, wh, caplog, monkeypatch) -> None:
    monkeypatch.setattr(llm_servers, "PROPS_TIMEOUT_S", 0.6)
    fake.props_mode = "hang"
    with caplog.at_level(logging.INFO, logger="evalmislead_assets.llm.client"):
        with pytest.raises(LLMUnreachable, match="unreachable at"):
            _client(fake.url, retries=1, progress_every_s=0.2).run_batch(wh, _reqs(1))
    lines = [r.getMessage() for r in caplog.records]
    assert any(f"waiting for /props of {fake.url} (attempt" in ln for ln in lines), lines
    assert fake.chat_requests == 0


# ---- stops and kills ----


def test_a_stop_abandons_requests_in_flight_without_error_rows(fake, wh, caplog) -> None:
    fake.mode = "hang"
    stopper = threading.Thread(target=lambda: fake.wait_for_requests(2, in_flight=True) and stop_signals.STOP.set())
    stopper.start()
    with caplog.at_level(logging.INFO, logger="evalmislead_assets.llm.client"):
        with pytest.raises(StopRequested):
            _client(fake.url, model="m", retries=3, max_in_flight=2, progress_every_s=0.1).run_batch(wh, _reqs(4))
    stopper.join()
    stopped_at = len(caplog.records)
    calls = _calls(wh)
    assert len(calls) == 2 and set(calls["state"]) == {"abandoned"} and calls["error"].isna().all()
    assert _count(wh, "llm_cache") == 0
    assert not any("retrying" in r.getMessage() for r in caplog.records)
    assert len(caplog.records) == stopped_at  # nothing logged after the stop


KILLED = """
import sys
from evalmislead_assets.llm.client import ChatClient
from evalmislead_assets.llm.types import ChatRequest
from evalmislead_assets.store.database import Warehouse
req = ChatRequest("test_generations", "buggy_code", "off", "Python/7", [{"role": "user", "content": "hi"}], 8, False)
ChatClient([sys.argv[1]], model="m").run_batch(Warehouse(sys.argv[2]), [req])
"""


def test_a_request_cut_by_sigkill_leaves_an_unfinished_row(fake, tmp_path) -> None:
    fake.mode = "hang"
    db = tmp_path / "killed.duckdb"
    proc = subprocess.Popen([sys.executable, "-c", KILLED, fake.url, str(db)])
    try:
        assert fake.wait_for_requests(1, timeout_s=120)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    calls = Warehouse(db).read_table("llm_calls")
    assert calls[["task_id", "state"]].values.tolist() == [["Python/7", "sent"]]
    assert calls["finished_at"].isna().all() and calls["error"].isna().all() and calls["status_code"].isna().all()


SIGNALLED = """
import sys, time
from evalmislead_assets.llm import stop_signals
stop_signals.install(grace_s=float(sys.argv[1]))
ready = False
while True:
    try:
        if not ready:
            ready = True
            print("ready", flush=True)
        time.sleep(0.05)
    except (stop_signals.StopRequested, SystemExit):
        print("stopping slowly", flush=True)  # a process that does not stop by itself
"""


def _signalled(grace_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", SIGNALLED, str(grace_s)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_second_signal_exits_at_once() -> None:
    proc = _signalled(grace_s=600)
    proc.send_signal(signal.SIGINT)
    assert proc.stdout.readline().strip() == "stopping slowly"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)  # far below the 600 s grace
    assert proc.returncode == 130 and "second SIGINT" in err


def test_a_process_that_does_not_stop_is_ended_after_the_grace_period_with_143() -> None:
    proc = _signalled(grace_s=0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "SIGTERM received: stopping" in err and "still running" in err


def test_exit_codes_follow_the_signal(monkeypatch) -> None:
    monkeypatch.setitem(stop_signals._state, "signum", int(signal.SIGTERM))
    assert stop_signals.exit_code() == 143 and stop_signals.signal_name() == "SIGTERM"
    monkeypatch.setitem(stop_signals._state, "signum", int(signal.SIGINT))
    assert stop_signals.exit_code() == 130


def test_fake_server_modes_are_documented() -> None:
    from evalmislead_tests import fake_llm_server

    doc = textwrap.dedent(fake_llm_server.__doc__ or "")
    assert all(f"``{m}``" in doc for m in fake_llm_server.MODES)


# ---- the real llama-server ----


@pytest.mark.slow
def test_a_prompt_longer_than_the_context_is_a_real_400_reported_not_retried(llama_server, wh) -> None:
    (req,) = _reqs(1)
    req.messages = [{"role": "user", "content": "hello " * 4000}]  # over the fixture's 2,048-token slot
    (result,), stats = ChatClient([llama_server], retries=3, backoff_s=0.01).run_batch(wh, [req])
    assert result.error and result.error.startswith("HTTP 400: ") and "context" in result.error, result.error
    assert stats.requests_sent == 1 and _count(wh, "llm_cache") == 0
    assert _calls(wh)[["status_code", "state"]].values.tolist() == [[400, "error"]]


def test_a_silent_server_at_the_deadline_counts_as_not_answering(fake, wh) -> None:
    fake.mode = "hang"
    with pytest.raises(LLMUnreachable) as info:
        _client(fake.url, model="m", retries=2, timeout_s=30, deadline_s=1.0).run_batch(wh, _reqs(1))
    msg = str(info.value)
    assert "not answering" in msg and "request deadline of 1 s; no byte received" in msg
    assert fake.chat_requests == 1 and _calls(wh)["state"].tolist() == ["error"]
