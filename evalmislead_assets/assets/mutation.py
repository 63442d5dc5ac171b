"""mutation_scores [condition x thinking] (one per model): how well each generated test file tells the
fixed function from its mutants (the mutants themselves: assets/mutants.py). A multi-asset: its
per-mutant rows are the asset mutant_kills, computed in the same step, same partitions. The logic is
in evalmislead_assets.mutation.mutator (the mutator) and evalmislead_assets.mutation.scoring (oracle
flags, kill rule, score)."""

import time
from typing import Optional

import pandas as pd
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    MetadataValue,
    Output,
    asset_check,
    multi_asset,
)
from pydantic import Field

from evalmislead_assets.assets.model_scope import model_sql
from evalmislead_assets.assets.mutants import CODE_VERSION, GROUP, OPTIONAL
from evalmislead_assets.assets.sandbox_config import ExecutionConfig, isolation_note, make_sandbox
from evalmislead_assets.assets.table_outs import table_outs
from evalmislead_assets.mutation.scoring import MUTANT_TIMEOUT_S, build_scores
from evalmislead_assets.partitions import condition_thinking_partitions, split_key
from evalmislead_assets.report.sections import mutation_score as mutation_report
from evalmislead_assets.resources import StudySettingsResource, WarehouseResource
from evalmislead_assets.sandbox.host import TEST_TIMEOUT_S

SCORES_CODE_VERSION = CODE_VERSION + "+timeout-kill-half+run-cap"  # the kill rule of mutation_scoring
MUTATION_TABLES = ("mutant_kills",)  # the side table of mutation_scores


class MutationConfig(ExecutionConfig):
    """Launchpad settings of the mutation_scores asset: the sandbox's (workers; timeout_s, described for the
    mutation pass) and the mutation pass's own."""

    timeout_s: float = Field(default=TEST_TIMEOUT_S, gt=0,
                             description="Seconds per test against the fixed version (and slow tests against mutants).")
    mutant_timeout_s: float = Field(
        default=MUTANT_TIMEOUT_S, gt=0,
        description="Seconds per test against a mutant; over it is a kill when the fixed run took under half of it.")
    max_runs_per_file: Optional[int] = Field(
        default=None, ge=1,
        description="Test runs one file may take (fixed runs + mutant runs): over it, only the first passing "
                    "tests meet the mutants and the rest are counted in n_tests_capped. "
                    "Empty: EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE, default 1000.")


