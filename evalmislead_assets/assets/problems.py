"""problems and problem_validation assets."""

import time
from typing import Optional

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    AssetIn,
    Config,
    MetadataValue,
    Output,
    asset,
    asset_check,
)
from pydantic import Field

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.execution import oracle_validation
from evalmislead_assets.resources import WarehouseResource
from evalmislead_assets.study import problems as problem_data


class ProblemsConfig(Config):
    """Launchpad settings of the problems asset."""

    source: Optional[str] = Field(
        default=None,
        description="local: the copy shipped in the package (no network); hub: bigcode/humanevalpack from the "
                    "Hugging Face hub. Empty: EVALMISLEAD_DATASET_SOURCE, default local.")


@asset(group_name="problems", description="HumanEvalPack Python: 164 problems with buggy and fixed versions.")
def problems(context: AssetExecutionContext, config: ProblemsConfig) -> Output[pd.DataFrame]:
    source = config.source or settings.dataset_source()
    if source not in problem_data.SOURCES:
        raise ConfigError(f"problems config source={source!r} is not one of {', '.join(problem_data.SOURCES)}; "
                          "leave it empty for EVALMISLEAD_DATASET_SOURCE (default local)")
    df = problem_data.load_problems(source=source, cache_dir=settings.datasets_cache_dir())
    return Output(df, metadata={
        "rows": len(df),
        "source": source,
        "source_sha256": problem_data.DATA_SHA256,
        "licence": MetadataValue.path(str(problem_data.LICENSE_FILE)),
        "bug_types": MetadataValue.md(df["bug_type"].value_counts().to_frame().to_markdown()),
    })

@asset(
    group_name="problems", ins={"problems": AssetIn(metadata={"order_by": "problem_idx"})},
    description="The dataset's own oracle on both versions: every buggy version must fail, every fixed one pass.",
)
def problem_validation(context: AssetExecutionContext, problems: pd.DataFrame) -> Output[pd.DataFrame]:
    start = time.monotonic()
    result = oracle_validation.validate(problems)
    wall = time.monotonic() - start
    excluded = result[~result["valid"]]
    context.log.info(f"validated {len(result)} problems in {wall:.1f} s; {len(excluded)} excluded")
    return Output(result, metadata={
        "problems": len(result),
        "valid_pairs": int(result["valid"].sum()),
        "excluded": MetadataValue.json(excluded["task_id"].tolist()),
        "buggy_timeouts": int(result["buggy_detail"].str.startswith("timeout").sum()),
        "wall_s": round(wall, 2),
    })

@asset_check(asset=problem_validation, description="Every buggy version fails the dataset's oracle.")
def all_buggy_fail(warehouse: WarehouseResource) -> AssetCheckResult:
    df = warehouse.get().read_table("problem_validation", where={"language": "python"})  # not Java/JS
    bad = df[df["buggy_passed"]]["task_id"].tolist()
    return AssetCheckResult(passed=not bad, metadata={"buggy_passing": MetadataValue.json(bad), "checked": len(df)})

@asset_check(asset=problem_validation, description="Every fixed version passes the dataset's oracle.")
def all_fixed_pass(warehouse: WarehouseResource) -> AssetCheckResult:
    df = warehouse.get().read_table("problem_validation", where={"language": "python"})  # not Java/JS
    bad = df[~df["fixed_passed"]]["task_id"].tolist()
    return AssetCheckResult(passed=not bad, metadata={"fixed_failing": MetadataValue.json(bad), "checked": len(df)})
