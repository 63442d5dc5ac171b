"""Analysis assets: rates, bootstrap comparisons, matched subset, spec labels, reasoning mentions, report.

Each is unpartitioned and reads every partition of its upstream tables that is stored, so
it works on a partial run (e.g. thinking off only) and names what is missing in its
metadata. The plan's sha256 is part of every asset's code version: editing
prompts/analysis_plan.json marks them all stale in the UI. spec_labels and reasoning_mentions
are multi-assets: their side tables (spec_label_agreement, spec_label_splits,
reasoning_mention_matches, reasoning_mention_summary) are assets of their own, computed in the
same step and stored by the IO manager like every other table.
"""

import time
from pathlib import Path
from typing import Any, Optional, cast

import pandas as pd
from dagster import (
    AssetExecutionContext,
    AssetIn,
    Failure,
    MaterializeResult,
    MetadataValue,
    Output,
    asset,
    multi_asset,
)
from pydantic import Field

from evalmislead_assets import settings, study_models
from evalmislead_assets.analysis import problem_level, rates, repetition, secondary
from evalmislead_assets.analysis.plan import Plan, cells_present
from evalmislead_assets.analysis.reasoning_mentions import load_keywords
from evalmislead_assets.analysis.spec_examples import execution_labels
from evalmislead_assets.analysis.spec_labels import (
    JUDGE_CALL_FAILED,
    JUDGE_TEMPLATE,
    agreement,
    category_counts,
    combine,
    execution_counts,
    human_labels_given,
    judge_specs,
    read_review_csv,
    review_sample,
    write_review_csv,
)
from evalmislead_assets.analysis.tool_policy import INPUT_COLUMNS as TOOL_POLICY_COLUMNS
from evalmislead_assets.analysis.tool_policy import TOOL_POLICY_SQL
from evalmislead_assets.analysis.tool_policy import tool_policy as tool_policy_table
from evalmislead_assets.analysis.upstream import (
    REASONING_GENERATION_COLUMNS,
    REPETITION_GENERATED_COLUMNS,
    REPETITION_GENERATION_COLUMNS,
)
from evalmislead_assets.assets.analysis_inputs import UPSTREAM, plan_code_version, say_notes, study_plan
from evalmislead_assets.assets.model_scope import model_path
from evalmislead_assets.assets.sandbox_config import ExecutionConfig, isolation_note, make_sandbox, warn_if_degraded
from evalmislead_assets.assets.table_outs import table_outs
from evalmislead_assets.llm.errors import batch_errors_line
from evalmislead_assets.llm.prompts import load_template
from evalmislead_assets.llm.types import LLMUnreachable
from evalmislead_assets.report.build import build, load_data, write
from evalmislead_assets.report.formatting import md_table
from evalmislead_assets.report.inputs import INPUTS
from evalmislead_assets.report.viewer import write_viewer
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseResource
from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES

GROUP = "analysis"
_VERSION = plan_code_version()


def _coverage(*frames: pd.DataFrame) -> dict[str, MetadataValue]:
    present = cells_present(*frames)
    keys = {f"{c}|{t}" for c, t in present}
    missing = [f"{c}|{t}" for t in THINKING_MODES for c in CONDITION_NAMES if f"{c}|{t}" not in keys]
    return {
        "partitions_present": MetadataValue.json(sorted(keys)),
        "partitions_missing": MetadataValue.json(missing),
        "thinking_modes_present": MetadataValue.json(sorted({t for _, t in present})),
    }


def _plan_meta(plan: Plan) -> dict[str, Any]:
    return {"plan_version": plan.version, "plan_sha256": plan.sha256, "plan_file": MetadataValue.path(str(plan.path))}


def review_csv(context: AssetExecutionContext) -> Path:
    """This model's review CSV: spec_labels writes and reads it, study_report names it."""
    return model_path(context, settings.review_csv_path())


def _md(df: pd.DataFrame) -> MetadataValue:
    return MetadataValue.md(md_table(df))