@multi_asset(
    group_name=GROUP, partitions_def=condition_thinking_partitions,
    ins={"generated_tests": AssetIn(metadata={
        "columns": ["task_id", "problem_idx", "source", "test_ids", "n_tests"], "order_by": "problem_idx"}),
        "mutants": AssetIn(metadata={
            "columns": ["task_id", "mutant_id", "operator", "mutant_code", "likely_equivalent"],
            "order_by": "task_id, mutant_id"}),
        "problems": AssetIn(metadata={"columns": ["task_id", "fixed_code"]})},
    outs=table_outs(
        "mutation_scores", MUTATION_TABLES, SCORES_CODE_VERSION,
        "Per generated test file: its passing tests (on the fixed version) run against every mutant of its problem "
        "in the sandbox (at most EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE runs per file); killed mutants (a timeout "
        "kills only when the fixed run took under half the limit) and the mutation score (killed / "
        "oracle-detectable mutants; NULL when not estimable). Per-mutant rows: its side table mutant_kills.",
        tags=OPTIONAL),
)
def mutation_scores(
    context: AssetExecutionContext, config: MutationConfig, study_settings: StudySettingsResource,
    generated_tests: pd.DataFrame, mutants: pd.DataFrame, problems: pd.DataFrame,
) -> tuple[Output[pd.DataFrame], Output[pd.DataFrame]]:
    condition, thinking = split_key(context.partition_key)
    generated = generated_tests[generated_tests["n_tests"] > 0].reset_index(drop=True)  # this partition's files
    muts = mutants[mutants["task_id"].isin(set(generated["task_id"]))].reset_index(drop=True)
    problems = problems.set_index("task_id")
    if generated.empty:
        context.log.warning(f"generated_tests has no file with tests for {condition}|{thinking}")
    without = sorted(set(generated["task_id"]) - set(muts["task_id"]))
    if without:
        context.log.warning(f"{len(without)} problems have no stored mutants (materialize mutants): {without[:10]}")
    sandbox = make_sandbox(config, study_settings, fan_out=True)  # [execution] dask_scheduler: to that cluster
    max_runs = config.max_runs_per_file or study_settings.int_value("max_mutation_runs_per_file")
    start = time.monotonic()
    scores, kills, run = build_scores(generated, muts, problems, sandbox, config.mutant_timeout_s,
                                     max_runs=max_runs)
    wall = time.monotonic() - start
    where = {"condition": condition, "thinking": thinking}
    summ = mutation_report.summary(scores.assign(**where))
    first = summ.iloc[0] if len(summ) else None
    # both tables through the IO manager: this model's rows of the partition
    kills_output = Output(kills.assign(**where), output_name="mutant_kills", metadata={
        "rows": len(kills),
        "killed": int(kills["killed"].astype(bool).sum()),
        "killed_by_timeout": int(kills["killed_by_timeout"].astype(bool).sum()),
    })
    return Output(scores.assign(**where), output_name="mutation_scores", metadata={
        "files": len(scores),
        "files_estimable": int(scores["mutation_score"].notna().sum()),
        "pooled_score": None if first is None or pd.isna(first["pooled_score"]) else round(float(first["pooled_score"]), 4),
        "mean_file_score": None if first is None or pd.isna(first["mean_file_score"])
        else round(float(first["mean_file_score"]), 4),
        "mutant_runs": len(kills),
        "test_runs": run.runs,
        "files_without_mutants": MetadataValue.json(without),
        "kills_by_timeout": int(scores["n_killed_by_timeout"].sum()),
        "timeouts_not_kills": int(scores["n_timeouts_not_kills"].sum()),
        "max_runs_per_file": max_runs,
        "files_run_capped": MetadataValue.json(scores.loc[scores["n_tests_capped"] > 0, "task_id"].tolist()),
        "runs_dropped_by_cap": int(scores["runs_dropped"].sum()),
        "sandbox": isolation_note(run.isolation),
        "wall_s": round(wall, 2),
        "runs_per_s": round(run.runs / wall, 1) if wall > 0 and run.runs else 0.0,
    }), kills_output


@asset_check(asset=AssetKey("mutation_scores"),
             description="Counts add up (killed <= mutants, equivalent <= mutants) and the score is NULL exactly "
                         "when it is not estimable; per-file counts match mutant_kills.")
def mutation_scores_consistent(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
    wh = warehouse.get()
    model, params = model_sql(context)  # the checked model's rows
    bad = wh.query_df(
        f"SELECT condition, thinking, task_id FROM mutation_scores WHERE {model} AND (n_killed > n_mutants "
        "OR n_likely_equivalent > n_mutants OR n_killed_non_equivalent > n_mutants - n_likely_equivalent "
        "OR ((mutation_score IS NULL) <> (n_tests_passing_fixed = 0 OR n_mutants = n_likely_equivalent)))", params)
    mismatch = wh.query_df(
        "SELECT s.condition, s.thinking, s.task_id FROM (SELECT * FROM mutation_scores WHERE " + model + ") s "
        "LEFT JOIN (SELECT condition, thinking, task_id, count(*) AS n, count(*) FILTER (WHERE killed) AS k "
        f"FROM mutant_kills WHERE {model} GROUP BY ALL) m "
        "USING (condition, thinking, task_id) WHERE coalesce(m.n, 0) <> s.n_mutants OR coalesce(m.k, 0) <> s.n_killed",
        [*params, *params])
    return AssetCheckResult(passed=bad.empty and mismatch.empty, metadata={
        "inconsistent_rows": len(bad), "kill_count_mismatch": len(mismatch),
        "examples": MetadataValue.json((bad["task_id"].tolist() + mismatch["task_id"].tolist())[:20]),
    })
