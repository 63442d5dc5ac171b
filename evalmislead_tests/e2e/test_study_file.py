"""The study file holds the study: `problems = "..."` in study.toml is honoured by `evalmislead run` and by
`dagster asset materialize` alike; EVALMISLEAD_PROBLEMS and `--problems` override it, visibly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from evalmislead_assets import settings, study_models
from evalmislead_assets.errors import ConfigError
from evalmislead_tests.fake_llm_server import FakeLLMServer

STUDY = '[[models]]\nname = "coder"\nbundled = "qwen2.5-coder-0.5b"\n'


def test_problems_from_the_study_file_and_their_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study = tmp_path / "study.toml"
    study.write_text('problems = "0-2,30"\n' + STUDY)
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(study))
    settings.forget_study_text()
    monkeypatch.delenv("EVALMISLEAD_PROBLEMS", raising=False)
    assert settings.problem_subset() == [0, 1, 2, 30] and "study file" in settings.problem_source()
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "5")
    assert settings.problem_subset() == [5] and settings.problem_source() == "EVALMISLEAD_PROBLEMS"
    monkeypatch.delenv("EVALMISLEAD_PROBLEMS")
    study.write_text('problems = "9-3"\n' + STUDY)
    settings.forget_study_text()  # read once per process: this test edits it on purpose
    with pytest.raises(ConfigError, match=r"problems in .*study.toml has the reversed range"):
        settings.problem_subset()
    study.write_text('problems = [1, 2]\n' + STUDY)
    settings.forget_study_text()  # read once per process: this test edits it on purpose
    assert settings.problem_subset() == [1, 2]
    study.write_text('problem = "1"\n' + STUDY)
    settings.forget_study_text()  # read once per process: this test edits it on purpose
    study_models.reset()
    with pytest.raises(ConfigError, match="unknown top-level key"):
        study_models.study()
    study_models.reset()


def test_the_study_file_is_read_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study = tmp_path / "study.toml"
    study.write_text('problems = "30"\n' + STUDY)
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(study))
    monkeypatch.delenv("EVALMISLEAD_PROBLEMS", raising=False)
    monkeypatch.delenv("EVALMISLEAD_MODELS", raising=False)
    study_models.reset()
    try:
        assert settings.problem_subset() == [30] and study_models.check().names == ["coder"]
        study.write_text('problems = "1,30"\n' + STUDY + '\n[[models]]\nname = "other"\ngguf = "/nope.gguf"\n')
        # the edit is not seen by this process (a run): not by the settings, the checks or the study
        assert settings.problem_subset() == [30] and study_models.check().names == ["coder"]
        assert study_models.study().names == ["coder"]
        study_models.reset()  # a new process (the next run) reads the edit
        assert settings.problem_subset() == [1, 30] and study_models.check().names == ["coder", "other"]
    finally:
        study_models.reset()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_dagster_materialize_and_the_cli_read_the_study_files_problems(tmp_path: Path) -> None:
    study = tmp_path / "study.toml"
    study.write_text('problems = "0-2"\n' + STUDY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALMISLEAD_", "DAGSTER_HOME"))}
    with FakeLLMServer() as srv:
        env.update({"EVALMISLEAD_STUDY": str(study), "EVALMISLEAD_HOME": str(tmp_path / "home"),
                    "DAGSTER_HOME": str(tmp_path / "dh"), "EVALMISLEAD_LLM_URL": srv.url})
        (tmp_path / "dh").mkdir()
        base = [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "evalmislead_assets.definitions"]
        for extra in (["--select", "problems,problem_validation"], ["--select", "model_specs", "--partition", "off"]):
            proc = subprocess.run(base + extra, env=env, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        con = duckdb.connect(str(tmp_path / "home" / "evalmislead.duckdb"), read_only=True)
        assert [t for t, in con.execute("SELECT task_id FROM model_specs ORDER BY problem_idx").fetchall()] == [
            "Python/0", "Python/1", "Python/2"]
        con.close()
        # the CLI's header names the subset and where it came from; --problems overrides the file (the run is
        # stopped once its header is out: the header is what is checked)
        proc = subprocess.Popen([sys.executable, "-m", "evalmislead_assets.cli", "run", "--problems", "1",
                                 "--conditions", "buggy_code"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        seen = []
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                seen.append(line)
                if line.startswith("evalmislead: DuckDB"):  # the header: where the data goes, which problems
                    break
        finally:
            proc.terminate()
            proc.wait(timeout=300)
        assert "; 1 problem (1) from EVALMISLEAD_PROBLEMS;" in seen[-1], "".join(seen)[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_study_file_edited_during_a_run_applies_to_the_next_run(tmp_path: Path) -> None:
    """A model added to study.toml (and its problems changed) while `evalmislead run` works must not fail
    the running study at its next step. The run reads the file once: it finishes with the study it started with,
    and the next run reads the edit (here it names the added model's missing file, exit 2)."""
    study = tmp_path / "study.toml"
    with FakeLLMServer() as srv:
        study.write_text(f'problems = "30"\n[[models]]\nname = "m-a"\nurls = ["{srv.url}"]\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALMISLEAD_", "DAGSTER_HOME"))}
        env.update({"EVALMISLEAD_STUDY": str(study), "EVALMISLEAD_HOME": str(tmp_path / "home"),
                    "DAGSTER_HOME": str(tmp_path / "dh"), "EVALMISLEAD_PROBE_N": "1"})
        srv.gate.clear()  # the run's first request (model_specs) waits while the file is edited
        log = tmp_path / "run.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions",
                                     "buggy_code"], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            assert srv.wait_for_requests(1, timeout_s=900), log.read_text()[-3000:]
            study.write_text(f'problems = "29,30"\n[[models]]\nname = "m-a"\nurls = ["{srv.url}"]\n\n'
                             '[[models]]\nname = "m-b"\ngguf = "/nonexistent/m-b.gguf"\n')
        finally:
            srv.gate.set()
        assert proc.wait(timeout=1500) == 0, log.read_text()[-4000:]
        out_text = log.read_text()
        assert "m-b" not in out_text and "Traceback" not in out_text
        con = duckdb.connect(str(tmp_path / "home" / "evalmislead.duckdb"), read_only=True)
        try:
            assert con.execute("SELECT DISTINCT problem_idx, model_name FROM test_generations").fetchall() == [(30, "m-a")]
        finally:
            con.close()
        # the next run reads the edited file
        nxt = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code"],
                             env=env, capture_output=True, text=True, timeout=600)
    assert nxt.returncode == 2 and "model m-b: gguf file /nonexistent/m-b.gguf is missing" in nxt.stderr, \
        nxt.stderr[-2000:]
