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
    monkeypatch.delenv("EVALMISLEAD_PROBLEMS", raising=False)
    assert settings.problem_subset() == [0, 1, 2, 30] and "study file" in settings.problem_source()
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "5")
    assert settings.problem_subset() == [5] and settings.problem_source() == "EVALMISLEAD_PROBLEMS"
    monkeypatch.delenv("EVALMISLEAD_PROBLEMS")
    study.write_text('problems = "9-3"\n' + STUDY)
    with pytest.raises(ConfigError, match=r"problems in .*study.toml has the reversed range"):
        settings.problem_subset()
    study.write_text('problems = [1, 2]\n' + STUDY)
    assert settings.problem_subset() == [1, 2]
    study.write_text('problem = "1"\n' + STUDY)
    study_models.reset()
    with pytest.raises(ConfigError, match="unknown top-level key"):
        study_models.study()
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
                if "problems " in line and "DuckDB" in line:
                    break
        finally:
            proc.terminate()
            proc.wait(timeout=300)
        assert "problems 1 (from EVALMISLEAD_PROBLEMS)" in seen[-1], "".join(seen)[-3000:]
