"""The data folder knows its study: the study file a run used is recorded beside the DuckDB file, every later
route resolves to it, and another study pointed at the same data is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalmislead_assets import config_check, recorded_study, settings, study_models
from evalmislead_assets.errors import ConfigError

ONE_5B = '[[models]]\nname = "qwen2.5-coder-1.5b"\nbundled = "qwen2.5-coder-1.5b"\nslots = 1\n'
HALF_B = '[[models]]\nname = "qwen2.5-coder-0.5b"\nbundled = "qwen2.5-coder-0.5b"\n'


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh data folder and DuckDB file; no study variable set."""
    for name in ("EVALMISLEAD_STUDY", "EVALMISLEAD_MODELS", "EVALMISLEAD_PROBLEMS", "EVALMISLEAD_LLM_URL",
                 "EVALMISLEAD_EMBEDDED_MODEL", "EVALMISLEAD_MAX_TOKENS_OFF", "EVALMISLEAD_PROBE_N"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("EVALMISLEAD_DB", str(tmp_path / "data" / "study.duckdb"))
    settings.forget_study_text()
    study_models.study.cache_clear()
    yield tmp_path
    settings.forget_study_text()
    study_models.study.cache_clear()


def test_without_a_record_the_project_study_file_is_used(data: Path) -> None:
    assert settings.study_path() == settings.PROJECT_ROOT / "study.toml"
    assert recorded_study.read(settings.db_path()) is None


def test_the_recorded_study_is_what_every_later_route_reads(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pack_study = data / "pack" / "study.toml"
    pack_study.parent.mkdir()
    pack_study.write_text(ONE_5B)
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(pack_study))
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "0-3")
    config_check.check_before_run(pack=str(pack_study.parent), overrides={"EVALMISLEAD_PROBLEMS": "0-3"})

    copy, meta = recorded_study.record_paths(settings.db_path())
    assert copy.read_text() == ONE_5B  # the exact text: its sha256 is the file's
    described = json.loads(meta.read_text())
    assert described["sha256"] == recorded_study.sha256_text(ONE_5B)
    assert described["pack"] == str(pack_study.parent) and described["overrides"] == {"EVALMISLEAD_PROBLEMS": "0-3"}

    # a later route of the same data folder sets nothing: it reads the recorded study and its problems
    monkeypatch.delenv("EVALMISLEAD_STUDY")
    monkeypatch.delenv("EVALMISLEAD_PROBLEMS")
    settings.forget_study_text()
    study_models.study.cache_clear()
    assert settings.study_path() == pack_study.resolve()
    assert study_models.study().names == ["qwen2.5-coder-1.5b"]
    assert settings.problem_subset() == [0, 1, 2, 3]
    assert settings.problem_source() == "the data folder's last run"

    # the source gone (a pack moved): the recorded copy stands in for it
    pack_study.unlink()
    assert settings.study_path() == copy
    settings.forget_study_text()
    study_models.study.cache_clear()
    assert study_models.study().names == ["qwen2.5-coder-1.5b"]


def test_another_study_pointed_at_the_same_data_is_refused_in_one_line(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, other, same_text = data / "first.toml", data / "other.toml", data / "copy-of-first.toml"
    first.write_text(ONE_5B)
    other.write_text(HALF_B)
    same_text.write_text(ONE_5B)
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(first))
    config_check.check_before_run()

    monkeypatch.setenv("EVALMISLEAD_STUDY", str(other))
    with pytest.raises(ConfigError) as refused:
        settings.study_path()
    line = str(refused.value)
    assert "\n" not in line and str(other) in line and str(first.resolve()) in line
    assert "another data folder" in line

    # a file with the recorded text is the same study; an edit of the recorded file itself is the study going on
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(same_text))
    assert settings.study_path() == same_text
    first.write_text(ONE_5B + "max_tokens_off = 1024\n")
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(first))
    assert settings.study_path() == first


def test_the_cli_refuses_another_study_before_anything_runs(data: Path) -> None:
    first, other = data / "first.toml", data / "other.toml"
    first.write_text(ONE_5B)
    other.write_text(HALF_B)
    recorded_study.record(settings.db_path(), first, ONE_5B)
    env = {**dict(__import__("os").environ), "EVALMISLEAD_STUDY": str(other)}
    proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "export"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "is another study than the one the data folder" in proc.stderr


def test_a_damaged_record_is_one_line_naming_it(data: Path) -> None:
    _, meta = recorded_study.record_paths(settings.db_path())
    meta.parent.mkdir(parents=True)
    meta.write_text("{not json")
    with pytest.raises(ConfigError, match="study record .* cannot be read"):
        settings.study_path()


def test_recording_the_same_study_again_writes_nothing(data: Path) -> None:
    study = data / "s.toml"
    study.write_text(HALF_B)
    first = recorded_study.record(settings.db_path(), study, HALF_B, pack="p")
    _, meta = recorded_study.record_paths(settings.db_path())
    stamp = meta.stat().st_mtime_ns
    again = recorded_study.record(settings.db_path(), study, HALF_B)  # no pack named: the recorded one is kept
    assert again == first and meta.stat().st_mtime_ns == stamp
