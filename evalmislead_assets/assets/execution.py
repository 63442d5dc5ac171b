"""generated_tests and test_outcomes [condition x thinking]: extract, collect and run every generated test."""

import time

import pandas as pd
from dagster import (
    AssetExecutionContext,
    AssetIn,
    MetadataValue,
    Output,
    asset,
)

from evalmislead_assets.assets.outcome_checks import outcome_checks
from evalmislead_assets.assets.problem_inputs import PROBLEMS_IN
from evalmislead_assets.assets.sandbox_config import ExecutionConfig, isolation_note, make_sandbox, warn_if_degraded
from evalmislead_assets.execution.batch import build_generated_tests, build_test_outcomes
from evalmislead_assets.execution.cells import STATUSES, cell_counts, cell_rates
from evalmislead_assets.partitions import condition_thinking_partitions, split_key
from evalmislead_assets.report.formatting import md_table
from evalmislead_assets.resources import StudySettingsResource

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


# the three checks of Python's test_outcomes; every other language's come from the same factory (language_chain.py)
every_test_in_one_cell, outcomes_for_every_answer, truncation_counts_consistent = outcome_checks(test_outcomes)
