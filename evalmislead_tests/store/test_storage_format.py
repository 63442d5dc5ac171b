"""The study database opens in DuckDB 1.x readers: every path that creates the file writes
storage v1.0.0, the version is recorded in the file, a 2.x-format file is migrated once with nothing
lost, and the pinned DuckDB CLI 1.5.6 the bootstrap installs reads a demo-sized database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import DagsterInstance, asset, materialize

from evalmislead_assets.cli import main
from evalmislead_assets.cli.sql_session import find_duckdb_cli
from evalmislead_assets.resources import WarehouseIOManager
from evalmislead_assets.store import file_format as storage_format
from evalmislead_assets.store.database import Warehouse

ROOT = Path(__file__).resolve().parents[2]
ONE_X = range(64, storage_format.MAX_1X_HEADER_VERSION + 1)


def _info(path: Path) -> dict[str, str]:
    with duckdb.connect(str(path), read_only=True) as con:
        return dict(con.execute("SELECT key, value FROM storage_info").fetchall())


def _outcomes(n: int, cond: str = "buggy_code") -> pd.DataFrame:
    return pd.DataFrame({"condition": cond, "thinking": "off", "task_id": [f"Python/{i}" for i in range(n)],
                         "problem_idx": list(range(n)), "test_id": [f"test_{i}" for i in range(n)],
                         "buggy_status": "passed", "fixed_status": "failed", "outcome": "misleading"})


def test_a_new_file_is_written_in_the_1x_format_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    Warehouse(path).append_rows("test_outcomes", _outcomes(3))
    assert storage_format.header_version(path) == storage_format.TARGET_HEADER_VERSION == 64
    info = _info(path)
    assert info["storage_version"] == "v1.0.0+" and "DuckDB 1.0" in info["readable_by"]
    assert len(info["database_id"]) == 32 and "duckdb" in info["created_with"]
    # later connections (no setting needed) keep writing the same format
    Warehouse(path).append_rows("test_outcomes", _outcomes(2, "fixed_code"))
    with duckdb.connect(str(path)) as con:
        con.execute("INSERT INTO problems (task_id) VALUES ('Python/1')")
    assert storage_format.header_version(path) == 64


@asset(name="test_outcomes")
def _outcomes_asset() -> pd.DataFrame:
    return _outcomes(2)


def test_every_path_that_creates_the_file_writes_the_1x_format(tmp_path: Path) -> None:
    # the Dagster IO manager (what `evalmislead run` and `dagster asset materialize` use)
    dagster_db = tmp_path / "dagster.duckdb"
    assert materialize([_outcomes_asset], instance=DagsterInstance.ephemeral(),
                       resources={"io_manager": WarehouseIOManager(path=str(dagster_db))}).success
    # `evalmislead sql --save-snapshot` and the schema migration command on a path with no file yet
    snapshot = tmp_path / "snap" / "copy.duckdb"
    assert main(["sql", "--db", str(dagster_db), "--save-snapshot", str(snapshot), "select 1"]) == 0
    migrated = tmp_path / "fresh.duckdb"
    subprocess.run([sys.executable, "-m", "evalmislead_assets.store.schema", "--migrate", str(migrated)], check=True,
                   cwd=ROOT, capture_output=True)
    for path in (dagster_db, snapshot, migrated):
        assert storage_format.header_version(path) == 64, path


def _file_in_2x_format(path: Path) -> None:
    """A study file as earlier versions wrote it: DuckDB 2.x's default format, tables with rows, a view."""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE llm_cache (cache_key VARCHAR PRIMARY KEY, request_json VARCHAR, "
                    "response_json VARCHAR)")
        con.execute("INSERT INTO llm_cache SELECT 'k' || i, '{}', '{\"choices\": []}' FROM range(500) t(i)")
        con.execute("CREATE TABLE generated_tests (condition VARCHAR, thinking VARCHAR, task_id VARCHAR, "
                    "test_ids VARCHAR[])")
        con.execute("INSERT INTO generated_tests VALUES ('buggy_code', 'off', 'Python/30', ['test_a', 'test_b'])")
    assert storage_format.header_version(path) not in ONE_X