@asset(group_name=GROUP, ins=UPSTREAM, code_version=_VERSION,
       description="Per condition x thinking: cell counts, pooled rates with intervals, truncation and import counts.")
def condition_rates(
    context: AssetExecutionContext, test_outcomes: pd.DataFrame, test_generations: pd.DataFrame,
    generated_tests: pd.DataFrame,
) -> Output[pd.DataFrame]:
    plan = study_plan()
    outcomes, gens, gt = test_outcomes, test_generations, generated_tests
    t0 = time.perf_counter()
    df = rates.condition_rates(outcomes, gens, gt, plan)
    wall = time.perf_counter() - t0
    context.log.info(f"condition_rates: {len(df)} condition x thinking rows in {wall:.2f} s")
    shown = df[["condition", "thinking", "n_problems", "n_tests", "n_misleading", "n_effective",
                "misleading_rate", "effective_rate", "problems_with_effective", "n_truncated_no_tests",
                "n_unimportable", "n_collect_one_version", "n_empty_spec"]]
    return Output(df, metadata={
        "rows": len(df), "compute_s": round(wall, 3), **_plan_meta(plan), **_coverage(outcomes, gens, gt),
        "rates": _md(shown.round(4)),
    })


@asset(group_name=GROUP, ins=UPSTREAM, code_version=_VERSION,
       description="The plan's four comparisons per thinking mode: paired bootstrap over problems, percentile CI "
                   "(thinking on: on the truncation-matched subset; a side with 0 tests: not estimable).")
def bootstrap_comparisons(
    context: AssetExecutionContext, test_outcomes: pd.DataFrame, test_generations: pd.DataFrame,
    generated_tests: pd.DataFrame,
) -> Output[pd.DataFrame]:
    plan = study_plan()
    outcomes, gens, gt = test_outcomes, test_generations, generated_tests
    t0 = time.perf_counter()
    df, notes = rates.bootstrap_comparisons(outcomes, gens, gt, plan)
    wall = time.perf_counter() - t0
    say_notes(context.log.warning, context.log.info, notes, gens)
    context.log.info(f"bootstrap_comparisons: {len(df)} rows, {plan.n_boot} resamples each, {wall:.2f} s")
    shown = df[["thinking", "comparison_id", "metric", "condition_a", "condition_b", "estimate", "ci_low",
                "ci_high", "n_problems", "n_zero_denominator", "subset", "verdict"]]
    return Output(df, metadata={
        "rows": len(df), "bootstrap_s": round(wall, 3), "n_boot": plan.n_boot, "level": plan.level, "seed": plan.seed,
        "skipped": MetadataValue.json(notes), **_plan_meta(plan), **_coverage(outcomes, gens, gt),
        "comparisons": _md(shown.round(4)),
    })


@asset(group_name=GROUP, ins=UPSTREAM, code_version=_VERSION,
       description="Problems where both thinking modes produced >= 1 test in both buggy_code and fixed_code.")
def truncation_matched_subset(
    context: AssetExecutionContext, test_outcomes: pd.DataFrame, test_generations: pd.DataFrame,
    generated_tests: pd.DataFrame,
) -> Output[pd.DataFrame]:
    plan = study_plan()
    outcomes, gens, gt = test_outcomes, test_generations, generated_tests
    df = rates.truncation_matched_subset(outcomes, gens, gt, plan)
    n_in = int(df["in_subset"].sum()) if len(df) else 0
    cov = _coverage(outcomes, gens, gt)
    modes = set(cast(list[str], cov["thinking_modes_present"].value))
    note = "" if {"off", "on"} <= modes else f"only thinking {sorted(modes)} stored: the subset is empty until both modes are"
    if note:  # a mode with no answer at all is one the study did not run: nothing is missing
        answered = set(gens["thinking"]) if len(gens) else set()
        (context.log.warning if ({"off", "on"} - modes) & answered else context.log.info)(note)
    return Output(df, metadata={
        "problems_considered": len(df), "in_subset": n_in, "note": note, **_plan_meta(plan), **cov,
    })


