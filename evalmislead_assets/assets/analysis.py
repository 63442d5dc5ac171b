"""Analysis assets: rates, bootstrap comparisons, matched subset, spec labels, reasoning mentions, report.

Each is unpartitioned and reads every partition of its upstream tables that is stored, so
it works on a partial run (e.g. thinking off only) and names what is missing in its
metadata. The plan's sha256 is part of every asset's code version: editing
prompts/analysis_plan.json marks them all stale in the UI.
"""

import hashlib
import time

import pandas as pd
from dagster import AssetExecutionContext, AssetIn, Failure, MaterializeResult, MetadataValue, Output, asset

from evalmislead_assets.analysis import rates as an
from evalmislead_assets import settings
from evalmislead_assets.report import build as rp
from evalmislead_assets.analysis import spec_labels as sl
from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES
from evalmislead_assets.llm.errors import batch_errors_line
from evalmislead_assets.assets.model_scope import model_path, model_where
from evalmislead_assets.resources import LLMResource, WarehouseResource
from evalmislead_assets.store.schema import MODEL_COLUMN

GROUP = "analysis"
# The three upstream tables every analysis reads, all partitions (the assets are unpartitioned),
# projected to the columns the analysis needs.
OUTCOME_COLUMNS = ["condition", "thinking", "task_id", "problem_idx", "test_id", "outcome"]
UPSTREAM = {
    "test_outcomes": AssetIn(metadata={"columns": OUTCOME_COLUMNS}),
    "test_generations": AssetIn(metadata={
        "columns": ["condition", "thinking", "task_id", "problem_idx", "finish_reason", "error"]}),
    "generated_tests": AssetIn(metadata={"columns": [
        "condition", "thinking", "task_id", "problem_idx", "n_tests", "import_ok", "error",
        "source IS NOT NULL AS has_code"]}),
}
CODE_VERSION = "analysis-2"  # issue 10: zero-test rules, matched thinking-on comparisons, new columns


def plan_code_version(*files: str) -> str:
    """Code version + plan hash (+ hashes of the prompt files an asset reads): a change marks it stale."""
    try:
        plan = an.load_plan()
        parts = [f"plan-{plan.sha256[:12]}"]
        for name in files:
            parts.append(f"{name.split('.')[0]}-{hashlib.sha256((plan.path.parent / name).read_bytes()).hexdigest()[:12]}")
    except Exception:  # an unreadable plan or prompt fails the run itself, with its own error
        parts = ["plan-unreadable"]
    return "+".join([CODE_VERSION, *parts])


_VERSION = plan_code_version()


def _coverage(*frames: pd.DataFrame) -> dict[str, MetadataValue]:
    present = an.cells_present(*frames)
    keys = {f"{c}|{t}" for c, t in present}
    missing = [f"{c}|{t}" for t in THINKING_MODES for c in CONDITION_NAMES if f"{c}|{t}" not in keys]
    return {
        "partitions_present": MetadataValue.json(sorted(keys)),
        "partitions_missing": MetadataValue.json(missing),
        "thinking_modes_present": MetadataValue.json(sorted({t for _, t in present})),
    }


def _plan_meta(plan: an.Plan) -> dict[str, object]:
    return {"plan_version": plan.version, "plan_sha256": plan.sha256, "plan_file": MetadataValue.path(str(plan.path))}


def _md(df: pd.DataFrame) -> MetadataValue:
    return MetadataValue.md(rp.md_table(df))


@asset(group_name=GROUP, ins=UPSTREAM, code_version=_VERSION,
       description="Per condition x thinking: cell counts, pooled rates with intervals, truncation and import counts.")
def condition_rates(
    context: AssetExecutionContext, test_outcomes: pd.DataFrame, test_generations: pd.DataFrame,
    generated_tests: pd.DataFrame,
) -> Output[pd.DataFrame]:
    plan = an.load_plan()
    outcomes, gens, gt = test_outcomes, test_generations, generated_tests
    t0 = time.perf_counter()
    df = an.condition_rates(outcomes, gens, gt, plan)
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
    plan = an.load_plan()
    outcomes, gens, gt = test_outcomes, test_generations, generated_tests
    t0 = time.perf_counter()
    df, notes = an.bootstrap_comparisons(outcomes, gens, gt, plan)
    wall = time.perf_counter() - t0
    for n in notes:
        context.log.warning(n)
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
    plan = an.load_plan()
    outcomes, gens, gt = test_outcomes, test_generations, generated_tests
    df = an.truncation_matched_subset(outcomes, gens, gt, plan)
    n_in = int(df["in_subset"].sum()) if len(df) else 0
    cov = _coverage(outcomes, gens, gt)
    modes = set(cov["thinking_modes_present"].value)
    note = "" if {"off", "on"} <= modes else f"only thinking {sorted(modes)} stored: the subset is empty until both modes are"
    if note:
        context.log.warning(note)
    return Output(df, metadata={
        "problems_considered": len(df), "in_subset": n_in, "note": note, **_plan_meta(plan), **cov,
    })


