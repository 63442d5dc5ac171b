"""Partitioned asset jobs for `dagster job backfill`, and the thinking-mode partition slices.

Asset keys are named, not imported, so this module loads before the asset modules
it selects; `Definitions` resolves the selections and infers each job's partitions
(model_specs_job: thinking; generation_chain_job: condition x thinking). With several models
(study.toml) the two jobs select every model's assets, and each model has its own pair too. With several
languages each job selects every language's chain too (``java/test_generations``, ...).
"""

from dagster import AssetKey, AssetSelection, define_asset_job, in_process_executor

from evalmislead_assets.partitions import partition_key
from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES
from evalmislead_assets.study.models import ModelSpec, Study

# The generation-to-outcome chain, in dependency order.
SPEC_ASSETS: list[str] = ["model_specs"]
CHAIN_ASSETS: list[str] = ["test_generations", "generated_tests", "test_outcomes"]
GENERATION_ASSETS: list[str] = SPEC_ASSETS + CHAIN_ASSETS

def model_keys(study: Study, names: list[str], model: ModelSpec | None = None) -> list[AssetKey]:
    """The keys of ``names`` for one model (default: every model of the study)."""
    models = [model] if model is not None else list(study.models)
    return [AssetKey([m.key, n]) if study.prefixed else AssetKey(n) for m in models for n in names]


def language_keys(study: Study, names: list[str], model: ModelSpec | None = None) -> list[AssetKey]:
    """The keys of ``names`` in every language of the study but Python, inside the model's prefix
    (``java/test_generations``, ``<model>/java/test_generations``; docs/languages.md)."""
    models = [model] if model is not None else list(study.models)
    return [AssetKey([*([m.key] if study.prefixed else []), lang, n])
            for m in models for lang in study.other_languages for n in names]


# The chain's steps run one after the other, so these jobs run them inside the run's own
# process: a step subprocess per asset (the multiprocess default) costs an interpreter
# start and an import of the project per step; measured here, a cached chain run took
# 15.5 s that way and 4.0 s in process.
def _jobs(study: Study, model: ModelSpec | None) -> list:
    prefix = f"{model.key}__" if model is not None else ""
    whose = f" of model {model.name}" if model is not None else (" of every model" if study.prefixed else "")
    return [
        define_asset_job(
            f"{prefix}model_specs_job",
            selection=AssetSelection.assets(*model_keys(study, SPEC_ASSETS, model),
                                            *language_keys(study, SPEC_ASSETS, model)),
            description=f"Model-written specs{whose} for one thinking mode (partition 'off' or 'on').",
            executor_def=in_process_executor,
        ),
        define_asset_job(
            f"{prefix}generation_chain_job",
            selection=AssetSelection.assets(*model_keys(study, CHAIN_ASSETS, model),
                                            *language_keys(study, CHAIN_ASSETS, model)),
            description=(
                f"test_generations -> generated_tests -> test_outcomes{whose} for one condition|thinking "
                f"partition. Backfill only thinking=on with: dagster job backfill -j {prefix}generation_chain_job "
                '--partitions "$(python -m evalmislead_assets.jobs on)"'
            ),
            executor_def=in_process_executor,
        ),
    ]


def jobs_for(study: Study) -> list:
    """model_specs_job and generation_chain_job (every model); with several models, also one pair per
    model (``<model key>__generation_chain_job``)."""
    out = _jobs(study, None)
    if study.prefixed:
        for model in study.models:
            out += _jobs(study, model)
    return out


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