@asset(group_name=GROUP, code_version="tool_policy-2",
       ins={"test_outcomes": AssetIn(metadata={"columns": list(TOOL_POLICY_COLUMNS)})},
       description="What a test generator that keeps only the tests passing on the code (CoverUp-like) would keep "
                   "per condition x thinking: kept misleading tests, discarded effective tests, the kept suite's "
                   "bug-revealing rate with intervals (from stored outcomes; filter on the shown version, buggy where "
                   "none is shown). Keeping every misleading and dropping every effective test is an identity.")
def tool_policy(context: AssetExecutionContext, test_outcomes: pd.DataFrame) -> Output[pd.DataFrame]:
    df = tool_policy_table(test_outcomes, study_plan().level)
    context.log.info(f"tool_policy: {len(df)} condition x thinking rows from {len(test_outcomes)} outcomes")
    return Output(df, metadata={"rows": len(df), "policy": _md(df.round(4)), "sql": MetadataValue.md(
        f"```sql\n{TOOL_POLICY_SQL}\n```")})


@asset(group_name=GROUP, ins={"truncation_matched_subset": AssetIn(), "test_outcomes": UPSTREAM["test_outcomes"],
                              "test_generations": UPSTREAM["test_generations"]},
       code_version=_VERSION,
       description="Thinking on minus off on the truncation-matched subset (same bootstrap; report-only).")
def thinking_comparisons(
    context: AssetExecutionContext, truncation_matched_subset: pd.DataFrame, test_outcomes: pd.DataFrame,
    test_generations: pd.DataFrame,
) -> Output[pd.DataFrame]:
    plan = study_plan()
    df = rates.thinking_comparisons(test_outcomes, truncation_matched_subset, plan, test_generations)
    n = int(df["n_problems"].max()) if len(df) else 0
    return Output(df, metadata={
        "rows": len(df), "subset_problems": n, **_plan_meta(plan),
        "comparisons": _md(df[["condition", "metric", "rate_off", "rate_on", "estimate", "ci_low", "ci_high",
                               "n_problems"]].round(4)),
    })


@asset(group_name=GROUP, ins=UPSTREAM, code_version=_VERSION,
       description="Per condition x thinking: problems run, with tests, with at least one misleading / effective "
                   "test (shares of both denominators, Wilson interval over problems; secondary, plan amendment "
                   "of 2026-12-07).")
def problem_rates(
    context: AssetExecutionContext, test_outcomes: pd.DataFrame, test_generations: pd.DataFrame,
    generated_tests: pd.DataFrame,
) -> Output[pd.DataFrame]:
    plan = study_plan()
    df = problem_level.problem_rates(test_outcomes, test_generations, generated_tests, plan)
    context.log.info(f"problem_rates: {len(df)} condition x thinking rows")
    return Output(df, metadata={
        "rows": len(df), **_plan_meta(plan), **_coverage(test_outcomes, test_generations, generated_tests),
        "rates": _md(df[["condition", "thinking", "n_problems", "n_problems_with_tests", "problems_with_misleading",
                         "problems_with_effective"]]),
    })


@asset(group_name=GROUP, ins=UPSTREAM, code_version=_VERSION,
       description="The plan's four comparisons on problem indicators (at least one misleading / effective test): "
                   "exact McNemar test of the discordant pairs and paired bootstrap (secondary, plan amendment of "
                   "2026-12-07).")
def problem_comparisons(
    context: AssetExecutionContext, test_outcomes: pd.DataFrame, test_generations: pd.DataFrame,
    generated_tests: pd.DataFrame,
) -> Output[pd.DataFrame]:
    plan = study_plan()
    t0 = time.perf_counter()
    df, notes = problem_level.problem_comparisons(test_outcomes, test_generations, generated_tests, plan)
    wall = time.perf_counter() - t0
    say_notes(context.log.warning, context.log.info, notes, test_generations)
    shown = df[["thinking", "comparison_id", "metric", "condition_a", "condition_b", "n_problems", "problems_a",
                "problems_b", "discordant_a", "discordant_b", "mcnemar_p", "estimate", "ci_low", "ci_high", "verdict"]]
    return Output(df, metadata={
        "rows": len(df), "bootstrap_s": round(wall, 3), "n_boot": plan.n_boot, "level": plan.level,
        "seed": plan.seed, "skipped": MetadataValue.json(notes), **_plan_meta(plan),
        **_coverage(test_outcomes, test_generations, generated_tests), "comparisons": _md(shown.round(4)),
        "sql": MetadataValue.md(f"```sql\n{problem_level.PROBLEM_COMPARISON_SQL}\n```"),
    })


