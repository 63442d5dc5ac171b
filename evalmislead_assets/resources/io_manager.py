"""The `io_manager` resource: asset DataFrames stored in and loaded from the study's DuckDB tables.

The idea of dagster-duckdb's IO manager (one table per asset, a partition = the rows whose
partition columns hold its key), on our `Warehouse` instead of its connection handling:

* one short transaction per write, with the warehouse's lock retry (generation commits each
  answer as it arrives, so the file is never locked for long);
* loads open the file **read-only**: any number of readers run side by side and none asks for
  the write lock (dagster-duckdb opens read-write even to load an input);
* frames are written by column *name*, conformed to the table's columns in `schema.TABLES`.

Partitions map to columns by dimension name: a condition x thinking key fills/filters
``condition`` and ``thinking``; a one-dimension key (``model_specs``: thinking) uses the
asset's ``partition_expr`` metadata, else the dimension's name (`thinking`/`condition`).
``handle_output`` replaces exactly the output partition's rows (the whole table for an
unpartitioned asset) in one transaction, so an empty frame clears the partition. An asset whose
definition metadata names ``replace_by`` (the generation assets: ``task_id``) replaces only the
rows of the values its frame holds: a run over a slice of problems keeps the partition's answers for
every other problem.
``load_input`` reads the upstream table filtered to the mapped upstream partitions when the
downstream step is partitioned (e.g. `model_specs[on]` for `test_generations[model_spec|on]`),
and every row when the downstream asset is unpartitioned. Input metadata ``columns`` (a
projection) and ``order_by`` are honoured.

A model's asset (``study_models.model_for_path``: a per-model table, prefixed or the study's only model)
reads and writes only that model's rows: ``model_name`` joins the partition columns, so materializing
one model never deletes or rewrites another's. The same holds for languages: ``language``, from the
key's language segment (``java/test_outcomes``; none: Python), scopes every per-language table
(``study_models.language_for_path``), the problems and their validation included.

Every output is one table, named by the last part of its asset key: a multi-asset's outputs
(``spec_labels`` with its side tables ``spec_label_agreement`` and ``spec_label_splits``,
``mutation_scores`` with ``mutant_kills``, ...) are each stored in their own table, by the same rules.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import pandas as pd
from dagster import (
    ConfigurableIOManager,
    DagsterResourceFunctionError,
    InitResourceContext,
    InputContext,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    OutputContext,
    PartitionsDefinition,
)

from evalmislead_assets import config_check, data_lock, settings, study_models
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.partitions import condition_partitions, thinking_partitions
from evalmislead_assets.store.database import StorageError, Warehouse
from evalmislead_assets.store.schema import LANGUAGE_COLUMN, MODEL_COLUMN, TABLES

# one-dimension partitions definitions -> their column (when the asset names no partition_expr)
_SINGLE_DIMENSION_COLUMNS: list[tuple[PartitionsDefinition, str]] = [
    (thinking_partitions, "thinking"), (condition_partitions, "condition"),
]


def partition_columns(
    partitions_def: Optional[PartitionsDefinition], key: Any, metadata: Optional[Mapping[str, Any]] = None
) -> dict[str, str]:
    """The column values that select one partition's rows, e.g. {'condition': 'buggy_code', 'thinking': 'off'}."""
    if isinstance(partitions_def, MultiPartitionsDefinition):
        mkey = key if isinstance(key, MultiPartitionKey) else partitions_def.get_partition_key_from_str(str(key))
        return {dim: str(value) for dim, value in mkey.keys_by_dimension.items()}
    expr = (metadata or {}).get("partition_expr")
    if isinstance(expr, str) and expr:
        return {expr: str(key)}
    for known, column in _SINGLE_DIMENSION_COLUMNS:
        if partitions_def == known:
            return {column: str(key)}
    raise ValueError(f"no column for partition key {key!r}; give the asset metadata partition_expr='<column>'")


def model_columns(path: Sequence[str]) -> dict[str, str]:
    """{'model_name': ..., 'language': ...} for a model's asset (see study_models.model_for_path), {'language': ...}
    for a language's model-free asset (problems, problem_validation), else {}."""
    model = study_models.model_for_path(path)
    language = study_models.language_for_path(path)
    return {**({MODEL_COLUMN: model.name} if model is not None else {}),
            **({LANGUAGE_COLUMN: language} if language is not None else {})}


