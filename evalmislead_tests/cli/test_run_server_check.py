"""`evalmislead run` with an LLM server that is down: one line before anything runs, no stack trace.

Before, the run validated the 164 problems (about 20 s), then the spec step found the server down and
printed its error twice with a Dagster stack trace each time (75 lines) before the run's own line.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance

from evalmislead_assets.cli.server_check import unreachable_servers
from evalmislead_assets.llm.server_props import unreachable
from evalmislead_assets.run_console import NOTE, FoldStackTraces
from evalmislead_assets.study.models import Reach
from evalmislead_tests.fake_llm_server import FakeLLMServer

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    """A port with nothing listening (bound, then closed): connections to it are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALMISLEAD_")}
    env.update({"EVALMISLEAD_DB": str(tmp_path / "study.duckdb"), "EVALMISLEAD_HOME": str(tmp_path / "data"),
                "DAGSTER_HOME": str(tmp_path / "dagster_home"), "EVALMISLEAD_PROBLEMS": "30",
                "EVALMISLEAD_LLM_URL": url, "PYTHONPATH": str(PROJECT_ROOT)})
    return env


@pytest.mark.slow
def test_a_server_that_is_down_is_one_line_before_any_step(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code"],
                          env=_env(tmp_path, url), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1, proc.stderr  # one line, no stack trace
    assert err[0].startswith(f"evalmislead: model qwen2.5-coder-0.5b: LLM server unreachable at {url}"), err[0]
    assert "start it or fix EVALMISLEAD_LLM_URL" in err[0] and "no request sent" in err[0]
    assert "Traceback" not in proc.stdout + proc.stderr and "Stack Trace" not in proc.stdout + proc.stderr
    # nothing ran: not the problems' validation, no Dagster run at all
    assert "materializing" not in proc.stdout
    assert "every answer came from the cache" not in proc.stdout + proc.stderr
    with DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        assert instance.get_runs() == []


def test_any_http_answer_is_a_server_that_is_up() -> None:
    with FakeLLMServer() as fake:
        fake.props_mode = "status:503"  # loading its model: the batch's own probe waits for it
        assert unreachable([fake.url], "fix it", retries=0) == ""
        fake.props_mode = "status:404"  # a hosted endpoint without /props
        assert unreachable([fake.url], "fix it", retries=0) == ""
        fake.props_mode = "hang"  # takes the connection, never answers: left to the batch's probe
        assert unreachable([fake.url], "fix it", retries=0) == ""
        fake.props_mode = "ok"
        dead = f"http://127.0.0.1:{_free_port()}"
        assert unreachable([dead, fake.url], "fix it", retries=0) == ""  # one of a model's urls is enough
    line = unreachable([dead], "start it or fix X", retries=1, backoff_s=0.01)
    assert line.startswith(f"LLM server unreachable at {dead} after 2 attempts (ConnectError")
    assert line.endswith("; start it or fix X") and "\n" not in line


def test_models_and_the_judge_are_checked_the_embedded_server_is_not() -> None:
    seen: list[list[str]] = []

    def check(urls: list[str], hint: str) -> str:
        seen.append(urls)
        return f"down at {urls[0]}; {hint}" if "dead" in urls[0] else ""

    reaches = {"a": Reach(("http://dead",), "the urls of model a in study file s.toml"),
               "b": Reach(("http://up",), "EVALMISLEAD_LLM_URL"), "c": Reach(served="bundled x")}
    down = unreachable_servers(reaches, ["http://dead-judge"], check)
    assert seen == [["http://dead"], ["http://up"], ["http://dead-judge"]]
    assert [d.model for d in down] == ["a", ""]
    assert down[0].line() == ("evalmislead: model a: down at http://dead; start it or fix the urls of model a in "
                              "study file s.toml (checked before any step ran; no request sent)")
    assert down[1].line().startswith("evalmislead: the spec judge (EVALMISLEAD_JUDGE_URL): down at http://dead-judge")


def test_a_record_with_a_stack_trace_keeps_its_first_line() -> None:
    import logging

    record = logging.LogRecord("dagster", logging.ERROR, __file__, 1,
                               'STEP_FAILURE - Execution of step "model_specs" failed.\n\nFailure: x\n\n'
                               'Stack Trace:\n  File "a.py", line 1\n', None, None)
    assert FoldStackTraces().filter(record)
    assert record.getMessage() == 'STEP_FAILURE - Execution of step "model_specs" failed.' + NOTE


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_step_that_fails_mid_run_prints_no_dagster_stack_trace(tmp_path: Path) -> None:
    """The server answers /props but refuses every chat request (400): the spec step fails after the
    problems are validated; Dagster's failure records keep one line each, the run's own line names it."""
    with FakeLLMServer(mode="status:400") as fake:
        proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code"],
                              env=_env(tmp_path, fake.url), cwd=tmp_path, capture_output=True, text=True,
                              timeout=1100)
        assert fake.chat_requests > 0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    assert "Stack Trace" not in out and 'File "' not in out, out[-4000:]
    assert "done problems+problem_validation+mutants" in proc.stdout
    assert "evalmislead: model_specs [off] failed: model_specs: " in proc.stderr
    assert 'STEP_FAILURE - Execution of step "model_specs" failed.' + NOTE in out