REPETITION_TABLES = ("test_repeats", "answer_repeats")


@multi_asset(
    group_name=GROUP,
    outs=table_outs("repetition_rates", REPETITION_TABLES, plan_code_version(),
                    "Per condition x thinking: the pooled rates, the same with exact-copy tests counted once, the top "
                    "problem's share of each cell and the tests of answers cut at the cap in a loop; per test "
                    "(test_repeats: duplicate_of) and per answer (answer_repeats: loop) as side tables."),
    ins={"test_outcomes": UPSTREAM["test_outcomes"],
         "generated_tests": AssetIn(metadata={"columns": list(REPETITION_GENERATED_COLUMNS)}),
         "test_generations": AssetIn(metadata={"columns": list(REPETITION_GENERATION_COLUMNS)})},
)
def repetition_rates(
    context: AssetExecutionContext, test_outcomes: pd.DataFrame, generated_tests: pd.DataFrame,
    test_generations: pd.DataFrame,
) -> tuple[Output[pd.DataFrame], Output[pd.DataFrame], Output[pd.DataFrame]]:
    plan = study_plan()
    tests = repetition.per_test_repeats(test_outcomes, generated_tests)
    answers = repetition.per_answer_repeats(tests, test_generations)
    summary = repetition.repetition_rates(tests, answers, plan)
    n_dup = int(tests["duplicate_of"].notna().sum()) if len(tests) else 0
    n_loop = int(answers["loop"].astype(bool).sum()) if len(answers) else 0
    context.log.info(f"repetition: {n_dup} of {len(tests)} tests copy an earlier one; {n_loop} answers cut in a loop")
    meta = _plan_meta(plan)
    return (
        Output(summary, output_name="repetition_rates", metadata={
            "rows": len(summary), "rates": _md(summary.drop(columns="plan_sha256").round(4)), **meta}),
        Output(tests, output_name="test_repeats", metadata={"tests": len(tests), "duplicates": n_dup}),
        Output(answers, output_name="answer_repeats", metadata={"answers": len(answers), "loops": n_loop}),
    )


SPEC_LABEL_TABLES = ("spec_label_agreement", "spec_label_splits")
REASONING_MENTION_TABLES = ("reasoning_mention_matches", "reasoning_mention_summary")


def _judge_who(judge_llm: LLMResource) -> str:
    """Whose server the spec judge asks: EVALMISLEAD_JUDGE_URL, else the study's first model's."""
    if judge_llm.urls.strip():
        return judge_llm.urls_origin
    return (f"the study's first model, {study_models.study().models[0].name}, judges every model's specs; "
            "EVALMISLEAD_JUDGE_URL sets another server")


SPEC_EXAMPLE_TIMEOUT_S = 2.0


class SpecLabelsConfig(ExecutionConfig):
    """Launchpad settings of the spec_labels asset (workers, timeout_s: the sandbox that runs the specs' examples)."""

    # One example is one call of the function: the fixed versions answer their examples in milliseconds, while a
    # buggy version that never returns would cost the study's 10 s test limit per example (minutes per run).
    timeout_s: float = Field(default=SPEC_EXAMPLE_TIMEOUT_S, gt=0,
                             description="Seconds per spec example and version (a version that takes longer does "
                                         "not answer it).")

    judge_max_tokens: Optional[int] = Field(
        default=None, ge=1,
        description="The judge's output cap in tokens (its answer is two short lines); "
                    "empty: EVALMISLEAD_JUDGE_MAX_TOKENS, default 256.")


