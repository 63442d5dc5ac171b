"""Everything is checked before the first request: one line naming the fix, rc 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import DagsterInstance, asset, materialize

from evalmislead_assets import config_check, settings
from evalmislead_assets.analysis import plan as analysis_base
from evalmislead_assets.analysis import spec_labels as sl
from evalmislead_assets.analysis.reasoning_mentions import load_keywords
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.resources import WarehouseIOManager

BINARY = bytes(range(256)) * 4  # not UTF-8, with NUL bytes


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean data folder; every input file the shipped one."""
    for name in ("EVALMISLEAD_PROBLEMS", "EVALMISLEAD_SANDBOX_WORKERS", "EVALMISLEAD_ANALYSIS_PLAN",
                 "EVALMISLEAD_PROMPTS_DIR", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_JUDGE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("EVALMISLEAD_DB", str(tmp_path / "data" / "study.duckdb"))
    monkeypatch.setenv("EVALMISLEAD_REVIEW_CSV", str(tmp_path / "review.csv"))
    return tmp_path


def _one_line(exc: pytest.ExceptionInfo[ConfigError], *needles: str) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg
    return msg


# ---------------------------------------------------------------- the DB path


def test_db_path_absent_or_a_duckdb_file_passes(env: Path) -> None:
    config_check.check_db_path(env / "new" / "deeper" / "study.duckdb")  # folders are made on first write
    db = env / "real.duckdb"
    duckdb.connect(str(db)).close()
    config_check.check_db_path(db)


def test_empty_db_file_is_refused_as_duckdb_refuses_it(env: Path) -> None:
    empty = env / "empty.duckdb"
    empty.touch()
    with pytest.raises(duckdb.IOException):
        duckdb.connect(str(empty))
    with pytest.raises(ConfigError) as exc:
        config_check.check_db_path(empty)
    _one_line(exc, "EVALMISLEAD_DB", "empty file")


def test_db_path_that_is_a_directory_is_refused(env: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        config_check.check_db_path(env)
    _one_line(exc, "EVALMISLEAD_DB", "is a directory")


def test_db_path_that_is_a_garbage_file_is_refused(env: Path) -> None:
    garbage = env / "notes.duckdb"
    garbage.write_text("these are my notes, not a database\n")
    with pytest.raises(ConfigError) as exc:
        config_check.check_db_path(garbage)
    _one_line(exc, "EVALMISLEAD_DB", "not a DuckDB database")
    assert garbage.read_text() == "these are my notes, not a database\n"  # untouched


def test_db_path_under_a_file_is_refused(env: Path) -> None:
    (env / "afile").write_text("x")
    with pytest.raises(ConfigError) as exc:
        config_check.check_db_path(env / "afile" / "study.duckdb")
    _one_line(exc, "is a file, not a folder")


# ---------------------------------------------------------------- settings


def test_empty_problem_list_is_refused_not_all(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "")
    with pytest.raises(ConfigError) as exc:
        settings.problem_subset()
    _one_line(exc, "EVALMISLEAD_PROBLEMS", "names no problem")
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", " , ")
    with pytest.raises(ConfigError):
        settings.problem_subset()
    monkeypatch.delenv("EVALMISLEAD_PROBLEMS")
    assert settings.problem_subset() is None  # unset: all problems


def test_reversed_range_is_refused(env: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        settings.parse_problem_list("5-3")
    _one_line(exc, "reversed range '5-3'", "3-5")
    assert settings.parse_problem_list("3-5") == [3, 4, 5]


@pytest.mark.parametrize("name, value", [
    ("EVALMISLEAD_SANDBOX_WORKERS", "abc"), ("EVALMISLEAD_JUDGE_URL", "judge:8080"),
    ("EVALMISLEAD_JUDGE_MAX_TOKENS", "x"), ("EVALMISLEAD_PROBE_N", "0"), ("EVALMISLEAD_DATASET_SOURCE", "web"),
])
def test_every_setting_is_checked_up_front(env: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as exc:
        config_check.check_before_run()
    _one_line(exc, name)


# ---------------------------------------------------------------- input files


def test_binary_plan_is_one_line_naming_the_file(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = env / "plan.json"
    plan.write_bytes(BINARY)
    monkeypatch.setenv("EVALMISLEAD_ANALYSIS_PLAN", str(plan))
    with pytest.raises(ConfigError) as exc:
        config_check.check_before_run()
    _one_line(exc, f"analysis plan {plan}")


def test_plan_that_is_not_an_object_is_one_line(env: Path) -> None:
    plan = env / "plan.json"
    plan.write_text("[1, 2]")
    with pytest.raises(ConfigError) as exc:
        analysis_base.load_plan(plan)
    _one_line(exc, f"analysis plan {plan}", "not an object")


def test_binary_keyword_file_is_one_line_naming_the_file(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = settings.analysis_plan_path()
    (env / "analysis_plan.json").write_bytes(shipped.read_bytes())
    keywords = env / json.loads(shipped.read_text())["reasoning_mentions"].get("keywords_file", "reasoning_keywords.txt")
    keywords.write_bytes(BINARY)
    monkeypatch.setenv("EVALMISLEAD_ANALYSIS_PLAN", str(env / "analysis_plan.json"))
    with pytest.raises(ConfigError) as exc:
        config_check.check_before_run()
    _one_line(exc, f"keyword file {keywords}", "not UTF-8")
    with pytest.raises(ConfigError):
        load_keywords(keywords)


def test_binary_review_csv_is_one_line_naming_the_file(env: Path) -> None:
    review = env / "review.csv"
    review.write_bytes(BINARY)
    with pytest.raises(ConfigError) as exc:
        config_check.check_before_run()
    _one_line(exc, f"review file {review}")
    review.write_bytes(b"thinking,task_id,human_transcribes_bug,human_states_correct\noff,Python/0,\x00yes,\n")
    with pytest.raises(ConfigError) as exc:
        sl.read_review_csv(review)
    _one_line(exc, f"review file {review} line 2")


def _review_with_multiline_specs(path: Path) -> None:
    specs = pd.DataFrame({"thinking": "off", "task_id": ["Python/0", "Python/1"], "problem_idx": [0, 1],
                          "spec_text": ["Return x.\nFor every x.", "Return y."]})
    problems = pd.DataFrame({"task_id": ["Python/0", "Python/1"], "problem_idx": [0, 1], "entry_point": "f",
                             "buggy_code": "def f(x):\n    return x\n", "fixed_code": "def f(x):\n    return x + 1\n"})
    assert sl.write_review_csv(path, specs, problems) == 2


def test_review_error_names_the_file_line_not_the_record_number(env: Path) -> None:
    review = env / "review.csv"
    _review_with_multiline_specs(review)
    lines = review.read_text(encoding="utf-8").splitlines()
    # the second record's label columns sit on the file's last line; the record number would be 3
    lines[-1] = lines[-1].replace(",,,", ",perhaps,,")
    review.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert len(lines) > 3
    with pytest.raises(ConfigError) as exc:
        config_check.check_before_run()
    _one_line(exc, f"review file {review} line {len(lines)}:", "'perhaps'")


# ---------------------------------------------------------------- in a Dagster run, and in the CLI


def _materialize_counting_steps():
    """Materialize one asset through the project's IO manager; also return how often its step body ran."""
    ran: list[int] = []

    @asset(name="problems")
    def counted() -> pd.DataFrame:
        ran.append(1)
        return pd.DataFrame({"task_id": ["Python/0"], "problem_idx": [0]})

    res = materialize([counted], resources={"io_manager": WarehouseIOManager()},
                      instance=DagsterInstance.ephemeral(), raise_on_error=False)
    return res, ran


def test_directory_db_fails_at_resource_setup_with_its_own_message(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not "DagsterExecutionHandleOutputError: Error occurred while handling output" after the step ran."""
    monkeypatch.setenv("EVALMISLEAD_DB", str(env))
    res, ran = _materialize_counting_steps()
    assert not res.success and not ran
    errors = [e.event_specific_data.error for e in res.all_events
              if e.event_type_value in ("RESOURCE_INIT_FAILURE", "RUN_FAILURE") and e.event_specific_data]
    inner = [err for err in errors if err is not None and err.cls_name == "ConfigError"]
    assert inner and "is a directory" in inner[0].message
    assert not any("HandleOutput" in (err.cls_name or "") for err in errors if err is not None)


def _cli_run(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALMISLEAD_")}
    env.update({"EVALMISLEAD_HOME": str(tmp_path / "data"), "EVALMISLEAD_DB": str(tmp_path / "data" / "s.duckdb"),
                "DAGSTER_HOME": str(tmp_path / "dagster_home"),
                "EVALMISLEAD_LLM_URL": "http://127.0.0.1:9", **extra})  # discard port: a request would fail
    return subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run"], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("extra, needle", [
    ({"EVALMISLEAD_SANDBOX_WORKERS": "abc"}, "EVALMISLEAD_SANDBOX_WORKERS"),
    ({"EVALMISLEAD_PROBLEMS": ""}, "EVALMISLEAD_PROBLEMS"),
    ({"EVALMISLEAD_PROBLEMS": "5-3"}, "reversed range"),
])
def test_cli_refuses_bad_settings_before_anything_runs(tmp_path: Path, extra: dict[str, str], needle: str) -> None:
    proc = _cli_run(tmp_path, **extra)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().count("\n") == 0 and needle in proc.stderr
    assert not (tmp_path / "dagster_home").exists() and not (tmp_path / "data" / "s.duckdb").exists()


def test_cli_refuses_a_garbage_db_file_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "s.duckdb").write_bytes(BINARY)
    proc = _cli_run(tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().count("\n") == 0 and "not a DuckDB database" in proc.stderr
    assert not (tmp_path / "dagster_home").exists()


def test_cli_failure_line_names_the_innermost_cause_not_the_dagster_wrapper(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check that fails inside a run (a file broken after the CLI's own check) reads as its own message."""
    from evalmislead_assets.cli.instance_runs import first_failure

    monkeypatch.setenv("EVALMISLEAD_DB", str(env))

    @asset(name="problems")
    def never() -> pd.DataFrame:
        raise AssertionError("not reached")

    res = materialize([never], resources={"io_manager": WarehouseIOManager()},
                      instance=DagsterInstance.ephemeral(), raise_on_error=False)
    line = first_failure(res.all_events)
    assert "is a directory" in line and "resource_fn" not in line and "Dagster" not in line, line


def test_bad_worker_count_fails_a_dagster_run_before_its_first_step(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_SANDBOX_WORKERS", "abc")
    res, ran = _materialize_counting_steps()
    assert not res.success and not ran


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_dagster_asset_materialize_names_the_innermost_cause(tmp_path: Path) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes((Path(__file__).resolve().parents[2] / "dagster.yaml").read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALMISLEAD_")}
    env.update({"DAGSTER_HOME": str(home), "EVALMISLEAD_DB": str(tmp_path), "EVALMISLEAD_HOME": str(tmp_path / "d")})
    proc = subprocess.run([str(Path(sys.executable).parent / "dagster"), "asset", "materialize", "-m",
                           "evalmislead_assets.definitions", "--select", "problems"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=500)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"ConfigError: EVALMISLEAD_DB={tmp_path} is a directory" in out
    assert "HandleOutput" not in out and "STEP_START" not in out  # stopped before the step
