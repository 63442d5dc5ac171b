"""Partitioned asset jobs for `dagster job backfill`, and the thinking-mode partition slices.

Asset keys are named, not imported, so this module loads before the asset modules
it selects; `Definitions` resolves the selections and infers each job's partitions
(model_specs_job: thinking; generation_chain_job: condition x thinking).
"""

from dagster import AssetSelection, define_asset_job, in_process_executor

from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES
from evalmislead_assets.partitions import partition_key

# The generation-to-outcome chain, in dependency order.
SPEC_ASSETS: list[str] = ["model_specs"]
CHAIN_ASSETS: list[str] = ["test_generations", "generated_tests", "test_outcomes"]
GENERATION_ASSETS: list[str] = SPEC_ASSETS + CHAIN_ASSETS

# The chain's steps run one after the other, so these jobs run them inside the run's own
# process: a step subprocess per asset (the multiprocess default) costs an interpreter
# start and an import of the project per step; measured here, a cached chain run took
# 15.5 s that way and 4.0 s in process.
model_specs_job = define_asset_job(
    "model_specs_job",
    selection=AssetSelection.assets(*SPEC_ASSETS),
    description="Model-written specs for one thinking mode (partition 'off' or 'on').",
    executor_def=in_process_executor,
)

generation_chain_job = define_asset_job(
    "generation_chain_job",
    selection=AssetSelection.assets(*CHAIN_ASSETS),
    description=(
        "test_generations -> generated_tests -> test_outcomes for one condition|thinking partition. "
        "Backfill only thinking=on with: dagster job backfill -j generation_chain_job "
        '--partitions "$(python -m evalmislead_assets.jobs on)"'
    ),
    executor_def=in_process_executor,
)

JOBS: list = [model_specs_job, generation_chain_job]


def _check_mode(mode: str) -> str:
    if mode not in THINKING_MODES:
        raise ValueError(f"thinking mode {mode!r} is not one of {THINKING_MODES}")
    return mode


def thinking_partition_keys(mode: str) -> list[str]:
    """Every condition|thinking key of one thinking mode, e.g. ['buggy_code|on', ...]."""
    _check_mode(mode)
    return [str(partition_key(c, mode)) for c in CONDITION_NAMES]


def asset_partition_keys(asset: str, mode: str) -> list[str]:
    """The partitions of one generation asset that belong to a thinking mode."""
    _check_mode(mode)
    if asset in SPEC_ASSETS:
        return [mode]
    if asset in CHAIN_ASSETS:
        return thinking_partition_keys(mode)
    raise ValueError(f"{asset!r} is not a thinking-partitioned asset; choose from {GENERATION_ASSETS}")


if __name__ == "__main__":  # prints the comma-separated keys for `dagster job backfill --partitions`
    import sys

    print(",".join(thinking_partition_keys(sys.argv[1] if len(sys.argv) > 1 else "on")))
