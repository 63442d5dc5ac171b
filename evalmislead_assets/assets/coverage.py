"""test_coverage [condition x thinking]: line and branch coverage of the function under test by each test file."""

import time
from typing import Optional

import pandas as pd
from dagster import AssetExecutionContext, AssetIn, Output, asset

from evalmislead_assets.analysis import coverage as coverage_analysis
from evalmislead_assets.assets.problem_inputs import PROBLEMS_IN
from evalmislead_assets.assets.sandbox_config import ExecutionConfig, make_sandbox, warn_if_degraded
from evalmislead_assets.partitions import condition_thinking_partitions, split_key
from evalmislead_assets.resources import StudySettingsResource


@asset(
    group_name="execution", partitions_def=condition_thinking_partitions,
    ins={"generated_tests": AssetIn(metadata={
        "columns": ["task_id", "problem_idx", "source", "test_ids", "n_tests"], "order_by": "problem_idx"}),
        "problems": PROBLEMS_IN},
    description="Line and branch coverage (coverage.py, in the sandbox) of the function under test by each generated "
                "test file, on the buggy and on the fixed version; failing tests count the lines they ran.",
)
def test_coverage(
    context: AssetExecutionContext, config: ExecutionConfig, study_settings: StudySettingsResource,
    generated_tests: pd.DataFrame, problems: pd.DataFrame,
) -> Output[pd.DataFrame]:
    condition, thinking = split_key(context.partition_key)
    generated = generated_tests[generated_tests["n_tests"] > 0].reset_index(drop=True)  # this partition's files
    if generated.empty:
        context.log.warning(f"generated_tests has no files with tests for {condition}|{thinking}")
    problems = problems.set_index("task_id")
    sandbox = make_sandbox(config, study_settings, fan_out=True)  # [execution] dask_scheduler: the runs go to that cluster
    start = time.monotonic()
    df = coverage_analysis.build_test_coverage(generated, problems, sandbox)
    wall = time.monotonic() - start
    warn_if_degraded(context, sandbox)
    summary = {
        f"{col}_{v}": _mean(df.loc[df["version"] == v, col]) for v in ("fixed", "buggy")
        for col in ("line_coverage", "branch_coverage")
    }
    runs = int(2 * generated["n_tests"].sum()) if len(generated) else 0
    unmeasured = int((df["n_tests"] - df["n_tests_measured"]).sum()) if len(df) else 0
    # the partition's rows are replaced by the IO manager (asset test_coverage = table coverage_analysis.TABLE)
    return Output(df.assign(condition=condition, thinking=thinking), metadata={
        "files": int(len(df) // 2),
        "tests": int(generated["n_tests"].sum()) if len(generated) else 0,
        **summary,
        "full_line_coverage_fixed": int(((df["version"] == "fixed") & (df["line_coverage"] == 1.0)).sum()),
        "test_runs_without_coverage": unmeasured,
        "wall_s": round(wall, 2),
        "runs_per_s": round(runs / wall, 1) if wall > 0 and runs else 0.0,
    })


def _mean(s: pd.Series) -> Optional[float]:
    s = s.dropna()
    return round(float(s.mean()), 4) if len(s) else None
