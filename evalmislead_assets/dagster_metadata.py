"""Dagster metadata from the static table registry (store/schema.py), for asset definitions and the IO manager.

``column_schema_metadata("generated_tests")`` -> ``{"dagster/column_schema": TableSchema(...)}``: put it
into an asset's ``metadata=`` (definition time) or an output's metadata, and the UI shows the table's
columns, types and descriptions. store/schema.py itself stays free of Dagster.
"""

from __future__ import annotations

from dagster import TableColumn, TableColumnConstraints, TableSchema

from evalmislead_assets.host_class import GPU
from evalmislead_assets.store import schema

COLUMN_SCHEMA_KEY = "dagster/column_schema"
# an output stored in place of a measurement that could not be made (the probe's server was down): the next
# `evalmislead run` runs it again although it is fresh
INCOMPLETE_KEY = "evalmislead/incomplete"
# definition metadata: the study model and language an asset belongs to (none on the model-free and cross-model
# assets); `evalmislead run` plans its runs from them (cli/run_plan.py)
MODEL_METADATA = "evalmislead/model"
LANGUAGE_METADATA = "evalmislead/language"
# an asset tag naming an optional part of the study (value "mutation"): `evalmislead run` leaves such assets out
# unless the run asks for that part
OPTIONAL_TAG = "evalmislead/optional"
# an asset tag naming the host class its step needs (host_class.py): the steps that call the model carry
# GPU_HOST; in the Celery deploy profile a run goes to the queue of its assets' class (celery_launcher.py)
HOST_CLASS_TAG = "evalmislead/host_class"
GPU_HOST = {HOST_CLASS_TAG: GPU}


def table_schema(table: str) -> TableSchema:
    """The registry's columns of ``table`` as a Dagster TableSchema (types in lower-case DuckDB spelling)."""
    keys = {c.name for c in schema.SPECS[table].columns if "PRIMARY KEY" in c.type}
    return TableSchema(columns=[
        TableColumn(name=name, type=typ.lower(), description=description or None,
                    constraints=TableColumnConstraints(nullable=False, unique=True) if name in keys else None)
        for name, typ, description in schema.column_schema(table)
    ])


def column_schema_metadata(table: str) -> dict[str, TableSchema]:
    return {COLUMN_SCHEMA_KEY: table_schema(table)}