@asset(group_name=GROUP, ins={"truncation_matched_subset": AssetIn(), "test_outcomes": UPSTREAM["test_outcomes"]},
       code_version=_VERSION,
       description="Thinking on minus off on the truncation-matched subset (same bootstrap; report-only).")
def thinking_comparisons(
    context: AssetExecutionContext, truncation_matched_subset: pd.DataFrame, test_outcomes: pd.DataFrame
) -> Output[pd.DataFrame]:
    plan = an.load_plan()
    df = an.thinking_comparisons(test_outcomes, truncation_matched_subset, plan)
    n = int(df["n_problems"].max()) if len(df) else 0
    return Output(df, metadata={
        "rows": len(df), "subset_problems": n, **_plan_meta(plan),
        "comparisons": _md(df[["condition", "metric", "rate_off", "rate_on", "estimate", "ci_low", "ci_high",
                               "n_problems"]].round(4)),
    })


@asset(group_name=GROUP, code_version=plan_code_version("spec_judge.md"),
       ins={"model_specs": AssetIn(metadata={"columns": ["thinking", "task_id", "problem_idx", "spec_text", "error"],
                                             "order_by": "thinking, problem_idx"}),
            "problems": AssetIn(metadata={"columns": ["task_id", "problem_idx", "entry_point", "buggy_code",
                                                      "fixed_code"]}),
            **UPSTREAM},
       description="Two labels per model-written spec by a judge model (prompts/spec_judge.md), human review "
                   "CSV exported/imported (human labels win), agreement, and misleading rate split by label.")
def spec_labels(
    context: AssetExecutionContext, warehouse: WarehouseResource, judge_llm: LLMResource,
    model_specs: pd.DataFrame, problems: pd.DataFrame, test_outcomes: pd.DataFrame,
    test_generations: pd.DataFrame, generated_tests: pd.DataFrame,
) -> Output[pd.DataFrame]:
    plan = an.load_plan()
    wh = warehouse.get()  # the judge's answers (llm_cache) and the two side tables
    sec = plan.section("spec_labels")
    specs = model_specs
    judged = sl.judge_specs(specs, problems, judge_llm, wh, log=context.log)
    call_errors = [e if str(e or "").startswith(sl.JUDGE_CALL_FAILED) else None for e in judged["judge_error"]]
    line = batch_errors_line("spec_labels (judge)", [str(t) for t in judged["task_id"]], call_errors)
    if line:  # a failing judge server is not a label: the step fails, good answers stay cached
        raise Failure(description=line, metadata={"errors": sum(e is not None for e in call_errors)})
    path = model_path(context, settings.review_csv_path())
    added = sl.write_review_csv(
        path, sl.review_sample(specs, int(sec.get("review_sample_size", 20)), int(sec.get("review_seed", plan.seed))),
        problems)
    human = sl.read_review_csv(path) if path.exists() else None
    labels, notes = sl.combine(judged, human)
    labels.insert(0, "plan_sha256", plan.sha256)
    agree = sl.agreement(labels)
    agree.insert(0, "plan_sha256", plan.sha256)
    splits = an.spec_label_splits(test_outcomes, test_generations, generated_tests, labels, plan)
    # side tables through the warehouse (this model's rows only); spec_labels itself through the IO manager
    mine = model_where(context)
    wh.replace_rows("spec_label_agreement", agree.assign(**mine), where=mine)
    wh.replace_rows("spec_label_splits", splits.assign(**mine), where=mine)
    for n in notes:
        context.log.warning(n)
    cats = sl.category_counts(labels)
    return Output(labels, metadata={
        "specs": len(labels), "judge_unparsed_or_failed": int(labels["judge_error"].notna().sum()),
        "review_csv": MetadataValue.path(str(path)), "review_rows_added": added,
        "human_labels_imported": sl.human_labels_given(human), "notes": MetadataValue.json(notes),
        "categories": _md(cats), "agreement": _md(agree.drop(columns="plan_sha256").round(3)),
        "splits": _md(splits.drop(columns="plan_sha256").round(4)), **_plan_meta(plan),
    })


