"""The asset checks of a test_outcomes asset, the same for every language: each test in one cell, an outcome row
for every answer with tests, and generated_tests consistent with test_generations. Each check reads the checked
asset's model and language rows only (model_scope.model_sql)."""

from typing import Any

import pandas as pd
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetKey,
    AssetsDefinition,
    MetadataValue,
    asset_check,
)

from evalmislead_assets.assets.model_scope import model_sql
from evalmislead_assets.execution.cells import STATUSES, outcome
from evalmislead_assets.partitions import split_key
from evalmislead_assets.resources import WarehouseResource


def _scope(context: AssetCheckExecutionContext) -> tuple[str, list[Any]]:
    """SQL filter on the checked model's rows of the partition being checked (all its partitions when
    the check has none)."""
    model, params = model_sql(context)
    try:
        if context.has_partition_key:
            condition, thinking = split_key(context.partition_key)
            return f" WHERE {model} AND condition = ? AND thinking = ?", [*params, condition, thinking]
    except Exception:  # unpartitioned check run: check everything
        pass
    return f" WHERE {model}", params


def _every_test_in_one_cell(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    where, params = _scope(context)
    wh = warehouse.get()
    df = wh.query_df(f"SELECT condition, thinking, task_id, test_id, buggy_status, fixed_status, outcome "
                     f"FROM test_outcomes{where}", params)
    valid_status = df["buggy_status"].isin(STATUSES) & df["fixed_status"].isin(STATUSES)
    expected = [outcome(b, f) if ok else None
                for b, f, ok in zip(df["buggy_status"], df["fixed_status"], valid_status)]
    wrong_cell = df[(~valid_status) | (df["outcome"] != pd.Series(expected, index=df.index, dtype=object))]
    dupes = df[df.duplicated(["condition", "thinking", "task_id", "test_id"], keep=False)]
    expected_rows = wh.query_df(f"SELECT condition, thinking, task_id, n_tests FROM generated_tests{where}", params)
    have = df.groupby(["condition", "thinking", "task_id"]).size().rename("rows").reset_index()
    merged = expected_rows.merge(have, on=["condition", "thinking", "task_id"], how="inner")
    count_mismatch = merged[merged["rows"] != merged["n_tests"]]
    passed = wrong_cell.empty and dupes.empty and count_mismatch.empty
    return AssetCheckResult(passed=passed, metadata={
        "tests_checked": len(df),
        "wrong_or_invalid_cell": len(wrong_cell),
        "duplicate_rows": len(dupes),
        "answers_with_row_count_mismatch": MetadataValue.json(
            count_mismatch[["condition", "thinking", "task_id"]].astype(str).values.tolist()[:50]),
    })


def _outcomes_for_every_answer(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    where, params = _scope(context)
    model, model_params = model_sql(context)
    wh = warehouse.get()
    missing = wh.query_df(
        f"SELECT g.condition, g.thinking, g.task_id, g.n_tests FROM (SELECT * FROM generated_tests{where}) g "
        f"LEFT JOIN (SELECT DISTINCT condition, thinking, task_id FROM test_outcomes WHERE {model}) o "
        "USING (condition, thinking, task_id) WHERE g.n_tests > 0 AND o.task_id IS NULL "
        "ORDER BY g.condition, g.thinking, g.task_id", [*params, *model_params])
    partitions = sorted({f"{c}|{t}" for c, t in zip(missing["condition"], missing["thinking"])})
    return AssetCheckResult(passed=missing.empty, metadata={
        "answers_without_outcomes": len(missing),
        "partitions": MetadataValue.json(partitions),
        "examples": MetadataValue.json(missing["task_id"].head(20).tolist()),
    })


def _truncation_counts_consistent(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    where, params = _scope(context)
    wh = warehouse.get()
    sql = ("SELECT condition, thinking, count(*) AS answers, count(*) FILTER (WHERE finish_reason = 'length') "
           "AS truncated FROM {table}{where} GROUP BY ALL")
    gens = wh.query_df(sql.format(table="test_generations", where=where), params)
    gt = wh.query_df(sql.format(table="generated_tests", where=where), params)
    merged = gt.merge(gens, on=["condition", "thinking"], how="left", suffixes=("", "_generations"))
    bad = merged[(merged["answers"] != merged["answers_generations"])
                 | (merged["truncated"] != merged["truncated_generations"])]
    table = merged.assign(partition=merged["condition"] + "|" + merged["thinking"])
    return AssetCheckResult(passed=bad.empty, metadata={
        "partitions_checked": len(merged),
        "inconsistent": MetadataValue.json((bad["condition"] + "|" + bad["thinking"]).tolist()),
        "truncated_per_partition": MetadataValue.json(
            {p: int(t) for p, t in zip(table["partition"], table["truncated"])}),
    })


_CHECKS = (
    ("every_test_in_one_cell", _every_test_in_one_cell,
     "Every test has valid statuses and lands in exactly one of the four cells, once, and every collected test id "
     "has its row."),
    ("outcomes_for_every_answer", _outcomes_for_every_answer,
     "No answer with collected tests is missing from test_outcomes (a partition with answers but no outcome rows "
     "fails)."),
    ("truncation_counts_consistent", _truncation_counts_consistent,
     "generated_tests has one row per test_generations answer, and the same number of truncated "
     "(finish_reason = length) answers, per partition."),
)


def outcome_checks(asset: AssetKey | AssetsDefinition) -> list[AssetChecksDefinition]:
    """The three checks of the test_outcomes asset ``asset`` (any language's, any model's)."""
    return [asset_check(asset=asset, name=name, description=description)(fn) for name, fn, description in _CHECKS]