def table_columns(table: str) -> list[str]:
    if table not in TABLES:
        raise ValueError(f"asset {table!r} has no table in schema.TABLES; register it there")
    return [c for c, _ in TABLES[table]]


def conform(table: str, df: pd.DataFrame, partition: Optional[Mapping[str, str]] = None) -> pd.DataFrame:
    """``df`` with exactly the table's columns in its order: partition columns filled from the key (a row
    of another partition is an error), missing columns NULL, an unknown column an error."""
    columns = table_columns(table)
    extra = [c for c in df.columns if c not in columns]
    if extra:
        raise ValueError(f"columns {extra} are not in table {table}; add them to schema.TABLES")
    out = df.copy()
    for column, value in (partition or {}).items():
        if column in out.columns and len(out):
            other = out[column].dropna()
            other = other[other.astype(str) != value]
            if len(other):
                raise ValueError(f"{table}: rows of {column}={other.iloc[0]!r} in the output of partition "
                                 f"{column}={value!r}")
        out[column] = value
    return out.reindex(columns=columns)


# run id -> the lock files its io_manager took (data_lock), given back at the run's end
_RUN_LOCKS: dict[str, list[Path]] = {}


def _run_key(context: InitResourceContext) -> str:
    return context.run.run_id if context.run is not None else ""


def _partition_scope(context: InitResourceContext) -> str | None:
    """The partition key a run locks (data_lock.hold_partition): its own, '*' for unpartitioned assets, None
    (the whole study) for a partition range."""
    tags = context.run.tags if context.run is not None else {}
    if "dagster/asset_partition_range_start" in tags:
        return None
    return tags.get("dagster/partition") or "*"


def _command(context: InitResourceContext) -> str:
    """This run, for the lock file: 'Dagster run <id> of <job> (backfill <id>)'."""
    run = context.run
    if run is None:
        return "a Dagster run"
    backfill = run.tags.get("dagster/backfill")
    return f"Dagster run {run.run_id} of {run.job_name}" + (f" (backfill {backfill})" if backfill else "")


def refused(exc: Exception) -> DagsterResourceFunctionError:
    """A set-up refusal (a bad setting, a damaged DuckDB file: ``exc``'s one line) as the error the run fails with.

    Any other exception raised in a resource's set-up reaches the run's failure wrapped: "Error executing
    resource_fn on ResourceDefinition io_manager", the true line only further down as its cause. Raised as
    Dagster's own resource error whose message *is* that line (and nothing chained to it), the run's failure
    (the UI's error, `dagster asset materialize`'s output) starts with it; the resource-init event still
    carries ``exc`` with its stack."""
    return DagsterResourceFunctionError(str(exc), user_exception=exc, original_exc_info=sys.exc_info())


