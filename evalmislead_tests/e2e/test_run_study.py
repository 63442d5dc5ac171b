"""The README's main job, end to end on the embedded llama-server (small subset, small caps)."""

import os
import signal
import subprocess
import sys

import duckdb
import pytest

from evalmislead_tests.fake_llm_server import FakeLLMServer


def _env(tmp_path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "EVALMISLEAD_DB": str(tmp_path / "study.duckdb"),
        "EVALMISLEAD_HOME": str(tmp_path / "data"),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "EVALMISLEAD_PROBLEMS": "30",
        "EVALMISLEAD_MAX_TOKENS_OFF": "96",
        "EVALMISLEAD_PROBE_N": "2",
    })
    env.pop("EVALMISLEAD_LLM_URL", None)
    return env


def test_bad_setting_is_one_line_and_exit_2(tmp_path) -> None:
    env = _env(tmp_path) | {"EVALMISLEAD_PROBLEMS": "30,oops"}
    proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "EVALMISLEAD_PROBLEMS" in proc.stderr


# Sized for a loaded 2-core machine with a background generation job beside it, with a wide margin.
# A bound on waiting, not a speed figure.
MAIN_JOB_TIMEOUT_S = 3600


@pytest.mark.slow
@pytest.mark.timeout(MAIN_JOB_TIMEOUT_S + 300)
def test_main_job_on_the_bundled_coder_model_shows_the_study(tmp_path) -> None:
    """The README's first command on the embedded default: real tests, executed, classified, reported.

    One problem (task 2, whose answers fit the demo's cap in every primary condition), the demo's
    768-token cap, a one-answer probe and a short judge cap keep it to a few minutes on 2 cores.
    """
    env = _env(tmp_path) | {"EVALMISLEAD_PROBLEMS": "2", "EVALMISLEAD_MAX_TOKENS_OFF": "768",
                            "EVALMISLEAD_PROBE_N": "1", "EVALMISLEAD_JUDGE_MAX_TOKENS": "64"}
    proc = subprocess.run(
        [sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code,fixed_code,model_spec"],
        env=env, capture_output=True, text=True, timeout=MAIN_JOB_TIMEOUT_S,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    con = duckdb.connect(env["EVALMISLEAD_DB"], read_only=True)
    gens = con.execute("SELECT condition, thinking, task_id, model, json_extract(request_json, '$.max_tokens')::INT "
                       "FROM test_generations ORDER BY condition").fetchall()
    model = "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"
    assert gens == [(c, "off", "Python/2", model, 768) for c in ("buggy_code", "fixed_code", "model_spec")]
    # the coder model writes tests that run: every primary condition has executed tests
    executed = dict(con.execute("SELECT condition, count(*) FROM test_outcomes GROUP BY condition").fetchall())
    assert set(executed) == {"buggy_code", "fixed_code", "model_spec"} and min(executed.values()) > 0, executed
    # the printed summary is drawn from those rows: the table, the comparisons, a worked example
    for condition, n in executed.items():
        assert any(line.split()[:2] == [condition, "off"] and str(n) in line.split() for line in out.splitlines())
    assert "Primary comparisons" in out and "Worked example" in out and "report at" in out
    assert "progress after buggy_code|off:" in out and "ETA" in out
    # the runs are real Dagster runs, recorded in DAGSTER_HOME
    from dagster import DagsterInstance, DagsterRunStatus

    instance = DagsterInstance.from_config(str(tmp_path / "dagster_home"))
    runs = instance.get_runs()
    assert len(runs) >= 6 and all(r.status == DagsterRunStatus.SUCCESS for r in runs)


# ---- faults against the fake server ----

def _fake_env(tmp_path, url: str) -> dict[str, str]:
    return _env(tmp_path) | {"EVALMISLEAD_PROBLEMS": "30,0", "EVALMISLEAD_LLM_URL": url}


def _calls(env: dict[str, str], where: str = "true") -> list[tuple]:
    con = duckdb.connect(env["EVALMISLEAD_DB"], read_only=True)
    try:
        return con.execute(f"SELECT asset, task_id, state, error, status_code FROM llm_calls WHERE {where} "
                           "ORDER BY ts").fetchall()
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_run_in_seconds_and_abandons_requests_in_flight(tmp_path, signum, code) -> None:
    with FakeLLMServer("hang") as fake:
        env = _fake_env(tmp_path, fake.url)
        proc = subprocess.Popen([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert fake.wait_for_requests(2, timeout_s=600, in_flight=True), "no request reached the fake server"
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=60)  # hung requests: without the stop it would wait 30 min
        finally:
            proc.kill()
    assert proc.returncode == code, out[-2000:] + err[-2000:]
    assert f"stopped by {signal.Signals(signum).name} during model_specs" in err
    assert "still running" not in err  # stopped by itself, not by the backstop
    assert "retrying" not in out + err and "Bad file descriptor" not in out + err
    calls = _calls(env)
    assert len(calls) == 2 and {c[2] for c in calls} == {"abandoned"} and all(c[3] is None for c in calls)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_server_errors_fail_the_run_with_the_count_and_a_rerun_asks_only_for_them(tmp_path) -> None:
    with FakeLLMServer() as fake:
        env = _fake_env(tmp_path, fake.url)
        fake.script = ["ok", "status:400"]
        cmd = [sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code"]
        first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert first.returncode == 1, first.stdout[-2000:] + first.stderr[-2000:]
        assert "model_specs [off] failed" in first.stderr and "1 of 2 requests failed" in first.stderr
        assert "HTTP 400" in first.stderr and "LLM requests this run: 2 sent, 1 answered, 1 errors" in first.stderr
        assert "done model_specs" not in first.stdout
        errored = [c[1] for c in _calls(env) if c[2] == "error"]
        assert len(errored) == 1

        fake.script = ["status:503"]  # one retried failure: the summary counts it
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    specs = _calls(env, "asset = 'model_specs'")
    assert [c[1] for c in specs[2:]] == errored * 2  # the re-run asked only the errored one (503, then its answer)
    assert [c[2] for c in specs[2:]] == ["error", "answered"]
    summary = [ln for ln in second.stdout.splitlines() if ln.startswith("LLM requests this run:")]
    assert len(summary) == 1 and "1 errors" in summary[0] and "HTTP 503" in summary[0], summary
