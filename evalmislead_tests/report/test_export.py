"""Reproduction package: contents, manifest hashes, formats, CLI errors."""

import json

import pandas as pd
import pytest

from evalmislead_assets import settings
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.cli import main
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.report import export
from evalmislead_assets.store.database import Warehouse


def settings_paths() -> dict:
    """The paths the CLI passes (settings' plan and review CSV; the fixture points the CSV at tmp_path)."""
    review = settings.review_csv_path()
    return {"plan_path": settings.analysis_plan_path(), "review_csvs": {review.name: review}}


SOURCE = "from solution import f\n\ndef test_one():\n    assert f(1) == 0\n"


@pytest.fixture()
def db(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALMISLEAD_REVIEW_CSV", str(tmp_path / "review.csv"))
    monkeypatch.setenv("EVALMISLEAD_REPORT_DIR", str(tmp_path / "no_report"))
    (tmp_path / "review.csv").write_text("thinking,task_id,human_transcribes_bug,human_states_correct\n"
                                         "off,Python/0,yes,no\n", encoding="utf-8")
    wh = Warehouse(tmp_path / "s.duckdb")
    key = {"condition": "buggy_code", "thinking": "off"}
    wh.replace_rows("generated_tests", pd.DataFrame([
        {**key, "task_id": "Python/0", "problem_idx": 0, "source": SOURCE, "n_tests": 1, "import_ok": True},
        {**key, "task_id": "Python/1", "problem_idx": 1, "source": "", "n_tests": 0, "import_ok": False},
    ]), where=key)
    wh.replace_rows("test_outcomes", pd.DataFrame([
        {**key, "task_id": "Python/0", "problem_idx": 0, "test_id": "test_one", "buggy_status": "passed",
         "fixed_status": "failed", "outcome": "misleading"},
    ]), where=key)
    return wh.path


def test_package_contents_and_manifest(db, tmp_path):
    out = tmp_path / "pkg"
    res = export.export_package(db, out, archive=True, **settings_paths())
    m = json.loads((out / "manifest.json").read_text())
    assert m == res.manifest and m["plan_sha256"] == load_plan(settings.analysis_plan_path()).sha256
    paths = {f["path"] for f in m["files"]}
    assert {"plan/analysis_plan.json", "plan/analysis_plan_changes.md", "prompts/spec_judge.md",
            "prompts/reasoning_keywords.txt", "tables/test_outcomes.parquet", "tables/generated_tests.parquet",
            "generated_tests/off/buggy_code/Python_0.py", "review/review.csv"} <= paths
    assert not any(p.startswith("generated_tests/") and "Python_1" in p for p in paths)  # no source, no file
    assert (out / "generated_tests/off/buggy_code/Python_0.py").read_text() == SOURCE
    assert m["tables"]["test_outcomes"] == 1 and m["tables"]["generated_tests"] == 2
    assert "llm_cache" not in m["tables"]
    back = pd.read_parquet(out / "tables/test_outcomes.parquet")
    assert list(back["outcome"]) == ["misleading"] and "fixed_status" in back.columns
    assert export.verify(out) == []
    sums = (out / "SHA256SUMS").read_text().splitlines()
    assert len(sums) == len(m["files"])
    assert res.archive and res.archive.is_file() and res.archive.suffix == ".zip"
    (out / "tables/test_outcomes.parquet").write_bytes(b"tampered")
    assert export.verify(out) == ["tables/test_outcomes.parquet"]


def test_jsonl_format(db, tmp_path):
    out = tmp_path / "pkg"
    export.export_package(db, out, fmt="jsonl", with_cache=True, **settings_paths())
    lines = (out / "tables/generated_tests.jsonl").read_text().splitlines()
    assert [json.loads(x)["task_id"] for x in lines] == ["Python/0", "Python/1"]
    assert (out / "tables/llm_cache.jsonl").exists()


def test_refuses_a_non_empty_folder_and_a_missing_db(db, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        export.export_package(db, tmp_path / "full", **settings_paths())
    with pytest.raises(ConfigError, match="no DuckDB file"):
        export.export_package(tmp_path / "none.duckdb", tmp_path / "o", **settings_paths())


def test_cli(db, tmp_path, capsys):
    assert main(["export", "--db", str(db), "--out", str(tmp_path / "cli_pkg")]) == 0
    assert "sha256sum -c SHA256SUMS" in capsys.readouterr().out
    assert (tmp_path / "cli_pkg" / "manifest.json").is_file()
    assert main(["export", "--db", str(tmp_path / "missing.duckdb"), "--out", str(tmp_path / "x")]) == 2
    assert "no DuckDB file" in capsys.readouterr().err


def test_cli_packs_every_models_review_csv_in_a_study_of_several(db, tmp_path, monkeypatch, capsys):
    """spec_labels writes review/<model key>/<name> per model; the package holds each, under the same path."""
    from evalmislead_assets import study_models

    study_file = tmp_path / "study.toml"
    study_file.write_text('[[models]]\nname = "alpha"\nurls = ["http://127.0.0.1:1"]\n\n'
                          '[[models]]\nname = "beta"\nurls = ["http://127.0.0.1:2"]\n')
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(study_file))
    for name in ("EVALMISLEAD_MODELS", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL"):
        monkeypatch.delenv(name, raising=False)
    study_models.reset()
    try:
        study = study_models.study()
        review = settings.review_csv_path()
        for m, answer in zip(study.models, ("yes", "no")):
            path = study.model_path(review, m)
            path.parent.mkdir(parents=True)
            path.write_text(f"thinking,task_id,human_transcribes_bug\noff,Python/0,{answer}\n", encoding="utf-8")
        assert main(["export", "--db", str(db), "--out", str(tmp_path / "two")]) == 0
    finally:
        study_models.reset()
    capsys.readouterr()
    files = json.loads((tmp_path / "two" / "manifest.json").read_text())["files"]
    packed = sorted(f["path"] for f in files if f["path"].startswith("review/"))
    assert packed == [f"review/{m.key}/{review.name}" for m in study.models]
    assert "off,Python/0,no" in (tmp_path / "two" / packed[1]).read_text()
    assert export.verify(tmp_path / "two") == []


def test_every_table_of_the_schema_is_exported(db, tmp_path):
    """The table list comes from the schema registry, so mutant_kills (and any table added
    later) is in the package; llm_cache only with --with-cache."""
    from evalmislead_assets.store import schema

    key = {"condition": "buggy_code", "thinking": "off"}
    Warehouse(db).replace_rows("mutant_kills", pd.DataFrame([
        {**key, "task_id": "Python/0", "problem_idx": 0, "mutant_id": 3, "killed": True, "killing_test": "test_one"},
    ]), where=key)
    out = tmp_path / "pkg"
    m = export.export_package(db, out, **settings_paths()).manifest
    assert set(m["tables"]) == set(schema.TABLES) - {"llm_cache"}
    assert m["tables"]["mutant_kills"] == 1
    assert pd.read_parquet(out / "tables/mutant_kills.parquet")["killing_test"].tolist() == ["test_one"]
    assert m["tables"]["storage_info"] >= 3  # the file's id and storage version travel with the package
