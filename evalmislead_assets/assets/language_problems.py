"""``<language>/problems`` and ``<language>/problem_validation``: the JavaScript or Java split and its oracle.

Built once per language of the study other than Python (definitions.py; Python keeps ``problems`` and
``problem_validation``). The rows go to the same tables as Python's, with ``language`` filled from the key
(resources/io_manager.py); the domain code is ``polyglot/tables.py``.
"""

import time

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
)

from evalmislead_assets.assets.model_scope import problem_keys
from evalmislead_assets.polyglot import tables
from evalmislead_assets.polyglot.problems import DATA_SHA256
from evalmislead_assets.report.formatting import md_table
from evalmislead_assets.resources import StudySettingsResource
from evalmislead_assets.study.models import LANGUAGE_NAMES

ORACLE_CHECK = "oracle_splits_versions"


def build(language: str) -> list[AssetsDefinition]:
    """The two model-free assets of one language (not Python)."""
    name = LANGUAGE_NAMES[language]
    problems_key, validation_key = problem_keys(language)

    @asset(key=problems_key, group_name=language,
           description=f"HumanEvalPack {name}: 164 problems with buggy and fixed versions (shipped, sha256-checked).")
    def problems(context: AssetExecutionContext):  # MaterializeResult with a value
        df = tables.problem_rows(language)
        return MaterializeResult(value=df, metadata={
            "rows": len(df), "language": language, "source_sha256": DATA_SHA256[language],
            "bug_types": MetadataValue.md(df["bug_type"].value_counts().to_frame().to_markdown()),
        })

    @asset(key=validation_key, group_name=language,
           ins={"problems": AssetIn(key=problems_key, metadata={"order_by": "problem_idx"})},
           check_specs=[AssetCheckSpec(ORACLE_CHECK, asset=validation_key,
                                       description="Some problem is a valid pair: a split with every problem excluded "
                                                   "points at a missing toolchain (node, javac, junit5), not at "
                                                   "the dataset.")],
           description=f"The dataset's own {name} test on both versions: buggy must fail, fixed must pass; each "
                       "exclusion with its reason. Only the study's problems (EVALMISLEAD_PROBLEMS / study.toml) "
                       "are validated when a subset is set.")
    def problem_validation(context: AssetExecutionContext, study_settings: StudySettingsResource,
                           problems: pd.DataFrame):  # MaterializeResult with a value
        subset = study_settings.problem_subset()
        chosen = problems if subset is None else problems[problems["problem_idx"].isin(subset)]
        start = time.monotonic()
        df = tables.validation_rows(tables.problems_from_rows(chosen, language))
        wall = time.monotonic() - start
        excluded = tables.exclusions(df)
        for task_id, why in excluded.items():
            context.log.warning(f"{task_id} excluded: {why}")
        shown = pd.DataFrame({"task_id": list(excluded), "reason": list(excluded.values())})
        return MaterializeResult(value=df, metadata={
            "problems": len(df), "valid_pairs": int(df["valid"].sum()), "wall_s": round(wall, 2),
            "excluded": MetadataValue.md(md_table(shown) if len(shown) else "none"),
        }, check_results=[AssetCheckResult(
            check_name=ORACLE_CHECK, asset_key=validation_key, passed=bool(df.empty or df["valid"].any()),
            description=f"{len(excluded)} of {len(df)} {name} problems excluded",
            metadata={"excluded": MetadataValue.json(excluded)})])

    return [problems, problem_validation]
