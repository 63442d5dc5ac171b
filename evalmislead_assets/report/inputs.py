"""The study report's inputs, declared once: every table the report reads, with the columns it reads.

``INPUTS`` is the one list. The ``study_report`` asset's inputs are built from it (assets/analysis.py),
and ``build.load_data`` reads exactly these tables, from the asset's inputs or, in tests and scripts,
from a warehouse (``read``). Everything the report reads goes through a ``ReportSource``: a table
that is not declared here, or declared but not given, is a ``ReportInputError`` naming it, never an
empty table, so a section that starts reading a new table fails its first test until the table is
declared (and the asset therefore gets it as an input).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pandas as pd

from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.schema import LANGUAGE_COLUMN, PER_LANGUAGE_TABLES

# table -> the columns the report reads (None: every column of the table)
INPUTS: dict[str, tuple[str, ...] | None] = {
    # the core sections (build.py, tables.py)
    "condition_rates": None,
    "bootstrap_comparisons": None,
    "truncation_matched_subset": None,
    "thinking_comparisons": None,
    "spec_labels": None,
    "spec_label_agreement": None,
    "spec_label_splits": None,
    "reasoning_mentions": None,
    "reasoning_mention_summary": None,
    # the worked example, the method notes (sections/method_notes.py) and the sections of section_list.py
    "test_outcomes": None,
    "problem_validation": None,
    "generated_tests": ("model_name", "condition", "thinking", "task_id", "source", "extraction", "error", "one_version_ids",
                        "n_tests_over_cap", "n_tests", "verified", "unverified_reason"),
    # the per-test viewer (viewer.py) shows each answer with its prompt
    "test_generations": ("condition", "thinking", "task_id", "problem_idx", "error", "finish_reason",
                         "completion_tokens", "response_text", "request_json"),
    "problems": ("task_id", "entry_point", "buggy_code", "fixed_code", "bug_type"),
    "model_specs": ("thinking", "task_id", "spec_text"),
    "determinism_probe": None,
    "test_coverage": None,
    "mutation_scores": None,
    "mutants": None,
    "tool_policy": None,
    "problem_rates": None,
    "problem_comparisons": None,
    "repetition_rates": None,
}


class ReportInputError(KeyError):
    """The report read a table it was not given (or that is not declared in INPUTS)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _not_declared(name: str) -> ReportInputError:
    return ReportInputError(f"the study report reads table {name!r}, which is not one of its inputs: declare it "
                            "in evalmislead_assets/report/inputs.py INPUTS (the study_report asset's inputs are "
                            "built from it)")


def read(warehouse: Warehouse) -> dict[str, pd.DataFrame]:
    """Every declared table from a warehouse, projected to its declared columns (all models' rows; the study
    report is Python's: Java and JavaScript rows have their own section, report/sections/languages.py)."""
    def one(name: str, columns: Sequence[str] | None) -> pd.DataFrame:
        if name not in PER_LANGUAGE_TABLES:
            return warehouse.read_table(name, columns=list(columns) if columns else None)
        cols = ", ".join(columns) if columns else "*"
        return warehouse.query_df(f"SELECT {cols} FROM {name} WHERE coalesce({LANGUAGE_COLUMN}, 'python') = 'python'")

    return {name: one(name, columns) for name, columns in INPUTS.items()}


_MISSING_TABLE = re.compile(r"Table with name (\w+) does not exist", re.IGNORECASE)


class ReportSource:
    """The report's input tables, given as DataFrames, queried with the same SQL as a warehouse through an
    in-memory DuckDB; each table keeps its declared column types (store/schema.py). Every declared table
    must be given; reading any other one raises ReportInputError."""

    def __init__(self, frames: Mapping[str, pd.DataFrame]) -> None:
        import duckdb

        from evalmislead_assets.store.schema import TABLES

        missing = [t for t in INPUTS if t not in frames]
        if missing:
            raise ReportInputError(f"the study report was not given its input table(s) {', '.join(missing)} "
                                   "(declared in evalmislead_assets/report/inputs.py INPUTS)")
        self.tables = {name: frames[name] for name in INPUTS}
        self._con = duckdb.connect(":memory:")
        for name, df in self.tables.items():
            declared = dict(TABLES.get(name, []))
            if declared and all(c in declared for c in df.columns):
                # a frame without columns (nothing given but the name) is the table, empty
                names = list(df.columns) if len(df.columns) else list(declared)
                cols = ", ".join(f"{c} {declared[c].replace(' PRIMARY KEY', '')}" for c in names)
                self._con.execute(f"CREATE TABLE {name} ({cols})")
                if len(df):
                    self._con.register("_frame", df)
                    self._con.execute(f"INSERT INTO {name} BY NAME SELECT * FROM _frame")
                    self._con.unregister("_frame")
            else:
                self._con.register(name, df)

    def read_table(self, name: str) -> pd.DataFrame:
        if name not in self.tables:
            raise _not_declared(name)
        return self.tables[name].reset_index(drop=True)

    def query_df(self, sql: str, params: list | None = None) -> pd.DataFrame:
        import duckdb

        try:
            return self._con.execute(sql, params or []).df()
        except duckdb.CatalogException as exc:
            found = _MISSING_TABLE.search(str(exc))
            if found:
                raise _not_declared(found.group(1)) from exc
            raise
