"""Which of the study's models an asset, a check or a table row belongs to.

A study of one model keeps today's asset keys (``test_generations``); with several, each model's assets
carry its key as prefix (``qwen2_5_coder_1_5b/test_generations``, definitions.py). Either way the model
is known from the key: the prefix, else the study's only (first) model. Model-free assets (problems,
problem_validation, mutants) and the cross-model ones (model_*) belong to none. A language other than Python
sits inside the model's prefix (``java/test_generations``, ``m/js/test_outcomes``; docs/languages.md): the
language is known from the key too (``language_of``), and every hand-written query selects it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from dagster import AssetCheckExecutionContext, AssetExecutionContext, AssetKey

from evalmislead_assets import study_models
from evalmislead_assets.study.models import DEFAULT_LANGUAGE, ModelSpec, Study


def model_for_key(key: AssetKey) -> Optional[ModelSpec]:
    return study_models.model_for_path(key.path)


def _keys_of(context: Any) -> list[AssetKey]:
    """Every asset key the step computes (or checks): one for an asset, several for a multi-asset
    (spec_labels and its side tables), where ``context.asset_key`` raises."""
    if isinstance(context, AssetCheckExecutionContext):
        checks = list(context.op_execution_context.selected_asset_check_keys)
        if not checks:
            raise ValueError("an asset check without a check key")
        return [c.asset_key for c in checks]
    if isinstance(context, AssetExecutionContext):
        return sorted(context.assets_def.keys, key=lambda k: k.to_user_string())
    raise TypeError(f"no asset key in {type(context).__name__}")


def model_of(context: AssetExecutionContext | AssetCheckExecutionContext) -> ModelSpec:
    """The model of the asset(s) (or the checked asset) this step computes; a multi-asset's outputs all
    belong to one model (they share its prefix)."""
    keys = _keys_of(context)
    models = {m.name: m for m in (model_for_key(k) for k in keys) if m is not None}
    if len(models) != 1:
        names = ", ".join(k.to_user_string() for k in keys)
        raise ValueError(f"{names} belong{'s' if len(keys) == 1 else ''} to "
                         f"{'no model' if not models else 'several models: ' + ', '.join(models)}")
    return next(iter(models.values()))


def language_of(context: AssetExecutionContext | AssetCheckExecutionContext) -> str:
    """The language of the asset(s) this step computes (or checks): the key's language segment
    (``java/test_generations``), else Python."""
    languages = {study_models.language_for_path(k.path) or DEFAULT_LANGUAGE for k in _keys_of(context)}
    if len(languages) != 1:
        raise ValueError(f"one step computes assets of several languages: {', '.join(sorted(languages))}")
    return next(iter(languages))



def model_sql(context: AssetExecutionContext | AssetCheckExecutionContext) -> tuple[str, list[str]]:
    """A condition selecting this step's model's rows of its language, and its parameters, for a hand-written
    query."""
    return study_models.model_filter_sql(model_of(context).name, language_of(context))


def model_path(context: AssetExecutionContext, path: Path) -> Path:
    """A file or folder of this asset's model (``Study.model_path``: ``path`` itself with one model)."""
    current = study_models.study()
    return current.model_path(path, model_of(context)) if current.prefixed else path


def language_key(study: Study, model: ModelSpec, language: str, name: str) -> AssetKey:
    """A per-model asset's key for one language: Python's as today (``name``, or ``<model>/name`` with several
    models), every other language inside the model's prefix (``java/name``, ``<model>/java/name``)."""
    prefix = [model.key] if study.prefixed else []
    return AssetKey([*prefix, *([] if language == DEFAULT_LANGUAGE else [language]), name])


def problem_keys(language: str) -> tuple[AssetKey, AssetKey]:
    """(problems, problem_validation) of ``language``: Python's unprefixed keys, else ``<language>/...``."""
    prefix = [] if language == DEFAULT_LANGUAGE else [language]
    return AssetKey([*prefix, "problems"]), AssetKey([*prefix, "problem_validation"])
