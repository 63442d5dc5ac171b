"""The static table registry (schema.py): complete at import, described, rendered into the docs' schema reference,
and generated_tests.test_ids stored as a DuckDB list (with old JSON-text files migrated)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from evalmislead_assets.execution.collection import stored_test_ids
from evalmislead_assets.store import schema
from evalmislead_assets.store.database import Warehouse

ROOT = Path(__file__).resolve().parents[2]
IDS = ["test_a[1, 2]", "test_b[x]", 'test_c["q\'s]', "test_d[a\\b]", "TestK::test_m"]


def test_registry_is_complete_without_importing_any_module() -> None:
    # a fresh interpreter that imports schema alone sees every table the project writes
    code = "import json; from evalmislead_assets.store import schema; print(json.dumps(sorted(schema.TABLES)))"
    alone = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                      cwd=ROOT).stdout)
    import evalmislead_assets.definitions  # noqa: F401  (every asset module, every analysis module)

    assert alone == sorted(schema.TABLES)
    for t in ("test_coverage", "condition_rates", "spec_labels", "reasoning_mentions", "mutants", "mutant_kills",
              "determinism_probe"):
        assert t in schema.TABLES


def test_no_module_registers_tables_at_import() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "evalmislead_assets").rglob("*.py")
                 if re.search(r"register_table\(|TABLES\[[^\]]+\]\s*=", p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_every_table_is_described_and_column_schema_is_plain_data() -> None:
    for name, spec in schema.SPECS.items():
        assert spec.description and "\n" not in spec.description, name
        cols = schema.column_schema(name)
        assert [c for c, _, _ in cols] == schema.stored_columns(name) == [c for c, _ in schema.TABLES[name]]
        assert schema.column_names(name) == [c for c in schema.stored_columns(name)
                                             if c not in (schema.MODEL_COLUMN, schema.LANGUAGE_COLUMN)]
        assert all(isinstance(x, str) and "PRIMARY KEY" not in t for c, t, d in cols for x in (c, t, d))
    assert ("test_ids", "VARCHAR[]", "collected pytest node ids, in file order") in schema.column_schema(
        "generated_tests")


def test_dagster_column_schema_metadata() -> None:
    from dagster import TableSchema

    from evalmislead_assets.dagster_metadata import COLUMN_SCHEMA_KEY, column_schema_metadata

    meta = column_schema_metadata("llm_cache")
    ts = meta[COLUMN_SCHEMA_KEY]
    assert COLUMN_SCHEMA_KEY == "dagster/column_schema" and isinstance(ts, TableSchema)
    assert [c.name for c in ts.columns] == schema.column_names("llm_cache")
    key = ts.columns[0]
    assert key.type == "varchar" and key.constraints.unique and not key.constraints.nullable


def test_the_docs_schema_reference_is_the_generated_one() -> None:
    page = schema.docs_path(ROOT)
    assert page == ROOT / "docs" / "reference" / "schema.md"
    assert page.read_text(encoding="utf-8") == schema.markdown(), (
        "docs/reference/schema.md is out of date: run `.venv/bin/python -m evalmislead_assets.store.schema --write-docs`")
    for name in schema.TABLES:
        assert f"| `{name}` |" in schema.markdown()
    for name, _, description in schema._SHARED:
        assert f"{name} ({description.replace('|', chr(92) + '|')})" in schema.markdown()


def test_the_documented_metric_values_are_the_stored_ones() -> None:
    """The comparison tables' `metric` holds the plan's metric names (misleading_rate, effective_rate), and the
    reference says so: a query on a documented value must find rows."""
    from evalmislead_assets.analysis.plan import METRICS

    for table in ("bootstrap_comparisons", "thinking_comparisons", "model_comparisons", "model_average"):
        metric = next(c for c in schema.SPECS[table].columns if c.name == "metric")
        assert metric.description == " | ".join(METRICS), (table, metric.description)


def test_markdown_cli_prints_the_page() -> None:
    out = subprocess.run([sys.executable, "-m", "evalmislead_assets.store.schema", "--markdown"], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    assert out == schema.markdown()


def test_write_docs_writes_the_page_under_the_project_root(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(schema, "docs_path", lambda root=None: tmp_path / "docs" / "reference" / "schema.md")
    assert schema.main(["--write-docs"]) == 0
    assert (tmp_path / "docs" / "reference" / "schema.md").read_text(encoding="utf-8") == schema.markdown()


# ---------------------------------------------------------------- generated_tests.test_ids is VARCHAR[]


def _generated(ids_per_row: list) -> pd.DataFrame:
    n = len(ids_per_row)
    return pd.DataFrame({"condition": ["buggy_code"] * n, "thinking": ["off"] * n,
                         "task_id": [f"Python/{i}" for i in range(n)], "problem_idx": list(range(n)),
                         "n_tests": [len(x or []) for x in ids_per_row], "test_ids": ids_per_row})


def test_test_ids_round_trip_as_a_list(tmp_path) -> None:
    wh = Warehouse(tmp_path / "db.duckdb")
    wh.replace_rows("generated_tests", _generated([IDS, [], None]), {"condition": "buggy_code", "thinking": "off"})
    with wh.connect() as con:
        assert con.execute("SELECT data_type FROM information_schema.columns WHERE table_name = 'generated_tests' "
                           "AND column_name = 'test_ids'").fetchone()[0] == "VARCHAR[]"
        assert con.execute("SELECT sum(len(test_ids)) FROM generated_tests").fetchone()[0] == len(IDS)
    df = wh.read_table("generated_tests", order_by="problem_idx")
    assert [stored_test_ids(v) for v in df["test_ids"]] == [IDS, [], []]


def test_all_empty_lists_are_stored(tmp_path) -> None:
    wh = Warehouse(tmp_path / "db.duckdb")
    wh.replace_rows("generated_tests", _generated([[], []]))
    assert wh.query_df("SELECT count(*) AS n FROM generated_tests WHERE test_ids = []")["n"].iloc[0] == 2


def _old_file(path: Path) -> None:
    """A DuckDB file in the older format: test_ids VARCHAR holding JSON text."""
    cols = ", ".join(f"{c} {'VARCHAR' if c == 'test_ids' else t}" for c, t in schema.TABLES["generated_tests"])
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE generated_tests ({cols})")
        for i, ids in enumerate([IDS, [], None]):
            con.execute("INSERT INTO generated_tests (task_id, problem_idx, test_ids) VALUES (?, ?, ?)",
                        [f"Python/{i}", i, None if ids is None else json.dumps(ids)])


def test_old_text_column_fails_with_one_clear_line(tmp_path) -> None:
    path = tmp_path / "old.duckdb"
    _old_file(path)
    df = Warehouse(path).read_table("generated_tests", order_by="problem_idx")
    with pytest.raises(ValueError) as exc:
        stored_test_ids(df["test_ids"].iloc[0])
    msg = str(exc.value)
    assert "\n" not in msg and "generated_tests.test_ids" in msg and "--migrate" in msg


def test_migrate_converts_json_text_and_list_text(tmp_path) -> None:
    path = tmp_path / "old.duckdb"
    _old_file(path)
    # new code writing into the old column before the migration: DuckDB casts the list to its text form
    Warehouse(path).append_rows("generated_tests", pd.DataFrame({"task_id": ["Python/9"], "problem_idx": [9],
                                                                 "test_ids": [IDS]}))
    out = subprocess.run([sys.executable, "-m", "evalmislead_assets.store.schema", "--migrate", str(path)],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "generated_tests.test_ids" in out
    df = Warehouse(path).read_table("generated_tests", order_by="problem_idx")
    assert [stored_test_ids(v) for v in df["test_ids"]] == [IDS, [], [], IDS]
    with duckdb.connect(str(path)) as con:
        assert schema.migrate(con) == []  # a second run has nothing to do


def test_every_table_asset_shows_its_columns_in_the_ui() -> None:
    """The registry is emitted as Dagster column metadata on every asset that is a table."""
    from dagster import AssetKey

    from evalmislead_assets.definitions import defs
    from evalmislead_assets.store import schema

    graph = defs.resolve_asset_graph()
    table_assets = [k for k in graph.get_all_asset_keys() if k.path[-1] in schema.TABLES]
    assert AssetKey("test_outcomes") in table_assets and len(table_assets) >= 15
    for key in table_assets:
        cols = graph.get(key).metadata["dagster/column_schema"].columns
        assert [c.name for c in cols] == [name for name, _ in schema.TABLES[key.path[-1]]]