@multi_asset(
    group_name=GROUP,
    outs=table_outs("spec_labels", SPEC_LABEL_TABLES, plan_code_version(template=f"{JUDGE_TEMPLATE}.md"),
                    "Two labels per model-written spec by a judge model (prompts/spec_judge.md) and by running the "
                    "examples the spec states against both versions in the sandbox (the execution judge, which wins "
                    "over the LLM judge where it has evidence), human review CSV "
                    "exported/imported (human labels win); agreement and the misleading rate split by label are "
                    "its side tables spec_label_agreement and spec_label_splits."),
    ins={"model_specs": AssetIn(metadata={"columns": ["thinking", "task_id", "problem_idx", "spec_text", "error"],
                                          "order_by": "thinking, problem_idx"}),
         "problems": AssetIn(metadata={"columns": ["task_id", "problem_idx", "entry_point", "buggy_code",
                                                   "fixed_code"]}),
         **UPSTREAM},
)
def spec_labels(
    context: AssetExecutionContext, config: SpecLabelsConfig, warehouse: WarehouseResource, judge_llm: LLMResource,
    study_settings: StudySettingsResource, model_specs: pd.DataFrame, problems: pd.DataFrame, test_outcomes: pd.DataFrame,
    test_generations: pd.DataFrame, generated_tests: pd.DataFrame,
) -> tuple[Output[pd.DataFrame], Output[pd.DataFrame], Output[pd.DataFrame]]:
    plan = study_plan()
    sec = plan.section("spec_labels")
    specs = model_specs
    # the warehouse holds the judge's answers (llm_cache); the three tables go through the IO manager
    template = load_template(JUDGE_TEMPLATE, settings.prompts_dir())
    max_tokens = config.judge_max_tokens or study_settings.int_value("judge_max_tokens")
    try:
        judged = judge_specs(specs, problems, judge_llm, warehouse.get(), template=template, max_tokens=max_tokens,
                             log=context.log)
    except LLMUnreachable as exc:  # judged answers so far are cached; say whose server the judge is
        raise Failure(description=f"the spec judge ({_judge_who(judge_llm)}): {exc}") from None
    call_errors = [e if str(e or "").startswith(JUDGE_CALL_FAILED) else None for e in judged["judge_error"]]
    line = batch_errors_line("spec_labels (judge)", [str(t) for t in judged["task_id"]], call_errors)
    if line:  # a failing judge server is not a label: the step fails, good answers stay cached
        raise Failure(description=line, metadata={"errors": sum(e is not None for e in call_errors)})
    path = review_csv(context)
    added = write_review_csv(
        path, review_sample(specs, int(sec.get("review_sample_size", 20)), int(sec.get("review_seed", plan.seed))),
        problems)
    human = read_review_csv(path) if path.exists() else None
    sandbox = make_sandbox(config, study_settings)
    executed = execution_labels(specs, problems, sandbox)
    warn_if_degraded(context, sandbox)
    labels, notes = combine(judged, human, executed)
    labels.insert(0, "plan_sha256", plan.sha256)
    agree = agreement(labels)
    agree.insert(0, "plan_sha256", plan.sha256)
    splits = secondary.spec_label_splits(test_outcomes, test_generations, generated_tests, labels, plan)
    for n in notes:
        context.log.warning(n)
    meta = _plan_meta(plan)
    return (
        Output(labels, output_name="spec_labels", metadata={
            "specs": len(labels), "judge_unparsed_or_failed": int(labels["judge_error"].notna().sum()),
            "review_csv": MetadataValue.path(str(path)), "review_rows_added": added,
            "human_labels_imported": human_labels_given(human), "notes": MetadataValue.json(notes),
            "categories": _md(category_counts(labels)), "execution_judge": _md(execution_counts(labels)),
            "sandbox": isolation_note(sandbox.isolation), **meta}),
        Output(agree, output_name="spec_label_agreement", metadata={
            "rows": len(agree), "agreement": _md(agree.drop(columns="plan_sha256").round(3)), **meta}),
        Output(splits, output_name="spec_label_splits", metadata={
            "rows": len(splits), "splits": _md(splits.drop(columns="plan_sha256").round(4)), **meta}),
    )


