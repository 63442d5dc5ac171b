"""The study's models as the wiring sees them: the study file (settings.study_path), narrowed by
EVALMISLEAD_MODELS, with each bundled model's size and family filled in, and the one-model
environment overrides (EVALMISLEAD_LLM_URL, EVALMISLEAD_EMBEDDED_MODEL) checked against it.

Read once per process (``settings.study_text`` keeps the file's text, ``study()`` the parsed study): the
Dagster definitions are built from it, and a file edited during a run applies to the next run.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from evalmislead_assets import settings
from evalmislead_assets.llm import embedded_model
from evalmislead_assets.store.schema import LANGUAGE_COLUMN, MODEL_COLUMN, PER_LANGUAGE_TABLES, PER_MODEL_TABLES
from evalmislead_assets.study.models import (
    DEFAULT_LANGUAGE,
    LANGUAGES,
    ModelSpec,
    Reach,
    Study,
    StudyError,
    model_reach,
    parse_study,
    select,
)


def _bundled_default(model: embedded_model.BundledModel) -> ModelSpec:
    # the bundled coders have no thinking mode: thinking-on work for them is refused before it starts
    return ModelSpec(name=model.name, bundled=model.name, parameters=model.parameters, family="Qwen2.5-Coder",
                     thinking=False, thinking_default=f"the bundled {model.name} has no thinking mode")


BUNDLED_DEFAULTS: dict[str, ModelSpec] = {m.name: _bundled_default(m) for m in embedded_model.BUNDLED.values()}


def _filled(m: ModelSpec) -> ModelSpec:
    """A bundled model's size label and family, unless the file gives them."""
    if not m.bundled:
        return m
    known = BUNDLED_DEFAULTS[m.bundled]
    default = (f"the bundled {m.bundled} has no thinking mode; the study file does not set thinking"
               if m.thinking is None else m.thinking_default)
    return dataclasses.replace(m, parameters=m.parameters or known.parameters, family=m.family or known.family,
                               thinking=known.thinking if m.thinking is None else m.thinking,
                               thinking_default=default)


def _read() -> Study:
    """The study file as this process first read it (settings.study_text), not yet narrowed."""
    path = settings.study_path()
    try:
        text = settings.study_text()
    except OSError as exc:
        raise StudyError(f"study file {path} cannot be read ({exc.strerror or exc}); point EVALMISLEAD_STUDY at a "
                         "study.toml or unset it") from None
    return parse_study(text, str(path), embedded_model.BUNDLED)


def load() -> Study:
    """The study file, narrowed by EVALMISLEAD_MODELS; a StudyError (one line) when anything is wrong."""
    study = _read()
    names = settings.model_selection()
    if names is not None:
        study = select(study, names, BUNDLED_DEFAULTS)
    study = dataclasses.replace(study, models=tuple(_filled(m) for m in study.models))
    if not study.prefixed and (settings.llm_urls() or settings.embedded_model_override()):
        # another model answers (a server URL or GGUF from the environment): the file's capability does not apply
        study = dataclasses.replace(study, models=(dataclasses.replace(study.models[0], thinking=None),))
    if study.prefixed:
        for variable, value in (("EVALMISLEAD_LLM_URL", settings.llm_urls()),
                                ("EVALMISLEAD_EMBEDDED_MODEL", settings.embedded_model_override())):
            if value:
                raise StudyError(f"{variable} sets the model of a one-model study, but this study has "
                                 f"{len(study.models)} ({', '.join(study.names)}); unset it and give each model "
                                 f"its urls or gguf in {study.source}")
    return study


@functools.cache
def study() -> Study:
    return load()


def check() -> Study:
    """The study checked again (the selection, the environment), from the text this process read first: for
    config checks before each run's steps (a file edited during a run applies to the next run)."""
    return load()


# Assets built once per model (definitions.py) that have no table of their own.
PER_MODEL_ASSETS_WITHOUT_TABLE = frozenset({"study_report"})


def _language_prefix(path: Sequence[str]) -> str | None:
    """The language segment of a key's path (the one before the asset's name), if it names a language other
    than Python: ``java/test_generations``, ``qwen2_5_coder_1_5b/js/test_outcomes``."""
    if len(path) >= 2 and path[-2] in LANGUAGES and path[-2] != DEFAULT_LANGUAGE:
        return path[-2]
    return None


def model_for_path(path: Sequence[str]) -> ModelSpec | None:
    """The model of an asset key's path: its prefix (a study of several models), else the study's only
    model; None for the model-free assets (problems, problem_validation, mutants) and the model_* ones.
    A language segment inside the model's prefix (``m/java/test_generations``) is skipped."""
    name = path[-1]
    if name not in PER_MODEL_TABLES and name not in PER_MODEL_ASSETS_WITHOUT_TABLE:
        return None
    current = study()
    rest = list(path[:-1])
    if _language_prefix(path):
        rest = rest[:-1]
    return current.by_key(rest[0]) if rest else current.models[0]


def language_for_path(path: Sequence[str]) -> str | None:
    """The language of an asset key's path: its language segment, else Python (today's unprefixed keys);
    None for assets whose table holds no language (llm_calls, mutants, the cross-model and cross-language ones)."""
    if path[-1] not in PER_LANGUAGE_TABLES and path[-1] not in PER_MODEL_ASSETS_WITHOUT_TABLE:
        return None
    return _language_prefix(path) or DEFAULT_LANGUAGE


@functools.cache
def unnamed_rows_model() -> str:
    """Whose rows are those without a model (from a DuckDB file written before rows named their model): the study
    file's first model, whatever EVALMISLEAD_MODELS / --models select (a file from before held one model:
    the default one)."""
    return _read().models[0].name


def reset() -> None:
    """Forget the study read so far (a process that changes EVALMISLEAD_STUDY / _MODELS, e.g. a test)."""
    study.cache_clear()
    unnamed_rows_model.cache_clear()
    settings.forget_study_text()


def reach(model: ModelSpec | None = None, current: Study | None = None) -> Reach:
    """Where ``model``'s requests go (default: the study's first) and where that is set: its urls in the
    study file, EVALMISLEAD_LLM_URL, or the embedded server (study.models.model_reach)."""
    current = current or study()
    spec = model or current.models[0]
    return model_reach(spec, current.source, settings.llm_urls(), settings.embedded_model_override())


def model_filter_sql(name: str, language: str = DEFAULT_LANGUAGE) -> tuple[str, list[str]]:
    """SQL selecting one model's rows of one language (default Python): ``model_name`` is ``name``, or NULL (a
    row of an older file, or written by hand) when ``name`` is unnamed_rows_model(); each run names such
    rows (Warehouse.name_unnamed_rows) before it writes. A row without a language (an older file) is
    Python's."""
    return (f"coalesce({MODEL_COLUMN}, ?) = ? AND coalesce({LANGUAGE_COLUMN}, '{DEFAULT_LANGUAGE}') = ?",
            [unnamed_rows_model(), name, language])


__all__ = ["BUNDLED_DEFAULTS", "ModelSpec", "Reach", "Study", "StudyError", "check", "language_for_path", "load",
           "model_filter_sql", "model_for_path", "reach", "reset", "study", "unnamed_rows_model"]
