"""One model's JavaScript or Java chain: model_specs [thinking] -> test_generations -> generated_tests ->
test_outcomes [condition x thinking], under the key prefix ``[<model>/]<language>/`` (docs/languages.md).

The same asset names, partitions and tables as Python's chain (assets/generation.py, assets/execution.py), so
the lineage graph shows each language's branch and one selection materialises or backfills one language
alone; the request path is Python's own (``generation.spec_partition`` and ``generation_partition``: cache,
thinking refusal, errors, metadata, the thinking check, the answers' data version), the prompts are the
language's (prompts/java/, prompts/js/), the runners and oracle are ``polyglot/``. Coverage
and mutation are not built for these languages (not estimable offline: ``analysis.language_comparison.NOT_MEASURED``).
"""

import time

import pandas as pd
from dagster import (
    AssetChecksDefinition,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
)

from evalmislead_assets import settings
from evalmislead_assets.analysis.language_comparison import NOT_MEASURED
from evalmislead_assets.assets.generation import (
    SPECS_OF_SAME_THINKING,
    THINKING_CHECK,
    GenerationConfig,
    generation_partition,
    spec_partition,
)
from evalmislead_assets.assets.model_scope import language_key, problem_keys
from evalmislead_assets.assets.outcome_checks import outcome_checks
from evalmislead_assets.dagster_metadata import GPU_HOST
from evalmislead_assets.execution.cells import cell_counts, cell_rates
from evalmislead_assets.partitions import condition_thinking_partitions, split_key, thinking_partitions
from evalmislead_assets.polyglot import prompts as language_prompts
from evalmislead_assets.polyglot import tables
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseResource
from evalmislead_assets.study.models import LANGUAGE_NAMES, ModelSpec, Study
from evalmislead_assets.study.problems import study_problems_from


def _template_version(language: str, kind: str) -> str:
    try:
        sha = language_prompts.load_language_template(language, kind, settings.prompts_dir()).sha256[:12]
    except (OSError, UnicodeDecodeError):
        sha = "unreadable"
    return f"generation-1+{language}/{kind}-{sha}"


def _study_problems(problems: pd.DataFrame, validation: pd.DataFrame, subset: list[int] | None) -> pd.DataFrame:
    """The language's validated problems in the study's ``subset`` (None: all). The validation covers the subset
    it was run for: a problem of the subset it never saw fails the step (it would otherwise drop out silently)."""
    seen = set(problems.loc[problems["task_id"].isin(validation["task_id"]), "problem_idx"].astype(int))
    unseen = sorted(set(subset if subset is not None else problems["problem_idx"].astype(int)) - seen)
    if unseen:
        shown = ", ".join(map(str, unseen[:10])) + (f" and {len(unseen) - 10} more" if len(unseen) > 10 else "")
        raise Failure(f"problem_validation of this language has no row for problem(s) {shown}; materialize it "
                      "again for the study's problems first")
    return study_problems_from(problems, validation, subset)