class WarehouseIOManager(ConfigurableIOManager):
    """Asset outputs as rows of the study's DuckDB file (EVALMISLEAD_DB when path is empty), by partition."""

    path: str = ""
    lock_timeout_s: float = 1800.0

    def warehouse(self) -> Warehouse:
        return Warehouse(self.path or settings.db_path(), self.lock_timeout_s)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Before a run's first step: every setting, the DB path and the input files are checked (a bad
        one fails the run here with its own one-line message, not later inside a step or an output
        handler), the run records its worker process so a killed run can be told from a live one, and
        the run takes the DuckDB file's and its partition's locks (``data_lock``), waiting while another
        run holds them."""
        db = Path(self.path).expanduser().resolve() if self.path else settings.db_path()
        try:
            config_check.check_before_run(db if self.path else None)
        except ConfigError as exc:  # one line naming the setting or file and the fix, first in the run's failure
            raise refused(exc) from None
        run = context.run
        if context.instance is not None and run is not None:
            from evalmislead_assets.run_launcher import tag_run_worker
            from evalmislead_assets.run_tags import study_tags

            tag_run_worker(context.instance, run.run_id)
            # the study file and settings this run works from, on every route (cli/up_to_date.py reads them)
            tags = study_tags(settings.study_text())
            if any(run.tags.get(k) != v for k, v in tags.items()):
                context.instance.add_run_tags(run.run_id, tags)
        # one run per partition and none beside `evalmislead run`, whatever launched this run (CLI, UI,
        # backfill): before the first write, so no request is sent twice for one cache key
        say = context.log.warning if context.log is not None else print
        delegated_by = run.tags.get(data_lock.DELEGATE_TAG, "") if run is not None else ""
        taken = data_lock.wait_and_hold(db, _command(context), say, partition=_partition_scope(context),
                                        delegated_by=delegated_by)
        _RUN_LOCKS[_run_key(context)] = taken
        try:
            # rows without a model (older files) belong to the study file's first model
            owner = study_models.unnamed_rows_model()
            named = self.warehouse().name_unnamed_rows(owner)
        except BaseException as exc:
            data_lock.release(_RUN_LOCKS.pop(_run_key(context), []))  # a failed set-up gets no teardown
            if isinstance(exc, StorageError):  # damage past the catalog check, a lock timeout: its one line
                raise refused(exc) from None
            raise
        if named and context.log is not None:
            context.log.info(f"rows without a model given {owner!r}: {named}")

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        """The run's end: the locks it took are given back (a process that held them before keeps them)."""
        data_lock.release(_RUN_LOCKS.pop(_run_key(context), []))

    # ------------------------------------------------------------------ writes

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        if obj is None:  # an asset that stored its rows itself
            return
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: the warehouse IO manager stores DataFrames, "
                            f"got {type(obj).__name__}")
        table = context.asset_key.path[-1]
        wheres: Optional[list[dict[str, Any]]] = None
        fill: Optional[dict[str, str]] = None
        if context.has_asset_partitions:
            metadata = context.definition_metadata or {}
            wheres = [partition_columns(context.asset_partitions_def, k, metadata)
                      for k in context.asset_partition_keys]
            fill = wheres[0] if len(wheres) == 1 else None  # several keys: the rows carry their own
        model = model_columns(context.asset_key.path)
        if model:  # a model's rows: only they are replaced, every other model's stay as they are
            wheres = [{**w, **model} for w in wheres] if wheres is not None else [dict(model)]
            fill = {**(fill or {}), **model}
        by = (context.definition_metadata or {}).get("replace_by")
        if by and wheres is not None:  # only the rows of this run's values (its problems); the others are kept
            values = sorted({str(v) for v in obj[by]}) if by in obj.columns else []
            wheres = [{**w, by: values} for w in wheres]
        df = conform(table, obj, fill)
        self.warehouse().replace_partitions(table, df, wheres)
        context.add_output_metadata({"table": table, "dagster/row_count": len(df)})

    # ------------------------------------------------------------------ reads

    def load_input(self, context: InputContext) -> pd.DataFrame:
        table = context.asset_key.path[-1]
        metadata = context.definition_metadata or {}
        columns: Sequence[str] = metadata.get("columns") or table_columns(table)
        clause: str = ""
        params: list[Any] = []
        # a partitioned step reads the upstream partitions mapped to its own; an unpartitioned one reads all
        if context.has_asset_partitions and context.has_partition_key:
            upstream_meta = (context.upstream_output.definition_metadata
                             if context.upstream_output is not None else None) or {}
            keys = [partition_columns(context.asset_partitions_def, k, upstream_meta)
                    for k in context.asset_partition_keys]
            ors = []
            for key in keys:
                ors.append("(" + " AND ".join(f"{c} = ?" for c in key) + ")")
                params.extend(key.values())
            clause = " WHERE " + (" OR ".join(ors) if ors else "false")
        model = model_columns(context.asset_key.path)
        if MODEL_COLUMN in model:  # only the upstream model's rows of its language
            model_clause, model_params = study_models.model_filter_sql(model[MODEL_COLUMN], model[LANGUAGE_COLUMN])
            clause = (f"{clause} AND" if clause else " WHERE") + f" {model_clause}"
            params.extend(model_params)
        elif LANGUAGE_COLUMN in model:  # a language's problems (rows from before languages: Python's)
            clause = (f"{clause} AND" if clause else " WHERE") + f" coalesce({LANGUAGE_COLUMN}, 'python') = ?"
            params.append(model[LANGUAGE_COLUMN])
        order = f" ORDER BY {metadata['order_by']}" if metadata.get("order_by") else ""
        sql = f"SELECT {', '.join(columns)} FROM {table}{clause}{order}"
        return self.warehouse().query_df(sql, params, read_only=True)
