"""determinism_probe: re-send a seeded sample of stored test-generation requests and measure the noise.

The logic is in `evalmislead_assets.analysis.determinism`; extraction, collection and scoring are the
execution assets' own functions (`evalmislead_assets.execution.batch`).
"""

import time
from typing import Optional

import pandas as pd
from dagster import AssetExecutionContext, AssetIn, MetadataValue, Output, asset
from pydantic import Field

from evalmislead_assets.analysis.determinism import (
    DEFAULT_SEED,
    NOT_RUN_PREFIX,
    build_rows,
    by_partition,
    first_line,
    not_run_results,
    probe_requests,
    problems_for,
    sample,
    scored_tests,
    scoring_frame,
    summarize,
)
from evalmislead_assets.analysis.determinism_sensitivity import sensitivity
from evalmislead_assets.assets.model_scope import model_of
from evalmislead_assets.assets.problem_inputs import PROBLEMS_IN
from evalmislead_assets.assets.sandbox_config import ExecutionConfig, make_sandbox
from evalmislead_assets.dagster_metadata import GPU_HOST, INCOMPLETE_KEY
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.execution.batch import build_generated_tests, build_test_outcomes
from evalmislead_assets.llm.errors import batch_errors_line
from evalmislead_assets.llm.llama_server import ServerError
from evalmislead_assets.llm.types import LLMUnreachable
from evalmislead_assets.report.formatting import md_table
from evalmislead_assets.report.sections.determinism import sensitivity_lines, settings_line
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseResource

_GENERATION_COLUMNS = [
    "condition", "thinking", "task_id", "problem_idx", "request_json", "response_text", "reasoning_text",
    "finish_reason", "error", "cache_key", "total_slots", "cache_prompt", "build_info",
]


class ProbeConfig(ExecutionConfig):
    """Launchpad settings of the determinism probe: the sandbox's (workers, timeout_s) and the sample."""

    n: Optional[int] = Field(
        default=None, ge=1,
        description="Stored test-generation requests re-sent. Empty: EVALMISLEAD_PROBE_N, default 20.")
    seed: int = Field(default=DEFAULT_SEED, description="The seed of the sample of requests re-sent.")


def _metadata(df: pd.DataFrame, frames: dict[str, pd.DataFrame], wall_s: float, requests_sent: int) -> dict:
    s = summarize(df)
    sens = sensitivity(df, frames.get("bootstrap_comparisons", pd.DataFrame()), frames.get("test_outcomes"),
                       frames.get("test_generations"), frames.get("truncation_matched_subset"))
    return {
        "n": s.n,
        "requests_drawn": s.drawn,
        "errors": s.errors,
        "requests_sent": requests_sent,
        # None (shown as missing), never 0.0, when no answer came back
        "share_identical_text": round(s.share_identical, 4) if s.share_identical is not None else None,
        "share_identical_scoring": round(s.share_tests_identical, 4) if s.share_tests_identical is not None else None,
        "by_partition": MetadataValue.md(md_table(by_partition(df))),
        "sensitivity": MetadataValue.md("\n".join(sensitivity_lines(sens)) or "_no comparison stored_"),
        "server_settings": settings_line(df) if len(df) else "not run",
        "wall_s": round(wall_s, 2),
    }


@asset(
    group_name="reproducibility",
    tags=GPU_HOST,
    ins={"test_generations": AssetIn(metadata={"columns": _GENERATION_COLUMNS}), "problems": PROBLEMS_IN,
         # the stored comparisons, for how far each estimate moves (empty until analysed), with the stored
         # outcomes they were computed from and the thinking-on comparisons' problem set
         "bootstrap_comparisons": AssetIn(),
         "test_outcomes": AssetIn(metadata={"columns": ["condition", "thinking", "task_id", "outcome"]}),
         "truncation_matched_subset": AssetIn(metadata={"columns": ["task_id", "in_subset"]})},
    description="Run-to-run noise: a seeded sample of stored test-generation requests re-sent with the response "
                "cache bypassed (EVALMISLEAD_PROBE_N, default 20), scored like the originals; shares of byte-identical "
                "answers and of answers whose tests score identically.",
)
def determinism_probe(
    context: AssetExecutionContext, config: ProbeConfig, warehouse: WarehouseResource, llm: LLMResource,
    study_settings: StudySettingsResource, test_generations: pd.DataFrame, problems: pd.DataFrame,
    bootstrap_comparisons: pd.DataFrame, test_outcomes: pd.DataFrame, truncation_matched_subset: pd.DataFrame,
) -> Output[pd.DataFrame]:
    wh = warehouse.get()  # the probe's answers go to llm_calls as they arrive (never to llm_cache)
    start = time.monotonic()
    n = config.n if config.n is not None else study_settings.int_value("probe_n")
    drawn = sample(test_generations, n, config.seed)
    if drawn.empty:
        context.log.warning("determinism_probe: test_generations has no stored answer; nothing to re-send")
        df = build_rows(drawn, [], {}, config.seed)
        return Output(df, metadata={**_metadata(df, {}, time.monotonic() - start, 0),
                                           "status": "not run: no stored answer"})
    context.log.info(f"determinism_probe: re-sending {len(drawn)} stored requests (seed {config.seed}), cache bypassed")
    try:
        results, stats = llm.run_batch_with_stats(wh, probe_requests(drawn), log=context.log, bypass_cache=True,
                                                  model=model_of(context))
    except (LLMUnreachable, ServerError, ConfigError, OSError) as exc:
        # The probe is a side measurement: a server that cannot start, cannot be reached or refuses is stored as
        # the reason the probe did not run, and the study's tables and report are built all the same.
        reason = first_line(str(exc)) or type(exc).__name__
        context.log.warning(f"determinism_probe: did not run ({reason}); the study goes on without it")
        df = build_rows(drawn, not_run_results(drawn, f"{NOT_RUN_PREFIX}{reason}"), {}, config.seed)
        return Output(df, metadata={**_metadata(df, {}, time.monotonic() - start, 0),
                                    "status": f"not run: {reason}", INCOMPLETE_KEY: True})
    line = batch_errors_line("determinism_probe", [str(t) for t in drawn["task_id"]], [r.error for r in results])
    if line:
        # A failed request is not a re-generated answer: its row keeps probe_error and is left out of the identity
        # figures (analysis.determinism.summarize), which the report prints with "k requests failed". The probe
        # does not fail the run: on a loaded machine one live request can outlast its timeout, and the report
        # built from the stored answers must not be lost to it.
        context.log.warning(line.split("; the ")[0] + "; those requests are counted as failed, not compared "
                            "(re-materialize determinism_probe once the server answers)")

    frame = scoring_frame(drawn, results)
    by_key = problems_for(frame, drawn, problems.set_index("task_id"))
    sandbox = make_sandbox(config, study_settings)
    generated = build_generated_tests(frame, by_key, sandbox, study_settings.int_value("max_tests_per_answer"))
    outcomes = build_test_outcomes(generated, by_key, sandbox)
    df = build_rows(drawn, results, scored_tests(generated, outcomes), config.seed)
    stored = {"bootstrap_comparisons": bootstrap_comparisons, "test_outcomes": test_outcomes,
              "test_generations": test_generations, "truncation_matched_subset": truncation_matched_subset}
    meta = _metadata(df, stored, time.monotonic() - start, stats.requests_sent)
    s = summarize(df)
    context.log.info(f"determinism_probe: {s.identical}/{s.n} identical text, {s.tests_identical}/{s.n} identical "
                     f"scoring, {s.errors} errors")
    return Output(df, metadata=meta)  # asset determinism_probe = table analysis.determinism.TABLE
