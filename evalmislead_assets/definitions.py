"""The one Definitions object: assets, checks, resources, jobs, built from the study file.

Models as data. Dagster gives an asset at most two partition dimensions, and
condition x thinking uses both, so the model axis is the asset key: every per-model asset is built
once per model of the study (study.toml), with the model's key as prefix and its own group
(``qwen2_5_coder_1_5b/test_generations``, group ``qwen2_5_coder_1_5b``). Each model's assets keep the
condition x thinking partitions, so backfilling thinking=on is one selection, for one model (its group)
or for all. A study of one model keeps the keys unprefixed and the groups by stage, exactly as before.
The model-free assets (problems, problem_validation, mutants) exist once and feed every model; the
cross-model assets (assets/models.py) read every model's tables. The IO manager scopes each model's
rows by its ``model_name`` (resources/io_manager.py).

Languages as a study axis (docs/languages.md): Python keeps every key above; each other language
of the study (``languages`` in study.toml) gets its problems and validation (``java/problems``) and, per model,
its chain inside the model's prefix (``java/test_generations`` or ``qwen2_5_coder_1_5b/java/test_generations``),
with the same condition x thinking partitions; rows carry ``language``. With several languages,
``language_comparisons`` and ``languages_report`` set them side by side (assets/languages.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    AssetSpec,
    Definitions,
    in_process_executor,
    load_asset_checks_from_modules,
    load_assets_from_modules,
)

from evalmislead_assets import settings, study_models
from evalmislead_assets.assets import analysis as analysis_assets
from evalmislead_assets.assets import coverage as coverage_assets
from evalmislead_assets.assets import determinism as determinism_assets
from evalmislead_assets.assets import execution as execution_assets
from evalmislead_assets.assets import generation as generation_assets
from evalmislead_assets.assets import language_chain, language_problems
from evalmislead_assets.assets import languages as language_assets
from evalmislead_assets.assets import models as model_assets
from evalmislead_assets.assets import mutants as mutants_assets
from evalmislead_assets.assets import mutation as mutation_assets
from evalmislead_assets.assets import problems as problems_assets
from evalmislead_assets.dagster_metadata import LANGUAGE_METADATA, MODEL_METADATA, column_schema_metadata
from evalmislead_assets.jobs import jobs_for
from evalmislead_assets.resources import (
    EmbeddedServerResource,
    LLMResource,
    StudySettingsResource,
    WarehouseIOManager,
    WarehouseResource,
)
from evalmislead_assets.run_console import console_without_traces
from evalmislead_assets.store import schema
from evalmislead_assets.study.models import DEFAULT_LANGUAGE, ModelSpec, Study

MODEL_FREE_MODULES: list[ModuleType] = [problems_assets, mutants_assets]
PER_MODEL_MODULES: list[ModuleType] = [generation_assets, execution_assets, analysis_assets, determinism_assets,
                                       coverage_assets, mutation_assets]

# One embedded llama-server per run, shared by `llm` and `judge_llm`, started only when a
# request misses the cache and no URL is configured, stopped when the run ends.
embedded_server = EmbeddedServerResource.configure_at_launch()


def _with_column_schema(spec: AssetSpec) -> AssetSpec:
    """The UI shows each table asset's columns, types and descriptions from the one registry (store/schema.py)."""
    table = spec.key.path[-1]
    return spec.merge_attributes(metadata=column_schema_metadata(table)) if table in schema.TABLES else spec


def _naming(model: ModelSpec, group: str | None, language: str):
    """The model's name and the language in each spec's metadata, the model in its tags; its own group when the
    study has several."""
    def name(spec: AssetSpec) -> AssetSpec:
        spec = spec.merge_attributes(metadata={MODEL_METADATA: model.name, LANGUAGE_METADATA: language},
                                     tags={"evalmislead/model": model.key})
        return spec.replace_attributes(group_name=group) if group else spec
    return name


def _finish(loaded: Sequence[object], model: ModelSpec | None = None, group: str | None = None,
            language: str = DEFAULT_LANGUAGE) -> list[Any]:
    """The loaded assets with their column schemas (and, for a model's, its name and group); other definitions as
    they are."""
    out: list[Any] = []
    for a in loaded:
        if isinstance(a, AssetsDefinition):
            a = a.map_asset_specs(_with_column_schema)
            if model is not None:
                a = a.map_asset_specs(_naming(model, group, language))
        out.append(a)
    return out


def model_assets_for(study: Study) -> tuple[list[AssetsDefinition], list[AssetChecksDefinition]]:
    """Every per-model asset and check, once per model (prefixed when the study has several)."""
    assets: list[AssetsDefinition] = []
    checks: list[AssetChecksDefinition] = []
    for model in study.models:
        if study.prefixed:
            loaded = load_assets_from_modules(PER_MODEL_MODULES, key_prefix=model.key)
            model_checks = load_asset_checks_from_modules(PER_MODEL_MODULES, asset_key_prefix=model.key)
        else:
            loaded = load_assets_from_modules(PER_MODEL_MODULES)
            model_checks = load_asset_checks_from_modules(PER_MODEL_MODULES)
        assets += _finish(loaded, model, group=model.key if study.prefixed else None)
        checks += list(model_checks)
    return assets, checks


def language_assets_for(study: Study) -> list[AssetsDefinition]:
    """Every language's assets but Python's: its problems and validation once, its chain once per model."""
    assets: list[AssetsDefinition] = []
    for language in study.other_languages:
        assets += _finish(language_problems.build(language))
        for model in study.models:
            assets += _finish(language_chain.build(study, model, language), model,
                              group=f"{model.key}__{language}" if study.prefixed else None, language=language)
    return assets


def build(study: Study) -> Definitions:
    per_model, per_model_checks = model_assets_for(study)
    cross = model_assets.build(study)
    assets = [*_finish(load_assets_from_modules(MODEL_FREE_MODULES)), *per_model, *_finish(cross),
              *language_assets_for(study), *_finish(language_assets.build(study))]
    return Definitions(
        assets=assets,
        asset_checks=[*load_asset_checks_from_modules(MODEL_FREE_MODULES), *per_model_checks,
                      *(c for language in study.other_languages for model in study.models
                        for c in language_chain.checks(study, model, language))],
        resources={
            "warehouse": WarehouseResource(),
            # asset DataFrames in and out of the same DuckDB file, by partition and model; loads are read-only
            "io_manager": WarehouseIOManager(),
            "embedded_server": embedded_server,
            "llm": LLMResource(embedded_server=embedded_server),
            "judge_llm": LLMResource(urls=settings.judge_url(), urls_origin="EVALMISLEAD_JUDGE_URL",
                                     embedded_server=embedded_server),
            # the study's run-level settings as they resolve now (the launchpad shows them; a run's config wins)
            "study_settings": StudySettingsResource.from_study(),
        },
        jobs=jobs_for(study, assets),
        # the runs' console: Dagster's own, a failure's stack trace cut to its first line (the run's events keep it)
        loggers={"console": console_without_traces},
        # One process per run: steps share the LLM resource (and the embedded server) and
        # skip a process start each; a cached chain run took 4 s instead of 15.5 s.
        executor=in_process_executor,
    )


defs = build(study_models.study())