def build(study: Study, model: ModelSpec, language: str) -> list[AssetsDefinition]:
    """The four chain assets of one model and one language other than Python."""
    name = LANGUAGE_NAMES[language]
    group = f"{model.key}__{language}" if study.prefixed else language
    problems_key, validation_key = problem_keys(language)
    problem_ins = {"problems": AssetIn(key=problems_key),
                   "problem_validation": AssetIn(key=validation_key, metadata={"columns": ["task_id", "valid"]})}
    specs_key, generations_key, generated_key, outcomes_key = (
        language_key(study, model, language, n)
        for n in ("model_specs", "test_generations", "generated_tests", "test_outcomes"))

    @asset(key=specs_key, partitions_def=thinking_partitions, ins=problem_ins, group_name=group,
           tags=GPU_HOST,
           metadata={"partition_expr": "thinking", "replace_by": "task_id"},
           code_version=_template_version(language, language_prompts.SPEC_TEMPLATE),
           check_specs=[AssetCheckSpec(THINKING_CHECK, asset=specs_key)],
           description=f"One {name} doc comment per problem, written by the model from the buggy code "
                       f"(prompts/{language}/spec.md).")
    def model_specs(context: AssetExecutionContext, config: GenerationConfig, warehouse: WarehouseResource,
                    llm: LLMResource, study_settings: StudySettingsResource, problems: pd.DataFrame,
                    problem_validation: pd.DataFrame):
        thinking = str(context.partition_key)
        chosen = _study_problems(problems, problem_validation, study_settings.problem_subset())
        template = language_prompts.load_language_template(language, language_prompts.SPEC_TEMPLATE,
                                                           settings.prompts_dir())
        rendered = [language_prompts.spec_prompt(p, template) for p in tables.problems_from_rows(chosen, language)]
        return spec_partition(context, warehouse.get(), llm, config, study_settings, thinking, chosen, rendered,
                              template.sha256, language_prompts.extract_spec)

    @asset(key=generations_key, partitions_def=condition_thinking_partitions, group_name=group,
           tags=GPU_HOST,
           ins={**problem_ins, "model_specs": AssetIn(key=specs_key, partition_mapping=SPECS_OF_SAME_THINKING,
                                                      metadata={"columns": ["thinking", "task_id", "spec_text",
                                                                            "error"]})},
           metadata={"replace_by": "task_id"},
           code_version=_template_version(language, language_prompts.TEST_TEMPLATE),
           check_specs=[AssetCheckSpec(THINKING_CHECK, asset=generations_key)],
           description=f"The model's answer to the {name} test-generation prompt "
                       f"(prompts/{language}/test_generation.md), one per problem.")
    def test_generations(context: AssetExecutionContext, config: GenerationConfig, warehouse: WarehouseResource,
                         llm: LLMResource, study_settings: StudySettingsResource, problems: pd.DataFrame,
                         problem_validation: pd.DataFrame, model_specs: pd.DataFrame):
        condition, thinking = split_key(context.partition_key)
        template = language_prompts.load_language_template(language, language_prompts.TEST_TEMPLATE,
                                                           settings.prompts_dir())
        return generation_partition(
            context, warehouse.get(), llm, config, study_settings, condition, thinking,
            _study_problems(problems, problem_validation, study_settings.problem_subset()), model_specs,
            template.sha256,
            lambda chosen, specs: [language_prompts.generation_prompt(p, condition, specs.get(p.task_id), template)
                                   for p in tables.problems_from_rows(chosen, language)])

    @asset(key=generated_key, partitions_def=condition_thinking_partitions, group_name=group,
           ins={"test_generations": AssetIn(key=generations_key, metadata={
               "columns": ["task_id", "problem_idx", "response_text", "finish_reason", "error"],
               "order_by": "problem_idx"}), "problems": AssetIn(key=problems_key)},
           description=f"The {name} test file extracted from each answer and its test ids, collected against both "
                       f"versions ({'node:test' if language == 'js' else 'JUnit 5'}); a file that does not load "
                       "or compile has zero tests and a reason.")
    def generated_tests(context: AssetExecutionContext, study_settings: StudySettingsResource,
                        test_generations: pd.DataFrame, problems: pd.DataFrame):  # MaterializeResult with a value
        condition, thinking = split_key(context.partition_key)
        by_task = {p.task_id: p for p in tables.problems_from_rows(problems, language)}
        max_tests = study_settings.int_value("max_tests_per_answer")
        start = time.monotonic()
        df = tables.generated_test_rows(test_generations, by_task, max_tests)
        wall = time.monotonic() - start
        has_source = df["source"].notna()
        return MaterializeResult(value=df.assign(condition=condition, thinking=thinking), metadata={
            "answers": len(df), "tests": int(df["n_tests"].sum()),
            "files_with_tests": int((df["n_tests"] > 0).sum()), "no_code_found": int((~has_source).sum()),
            "not_loadable": int((has_source & ~df["import_ok"]).sum()),
            "max_tests_per_answer": max_tests, "wall_s": round(wall, 2),
        })

    @asset(key=outcomes_key, partitions_def=condition_thinking_partitions, group_name=group,
           ins={"generated_tests": AssetIn(key=generated_key, metadata={
               "columns": ["task_id", "problem_idx", "source", "test_ids", "n_tests"], "order_by": "problem_idx"}),
               "problems": AssetIn(key=problems_key)},
           description=f"Every {name} test run against the buggy and the fixed version, each in its own confined "
                       "process with a nonce channel (10 s); statuses and the four cells.")
    def test_outcomes(context: AssetExecutionContext, generated_tests: pd.DataFrame,
                      problems: pd.DataFrame):  # MaterializeResult with a value
        condition, thinking = split_key(context.partition_key)
        by_task = {p.task_id: p for p in tables.problems_from_rows(problems, language)}
        start = time.monotonic()
        df = tables.outcome_rows(generated_tests, by_task)
        wall = time.monotonic() - start
        counts = cell_counts(df["outcome"])
        rates = ({f"{k}_rate": round(v, 4) for k, v in cell_rates(counts).items()} if len(df)
                 else {"rates": "not estimable: no test"})
        return MaterializeResult(value=df.assign(condition=condition, thinking=thinking), metadata={
            "tests": len(df), **dict(counts), **rates,
            "coverage": f"not estimable for {name}: {NOT_MEASURED[language]['line_coverage']}",
            "mutation_score": f"not estimable for {name}: {NOT_MEASURED[language]['mutation_score']}",
            "statuses": MetadataValue.json({f"{v}:{s}": int((df[f"{v}_status"] == s).sum())
                                            for v in ("buggy", "fixed") for s in df[f"{v}_status"].unique()}),
            "wall_s": round(wall, 2),
        })

    return [model_specs, test_generations, generated_tests, test_outcomes]


def checks(study: Study, model: ModelSpec, language: str) -> list[AssetChecksDefinition]:
    """The checks of the language's test_outcomes: the same three as Python's (outcome_checks.py)."""
    return outcome_checks(language_key(study, model, language, "test_outcomes"))

