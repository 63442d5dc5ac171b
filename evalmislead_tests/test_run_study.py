"""The README's main job, end to end on the embedded llama-server (small subset, small caps)."""

import os
import subprocess
import sys

import duckdb
import pytest


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


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_main_job_on_the_bundled_coder_model_shows_the_study(tmp_path) -> None:
    """The README's first command on the embedded default: real tests, executed, classified, reported.

    One problem (task 2, whose answers fit the demo's cap in every primary condition), the demo's
    768-token cap, a one-answer probe and a short judge cap keep it to a few minutes on 2 cores.
    """
    env = _env(tmp_path) | {"EVALMISLEAD_PROBLEMS": "2", "EVALMISLEAD_MAX_TOKENS_OFF": "768",
                            "EVALMISLEAD_PROBE_N": "1", "EVALMISLEAD_JUDGE_MAX_TOKENS": "64"}
    proc = subprocess.run(
        [sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code,fixed_code,model_spec"],
        env=env, capture_output=True, text=True, timeout=1500,
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
