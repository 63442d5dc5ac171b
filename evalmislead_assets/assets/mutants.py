"""mutants (unpartitioned, shared by every model): mutants of each validated problem's fixed function,
with the dataset oracle's verdict. Scored against each model's tests by assets/mutation.py."""

import time
from typing import Optional

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, Output, asset

from evalmislead_assets.assets.problem_inputs import STUDY_PROBLEM_INS, study_problems
from evalmislead_assets.dagster_metadata import OPTIONAL_TAG
from evalmislead_assets.execution.oracle_validation import ORACLE_TIMEOUT_S
from evalmislead_assets.mutation.mutator import MAX_MUTANTS_PER_PROBLEM, MUTATOR_VERSION, SAMPLE_SEED
from evalmislead_assets.mutation.scoring import build_mutants
from evalmislead_assets.report.formatting import md_table
from evalmislead_assets.resources import StudySettingsResource, WarehouseResource

GROUP = "mutation"
# optional: `evalmislead run --no-mutation` (and a replay, by default) leaves the mutation assets out
OPTIONAL = {OPTIONAL_TAG: "mutation"}
CODE_VERSION = f"{MUTATOR_VERSION}+cap{MAX_MUTANTS_PER_PROBLEM}+seed{SAMPLE_SEED}"


class MutantsConfig(Config):
    """Launchpad settings of the mutants asset."""

    cap: int = MAX_MUTANTS_PER_PROBLEM  # mutants per problem; a seeded sample when there are more
    seed: int = SAMPLE_SEED
    oracle_timeout_s: float = ORACLE_TIMEOUT_S  # per mutant, as for problem_validation
    workers: Optional[int] = None  # oracle processes at once; None: as problem_validation



@asset(
    group_name=GROUP, code_version=CODE_VERSION, tags=OPTIONAL,
    ins=STUDY_PROBLEM_INS,
    description="Mutants of each validated problem's fixed function (AST operators, body of the function under "
                "test only, capped per problem with a seeded sample), with the dataset oracle's verdict: a mutant "
                "the oracle does not kill is flagged likely_equivalent.",
)
def mutants(
    context: AssetExecutionContext, config: MutantsConfig, warehouse: WarehouseResource,
    study_settings: StudySettingsResource, problems: pd.DataFrame, problem_validation: pd.DataFrame,
) -> Output[pd.DataFrame]:
    wh = warehouse.get()
    problems = study_problems(problems, problem_validation, study_settings.problem_subset())
    start = time.monotonic()
    df, notes = build_mutants(problems, config.cap, config.seed, config.oracle_timeout_s, config.workers)
    wall = time.monotonic() - start
    for n in notes:
        context.log.warning(f"no mutants: {n}")
    # rows of problems outside this run's subset stay; those of the problems mutated now are replaced
    kept = wh.read_table("mutants", read_only=True)
    kept = kept[~kept["task_id"].isin(problems["task_id"])]
    stored = pd.concat([kept, df], ignore_index=True) if len(kept) else df  # the whole table, via the IO manager
    per_op = df.groupby("operator").agg(mutants=("mutant_id", "size"), likely_equivalent=("likely_equivalent", "sum"))
    sampled = df.drop_duplicates("task_id")
    return Output(stored, metadata={
        "problems": int(df["task_id"].nunique()),
        "mutants": len(df),
        "likely_equivalent": int(df["likely_equivalent"].sum()),
        "oracle_timeouts": int(df["oracle_detail"].str.startswith("timeout").sum()),
        "problems_sampled": int((sampled["n_candidates"] > config.cap).sum()),
        "per_operator": MetadataValue.md(md_table(per_op.reset_index())),
        "skipped": MetadataValue.json(notes),
        "wall_s": round(wall, 2),
    })
