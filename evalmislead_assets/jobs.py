"""Partitioned asset jobs for `dagster job backfill`, and the thinking-mode partition slices.

The jobs select by partitions definition, read off the assets themselves (no list of asset names):
model_specs_job takes every asset partitioned by thinking mode, generation_chain_job every asset partitioned
by condition x thinking mode, optional ones (``evalmislead/optional``: the mutation steps) left out. With
several models (study.toml) the two jobs select every model's assets, and each model has its own pair too
(its assets by their ``evalmislead/model`` metadata). With several languages each job selects every
language's chain too (``java/test_generations``, ...).
"""

from collections.abc import Sequence

from dagster import AssetKey, AssetsDefinition, AssetSelection, define_asset_job, in_process_executor

from evalmislead_assets.dagster_metadata import MODEL_METADATA, OPTIONAL_TAG
from evalmislead_assets.partitions import condition_thinking_partitions, partition_key, thinking_partitions
from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES
from evalmislead_assets.study.models import ModelSpec, Study


def model_keys(study: Study, names: list[str], model: ModelSpec | None = None) -> list[AssetKey]:
    """The keys of ``names`` for one model (default: every model of the study)."""
    models = [model] if model is not None else list(study.models)
    return [AssetKey([m.key, n]) if study.prefixed else AssetKey(n) for m in models for n in names]


def partitioned_keys(assets: Sequence[object], partitions_def: object, model: ModelSpec | None = None) -> list[AssetKey]:
    """The keys of ``assets`` partitioned by ``partitions_def``, optional ones left out; ``model``: only its own."""
    out: list[AssetKey] = []
    for a in assets:
        if not isinstance(a, AssetsDefinition) or a.partitions_def != partitions_def:
            continue
        for key, spec in a.specs_by_key.items():
            named = spec.metadata.get(MODEL_METADATA)
            if spec.tags.get(OPTIONAL_TAG) or (model is not None and named != model.name):
                continue
            out.append(key)
    return sorted(out, key=lambda k: k.to_user_string())


# The chain's steps run one after the other, so these jobs run them inside the run's own
# process: a step subprocess per asset (the multiprocess default) costs an interpreter
# start and an import of the project per step; measured here, a cached chain run took
# 15.5 s that way and 4.0 s in process.
def _jobs(study: Study, assets: Sequence[object], model: ModelSpec | None) -> list:
    prefix = f"{model.key}__" if model is not None else ""
    whose = f" of model {model.name}" if model is not None else (" of every model" if study.prefixed else "")
    return [
        define_asset_job(
            f"{prefix}model_specs_job",
            selection=AssetSelection.assets(*partitioned_keys(assets, thinking_partitions, model)),
            description=f"Model-written specs{whose} for one thinking mode (partition 'off' or 'on').",
            executor_def=in_process_executor,
        ),
        define_asset_job(
            f"{prefix}generation_chain_job",
            selection=AssetSelection.assets(*partitioned_keys(assets, condition_thinking_partitions, model)),
            description=(
                f"The chain (test_generations -> generated_tests -> test_outcomes, test_coverage){whose} for one "
                "condition|thinking partition. Backfill only thinking=on with: dagster job backfill -j "
                f'{prefix}generation_chain_job --partitions "$(python -m evalmislead_assets.jobs on)"'
            ),
            executor_def=in_process_executor,
        ),
    ]


def jobs_for(study: Study, assets: Sequence[object]) -> list:
    """model_specs_job and generation_chain_job over ``assets`` (every model); with several models, also one pair
    per model (``<model key>__generation_chain_job``)."""
    out = _jobs(study, assets, None)
    if study.prefixed:
        for model in study.models:
            out += _jobs(study, assets, model)
    return out


def _check_mode(mode: str) -> str:
    if mode not in THINKING_MODES:
        raise ValueError(f"thinking mode {mode!r} is not one of {THINKING_MODES}")
    return mode


def thinking_partition_keys(mode: str) -> list[str]:
    """Every condition|thinking key of one thinking mode, e.g. ['buggy_code|on', ...]."""
    _check_mode(mode)
    return [str(partition_key(c, mode)) for c in CONDITION_NAMES]


def asset_partition_keys(partitions_def: object, mode: str) -> list[str]:
    """The partitions of a generation asset's ``partitions_def`` that belong to a thinking mode."""
    _check_mode(mode)
    if partitions_def == thinking_partitions:
        return [mode]
    if partitions_def == condition_thinking_partitions:
        return thinking_partition_keys(mode)
    raise ValueError("not a thinking-partitioned asset: its partitions are neither thinking nor condition x thinking")


if __name__ == "__main__":  # prints the comma-separated keys for `dagster job backfill --partitions`
    import sys

    print(",".join(thinking_partition_keys(sys.argv[1] if len(sys.argv) > 1 else "on")))