def test_a_2x_file_is_migrated_once_with_a_one_line_notice_and_nothing_lost(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _file_in_2x_format(path)
    lines: list[str] = []
    Warehouse(path, report=lines.append).append_rows("test_outcomes", _outcomes(1))
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "from DuckDB storage v2.0.0+ to v1.0.0" in lines[0] and "2 tables, 501 rows, all copied" in lines[0]
    assert storage_format.header_version(path) == 64
    backup = path.with_name("old.duckdb.2x-format-backup")
    assert backup.is_file() and storage_format.header_version(backup) not in ONE_X
    with duckdb.connect(str(path)) as con:
        assert con.execute("SELECT count(*) FROM llm_cache").fetchall()[0][0] == 500
        assert con.execute("SELECT test_ids FROM generated_tests").fetchall() == [(["test_a", "test_b"],)]
        assert con.execute("SELECT count(*) FROM test_outcomes").fetchall()[0][0] == 1
        with pytest.raises(duckdb.ConstraintException):  # the primary key came along
            con.execute("INSERT INTO llm_cache (cache_key) VALUES ('k1')")
    info = _info(path)
    assert info["migrated_from"] == "v2.0.0+" and info["storage_version"] == "v1.0.0+"
    again: list[str] = []
    Warehouse(path, report=again.append).append_rows("test_outcomes", _outcomes(1, "fixed_code"))
    assert again == []
    assert storage_format.readable_by("v1.4.0+") == "DuckDB 1.4 and later only"
    assert storage_format.readable_by("v2.0.0+") == "DuckDB 2.0 and later only"


def test_evalmislead_sql_on_a_2x_file_leaves_it_as_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "old.duckdb"
    _file_in_2x_format(path)
    before = storage_format.header_version(path)
    assert main(["sql", "--db", str(path), "--csv", "select count(*) n from llm_cache"]) == 0
    assert capsys.readouterr().out.split() == ["n", "500"]
    assert storage_format.header_version(path) == before and not path.with_name("old.duckdb.2x-format-backup").exists()
    out = subprocess.run([sys.executable, "-m", "evalmislead_assets.store.format_check", str(path)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "2.x only: run with --migrate" in out
    res = subprocess.run([sys.executable, "-m", "evalmislead_assets.store.format_check", "--migrate", str(path)], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    assert "evalmislead: migrated" in res.stderr and "header version 64 (opens in DuckDB 1.x readers)" in res.stdout


def _demo_database(wh: Warehouse) -> None:
    """A demo-sized study written by the project's own writer: outcomes, files with list columns, rates."""
    for cond, n in (("buggy_code", 12), ("fixed_code", 11), ("model_spec", 3)):
        wh.replace_rows("test_outcomes", _outcomes(n, cond), {"condition": cond, "thinking": "off"})
        wh.replace_rows("generated_tests", pd.DataFrame({
            "condition": cond, "thinking": "off", "task_id": ["Python/30"], "problem_idx": [30],
            "source": ["def test_x():\n    assert True\n"], "n_tests": [n],
            "test_ids": [[f"test_{i}" for i in range(n)]], "import_ok": [True],
        }), {"condition": cond, "thinking": "off"})
    wh.replace_rows("condition_rates", pd.DataFrame({
        "plan_sha256": "abc", "condition": ["buggy_code", "fixed_code", "model_spec"], "thinking": "off",
        "n_tests": [12, 11, 3], "n_misleading": [12, 11, 3], "misleading_rate": [1.0, 1.0, 1.0],
        "misleading_ci_low": [0.7, 0.69, float("nan")], "level": 0.9875,
    }))


def test_the_bootstrap_cli_reads_a_demo_database(seeded_warehouse: Warehouse) -> None:
    """The README's `duckdb -readonly data/evalmislead.duckdb "select * from condition_rates"`, with the
    DuckDB CLI the bootstrap installs (duckdb-cli 1.5.6, the newest 1.x on the registry)."""
    _demo_database(seeded_warehouse)
    cli = find_duckdb_cli()
    assert cli is not None, "no DuckDB CLI: scripts/bootstrap.sh installs duckdb-cli==1.5.6 into .venv/bin"
    version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("v1.5.6"), version
    path = str(seeded_warehouse.path)
    res = subprocess.run([str(cli), "-readonly", path, "select * from condition_rates"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert all(c in res.stdout for c in ("buggy_code", "fixed_code", "model_spec", "0.9875"))
    res = subprocess.run([str(cli), "-readonly", "-csv", path,
                          "select condition, count(*) from test_outcomes group by 1 order by 1; "
                          "select count(*) from problems; select sum(len(test_ids)) from generated_tests; "
                          "select sum(n_tests) from problem_cells"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["condition,count_star()", "buggy_code,12", "fixed_code,11", "model_spec,3",
                                  "count_star()", "164", "sum(len(test_ids))", "26", "sum(n_tests)", "26"]


@pytest.mark.parametrize("doc", ["README.md", "docs/querying.md"])
def test_the_documented_duckdb_line_runs_as_written(seeded_warehouse: Warehouse, doc: str) -> None:
    """The README's and the docs' own line, with data/evalmislead.duckdb pointed at the demo database."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith(".venv/bin/duckdb -readonly "))
    command = line.split("#", 1)[0].strip()
    assert command == '.venv/bin/duckdb -readonly data/evalmislead.duckdb "select * from condition_rates"'
    _demo_database(seeded_warehouse)
    data = seeded_warehouse.path.parent / "data"
    data.mkdir()
    (data / "evalmislead.duckdb").symlink_to(seeded_warehouse.path)
    cli = find_duckdb_cli()
    assert cli is not None
    res = subprocess.run(["bash", "-c", command.replace(".venv/bin/duckdb", str(cli), 1)],
                         cwd=seeded_warehouse.path.parent, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "buggy_code" in res.stdout and "misleading_rate" in res.stdout


def test_a_session_on_a_2x_file_falls_back_to_the_built_in_prompt(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _file_in_2x_format(path)
    res = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "sql", "--db", str(path)],
                         input="select count(*) as n from llm_cache;\n", capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "SQL prompt" in res.stderr and "2.x's storage format" in res.stderr
    assert "500" in res.stdout
    assert storage_format.header_version(path) not in ONE_X  # read as it is