@multi_asset(
    group_name=GROUP,
    outs=table_outs("reasoning_mentions", REASONING_MENTION_TABLES,
                    plan_code_version(plan_file="reasoning_keywords.txt"),
                    "Thinking-on buggy_code answers whose reasoning mentions the bug (prompts/reasoning_keywords.txt); "
                    "every keyword match and the misleading rate by mention are its side tables "
                    "reasoning_mention_matches and reasoning_mention_summary."),
    ins={"test_generations": AssetIn(metadata={"columns": list(REASONING_GENERATION_COLUMNS)}),
         "test_outcomes": UPSTREAM["test_outcomes"]},
)
def reasoning_mentions(
    context: AssetExecutionContext, test_generations: pd.DataFrame, test_outcomes: pd.DataFrame,
) -> tuple[Output[pd.DataFrame], Output[pd.DataFrame], Output[pd.DataFrame]]:
    plan = study_plan()
    sec = plan.section("reasoning_mentions")
    cond, thinking = sec.get("condition", "buggy_code"), sec.get("thinking", "on")
    keywords = load_keywords(secondary.keywords_path(plan))

    def _cell(df: pd.DataFrame) -> pd.DataFrame:  # the plan's condition|thinking (all partitions are loaded)
        return df[(df["condition"] == cond) & (df["thinking"] == thinking)].reset_index(drop=True)

    gens, outcomes = _cell(test_generations), _cell(test_outcomes)
    answers, matches, summary = secondary.reasoning_mentions(gens, outcomes, keywords, plan)
    note = "" if len(gens) else f"no {cond}|{thinking} answers stored: materialize that partition to fill this table"
    if note:  # a mode no answer is stored for is one the study did not run: info, not a warning
        ran = len(test_generations) and (test_generations["thinking"] == thinking).any()
        (context.log.warning if ran else context.log.info)(note)
    meta = {"keywords_sha256": keywords.sha256, **_plan_meta(plan)}
    return (
        Output(answers, output_name="reasoning_mentions", metadata={
            "answers": len(answers), "with_reasoning": int(answers["has_reasoning"].sum()) if len(answers) else 0,
            "mentioning": int(answers["mentions"].sum()) if len(answers) else 0, "note": note, **meta}),
        Output(matches, output_name="reasoning_mention_matches", metadata={
            "matches": len(matches),
            "keywords_matched": MetadataValue.json(sorted(map(str, set(matches["keyword"])))) if len(matches)
            else MetadataValue.json([]), **meta}),
        Output(summary, output_name="reasoning_mention_summary", metadata={
            "rows": len(summary), "summary": _md(summary.drop(columns=["plan_sha256", "keywords_sha256"]).round(4)),
            **meta}),
    )


# Every table the report reads (report/inputs.py), each an input loaded by the IO manager (this model's rows).
REPORT_INS = {name: AssetIn(metadata={"columns": list(columns)}) if columns else AssetIn()
              for name, columns in INPUTS.items()}


@asset(group_name=GROUP, code_version=_VERSION, ins=REPORT_INS,
       description="The study report (Markdown, HTML, PNG plots) with every table of the published write-up.")
def study_report(context: AssetExecutionContext, **inputs: pd.DataFrame) -> MaterializeResult:
    plan = study_plan()
    data = load_data(inputs, review_csv=review_csv(context))
    folder = model_path(context, settings.report_dir())
    written = write(build(data, plan), folder)
    viewer = write_viewer(inputs, folder / "viewer")
    context.log.info(f"study report written to {written.html_path}; every answer and test: {viewer}")
    # files, not a table: nothing for the IO manager to store
    return MaterializeResult(metadata={
        "report": MetadataValue.md(written.markdown_ui),
        "html": MetadataValue.path(str(written.html_path)),
        "markdown": MetadataValue.path(str(written.markdown_path)),
        "plots": MetadataValue.json([str(p) for p in written.plot_paths]),
        "viewer": MetadataValue.path(str(viewer)),
        **_plan_meta(plan),
    })
