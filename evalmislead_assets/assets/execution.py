"""generated_tests and test_outcomes [condition x thinking]: extract, collect and run every generated test."""

import time
from typing import Any

import pandas as pd
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetExecutionContext,
    AssetIn,
    MetadataValue,
    Output,
    asset,
    asset_check,
)

from evalmislead_assets.assets.model_scope import model_sql
from evalmislead_assets.assets.problem_inputs import PROBLEMS_IN
from evalmislead_assets.assets.sandbox_config import ExecutionConfig, isolation_note, make_sandbox, warn_if_degraded
from evalmislead_assets.execution.batch import build_generated_tests, build_test_outcomes
from evalmislead_assets.execution.cells import STATUSES, cell_counts, cell_rates, outcome
from evalmislead_assets.partitions import condition_thinking_partitions, split_key
from evalmislead_assets.report.formatting import md_table
from evalmislead_assets.resources import StudySettingsResource, WarehouseResource

GROUP = "execution"


@asset(
    group_name=GROUP, partitions_def=condition_thinking_partitions,
    ins={"test_generations": AssetIn(metadata={
        "columns": ["task_id", "problem_idx", "response_text", "finish_reason", "error"], "order_by": "problem_idx"}),
        "problems": PROBLEMS_IN},
    description="Test module extracted from each answer (fences, nested fences, no fence; import normalised where "
                "unambiguous) and its test ids as pytest collects them; unimportable files have zero tests and a "
                "reason. Only ids collected against both versions are tests, at most EVALMISLEAD_MAX_TESTS_PER_ANSWER "
                "per answer.",
)
def generated_tests(
    context: AssetExecutionContext, config: ExecutionConfig, study_settings: StudySettingsResource,
    test_generations: pd.DataFrame, problems: pd.DataFrame,
) -> Output[pd.DataFrame]:
    condition, thinking = split_key(context.partition_key)
    generations = test_generations  # this partition's rows (the IO manager filters them)
    if generations.empty:
        context.log.warning(f"test_generations has no rows for {condition}|{thinking}; materialize it first")
    sandbox = make_sandbox(config, study_settings)
    max_tests = study_settings.int_value("max_tests_per_answer")
    start = time.monotonic()
    df = build_generated_tests(generations, problems.set_index("task_id"), sandbox, max_tests)
    wall = time.monotonic() - start
    warn_if_degraded(context, sandbox)
    has_source = df["source"].notna()
    truncated = df["finish_reason"] == "length"
    how = df["extraction"].str.split(";").str[0].value_counts().to_dict()
    with_tests = df["n_tests"] > 0
    verified = df["verified"].fillna(False).astype(bool)
    reasons = df.loc[with_tests & ~verified & has_source, "unverified_reason"].value_counts().head(10)
    return Output(df.assign(condition=condition, thinking=thinking), metadata={
        "answers": len(df),
        "tests": int(df["n_tests"].sum()),
        "files_with_tests": int((df["n_tests"] > 0).sum()),
        "no_code_found": int((~has_source).sum()),
        "not_importable": int((has_source & ~df["import_ok"]).sum()),
        "import_normalised": int(df["extraction"].str.contains("import:|removed_local_def:", regex=True).sum()),
        "truncated": int(truncated.sum()),
        "truncated_zero_tests": int((truncated & (df["n_tests"] == 0)).sum()),
        "one_version_ids": int(df["one_version_ids"].map(len).sum()),
        "files_over_test_cap": int((df["n_tests_over_cap"] > 0).sum()),
        "tests_over_cap": int(df["n_tests_over_cap"].sum()),
        "max_tests_per_answer": max_tests,
        "files_with_tests_verified": int((with_tests & verified).sum()),
        "tests_verified": int(df.loc[verified, "n_tests"].sum()),
        "unverified_reasons": MetadataValue.md(md_table(pd.DataFrame(
            {"reason": reasons.index.astype(str), "files": reasons.to_numpy()}))),
        "extraction": MetadataValue.md(md_table(pd.DataFrame(list(how.items()), columns=["how", "answers"]))),
        "sandbox": isolation_note(sandbox.isolation),
        "wall_s": round(wall, 2),
    })


@asset(
    group_name=GROUP, partitions_def=condition_thinking_partitions,
    ins={"generated_tests": AssetIn(metadata={
        "columns": ["task_id", "problem_idx", "source", "test_ids", "n_tests"], "order_by": "problem_idx"}),
        "problems": PROBLEMS_IN},
    description="Every generated test run against the buggy and the fixed version, each in its own hardened "
                "process (10 s); statuses and the four cells (misleading, effective, both_pass, both_fail).",
)
def test_outcomes(
    context: AssetExecutionContext, config: ExecutionConfig, study_settings: StudySettingsResource,
    generated_tests: pd.DataFrame, problems: pd.DataFrame,
) -> Output[pd.DataFrame]:
    condition, thinking = split_key(context.partition_key)
    generated = generated_tests  # this partition's rows (the IO manager filters them)
    if generated.empty:
        context.log.warning(f"generated_tests has no rows for {condition}|{thinking}; materialize it first")
    sandbox = make_sandbox(config, study_settings, fan_out=True)  # [execution] dask_scheduler: the runs go to that cluster
    start = time.monotonic()
    df = build_test_outcomes(generated, problems.set_index("task_id"), sandbox)
    wall = time.monotonic() - start
    warn_if_degraded(context, sandbox)
    counts = cell_counts(df["outcome"])
    rates = cell_rates(counts)
    statuses = {
        f"{version}:{status}": int((df[f"{version}_status"] == status).sum())
        for version in ("buggy", "fixed") for status in STATUSES
    }
    effective_problems = df.loc[df["outcome"] == "effective", "task_id"].nunique()
    runs = 2 * len(df)
    return Output(df.assign(condition=condition, thinking=thinking), metadata={
        "tests": len(df),
        **{k: v for k, v in counts.items()},
        **{f"{k}_rate": round(v, 4) for k, v in rates.items()},
        "problems_with_effective_test": int(effective_problems),
        "statuses": MetadataValue.md(md_table(pd.DataFrame(list(statuses.items()), columns=["version:status", "tests"]))),
        "sandbox": isolation_note(sandbox.isolation),
        "wall_s": round(wall, 2),
        "runs_per_s": round(runs / wall, 1) if wall > 0 and runs else 0.0,
    })


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


@asset_check(asset=test_outcomes, description="Every test has valid statuses and lands in exactly one of the four "
             "cells, once, and every collected test id has its row.")
def every_test_in_one_cell(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
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


@asset_check(asset=test_outcomes, description="No answer with collected tests is missing from test_outcomes "
             "(a partition with answers but no outcome rows fails).")
def outcomes_for_every_answer(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
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


@asset_check(asset=test_outcomes, description="generated_tests has one row per test_generations answer, and the same "
             "number of truncated (finish_reason = length) answers, per partition.")
def truncation_counts_consistent(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
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
