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
def test_main_job_runs_the_chain_and_writes_the_report(tmp_path) -> None:
    env = _env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code,fixed_code,model_spec"],
        env=env, capture_output=True, text=True, timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "report at" in proc.stdout
    con = duckdb.connect(env["EVALMISLEAD_DB"], read_only=True)
    gens = con.execute("SELECT condition, thinking, task_id, json_extract(request_json, '$.max_tokens')::INT "
                       "FROM test_generations ORDER BY condition").fetchall()
    assert gens == [("buggy_code", "off", "Python/30", 96), ("fixed_code", "off", "Python/30", 96),
                    ("model_spec", "off", "Python/30", 96)]
    assert con.execute("SELECT count(*) FROM generated_tests").fetchall()[0][0] == 3
    rates = con.execute("SELECT count(*) FROM condition_rates WHERE thinking = 'off'").fetchall()[0][0]
    assert rates >= 3
    # the runs are real Dagster runs, recorded in DAGSTER_HOME
    assert (tmp_path / "dagster_home" / "history").exists() or any((tmp_path / "dagster_home").iterdir())