@asset(group_name=GROUP, code_version=plan_code_version("reasoning_keywords.txt"),
       ins={"test_generations": AssetIn(metadata={"columns": [
           "condition", "thinking", "task_id", "problem_idx", "reasoning_text", "response_text"]}),
           "test_outcomes": UPSTREAM["test_outcomes"]},
       description="Thinking-on buggy_code answers whose reasoning mentions the bug (prompts/reasoning_keywords.txt).")
def reasoning_mentions(
    context: AssetExecutionContext, warehouse: WarehouseResource, test_generations: pd.DataFrame,
    test_outcomes: pd.DataFrame,
) -> Output[pd.DataFrame]:
    plan = an.load_plan()
    wh = warehouse.get()  # the two side tables
    sec = plan.section("reasoning_mentions")
    cond, thinking = sec.get("condition", "buggy_code"), sec.get("thinking", "on")
    keywords = an.load_keywords(an.keywords_path(plan))

    def _cell(df: pd.DataFrame) -> pd.DataFrame:  # the plan's condition|thinking (all partitions are loaded)
        return df[(df["condition"] == cond) & (df["thinking"] == thinking)].reset_index(drop=True)

    gens, outcomes = _cell(test_generations), _cell(test_outcomes)
    answers, matches, summary = an.reasoning_mentions(gens, outcomes, keywords, plan)
    # side tables through the warehouse (this model's rows only); reasoning_mentions itself through the IO manager
    mine = model_where(context)
    wh.replace_rows("reasoning_mention_matches", matches.assign(**mine), where=mine)
    wh.replace_rows("reasoning_mention_summary", summary.assign(**mine), where=mine)
    note = "" if len(gens) else f"no {cond}|{thinking} answers stored: materialize that partition to fill this table"
    if note:
        context.log.warning(note)
    return Output(answers, metadata={
        "answers": len(answers), "with_reasoning": int(answers["has_reasoning"].sum()) if len(answers) else 0,
        "mentioning": int(answers["mentions"].sum()) if len(answers) else 0, "matches": len(matches),
        "keywords_sha256": keywords.sha256, "note": note,
        "summary": _md(summary.drop(columns=["plan_sha256", "keywords_sha256"]).round(4)), **_plan_meta(plan),
    })


# Tables the report reads that are side outputs of multi-table assets (not asset outputs themselves):
# read through the warehouse, read-only, after their assets (the inputs above) have run.
REPORT_SIDE_TABLES = ["spec_label_agreement", "spec_label_splits", "reasoning_mention_summary"]
_REPORT_INS = {
    **{name: AssetIn() for name in (
        "condition_rates", "bootstrap_comparisons", "truncation_matched_subset", "thinking_comparisons",
        "spec_labels", "reasoning_mentions", "determinism_probe", "mutants", "mutation_scores", "test_coverage",
        "test_outcomes", "problem_validation")},
    "generated_tests": AssetIn(metadata={"columns": ["condition", "thinking", "task_id", "source", "extraction"]}),
    "test_generations": AssetIn(metadata={"columns": ["condition", "thinking", "task_id", "error"]}),
    "problems": AssetIn(metadata={"columns": ["task_id", "entry_point", "buggy_code", "fixed_code", "bug_type"]}),
    "model_specs": AssetIn(metadata={"columns": ["thinking", "task_id", "spec_text"]}),
}


@asset(group_name=GROUP, code_version=_VERSION, ins=_REPORT_INS,
       description="The study report (Markdown, HTML, PNG plots) with every table of the published write-up.")
def study_report(context: AssetExecutionContext, warehouse: WarehouseResource, **inputs: pd.DataFrame) -> MaterializeResult:
    plan = an.load_plan()
    wh = warehouse.get()
    frames = dict(inputs)
    mine = model_where(context)
    frames.update({t: wh.read_table(t, where=mine, read_only=True).drop(columns=MODEL_COLUMN)
                   for t in REPORT_SIDE_TABLES})
    data = rp.load_data(frames)
    written = rp.write(rp.build(data, plan), model_path(context, settings.report_dir()))
    context.log.info(f"study report written to {written.html_path}")
    # files, not a table: nothing for the IO manager to store
    return MaterializeResult(metadata={
        "report": MetadataValue.md(written.markdown_ui),
        "html": MetadataValue.path(str(written.html_path)),
        "markdown": MetadataValue.path(str(written.markdown_path)),
        "plots": MetadataValue.json([str(p) for p in written.plot_paths]),
        **_plan_meta(plan),
    })
