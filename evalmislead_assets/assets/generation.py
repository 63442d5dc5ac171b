"""model_specs [thinking] and test_generations [condition x thinking]: the model's answers, with provenance."""

import warnings
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, Optional

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    Config,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    MultiToSingleDimensionPartitionMapping,
    asset,
)
from pydantic import Field

from evalmislead_assets import settings
from evalmislead_assets.assets.model_scope import model_of, model_sql
from evalmislead_assets.assets.problem_inputs import STUDY_PROBLEM_INS, study_problems
from evalmislead_assets.dagster_metadata import GPU_HOST
from evalmislead_assets.llm import prompts
from evalmislead_assets.llm.errors import batch_errors_line
from evalmislead_assets.llm.types import BatchStats, ChatRequest, ChatResult, LLMUnreachable
from evalmislead_assets.partitions import condition_thinking_partitions, split_key, thinking_partitions
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseResource
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.hashing import rows_sha256
from evalmislead_assets.store.text_repair import text_column  # answers may hold lone surrogates (escaped on write)
from evalmislead_assets.study.conditions import empty_spec_error
from evalmislead_assets.study.models import DEFAULT_THINKING_OFF, ModelSpec, StudyError
from evalmislead_assets.study.problems import problem_ranges

THINKING_CHECK = "thinking_mode_respected"
_THINKING_CHECK_DOC = (
    "The per-request thinking flag is not trusted: thinking=off answers must carry no reasoning, "
    "and at least one thinking=on answer must carry some."
)


class GenerationConfig(Config):
    """Launchpad settings for one partition's generation."""

    max_tokens: Optional[int] = Field(
        default=None, ge=1,
        description="Output cap per answer in tokens. Empty: the study file's cap for the model, else "
                    "EVALMISLEAD_MAX_TOKENS_OFF / EVALMISLEAD_MAX_TOKENS_ON (4,096 / 16,384).")
    grammar: Optional[str] = Field(
        default=None, description="A GBNF grammar sent to llama-server with every request (empty: none).")


def template_version(name: str) -> str:
    """The asset's code version: its prompt template's hash, so an edited template marks every partition made
    with the old one stale in the UI (once the code location is reloaded). What reads a partition goes stale
    when it is generated again with other answers (its data version, ``answers_version``)."""
    try:
        sha = prompts.load_template(name, settings.prompts_dir()).sha256[:12]
    except (OSError, UnicodeDecodeError):  # a missing template fails the run itself, with its own message
        sha = "unreadable"
    return f"generation-1+{name}-{sha}"


def _max_tokens(config: GenerationConfig, study: StudySettingsResource, thinking: str,
                model: Optional[ModelSpec] = None, asset: str = "") -> int:
    """The launchpad's cap, else the model's own for this asset (study.toml), else the study's for the thinking
    mode (the study_settings resource: EVALMISLEAD_MAX_TOKENS_OFF / _ON)."""
    return (config.max_tokens or (model.max_tokens(thinking, asset) if model else None)
            or study.max_tokens(thinking))


def _requests(
    asset_name: str, condition: Optional[str], thinking: str, problems: pd.DataFrame,
    rendered: list[prompts.Rendered], config: GenerationConfig, max_tokens: int,
) -> list[ChatRequest]:
    extra = {"grammar": config.grammar} if config.grammar else {}
    return [
        ChatRequest(
            asset=asset_name, condition=condition, thinking=thinking, task_id=task_id,
            messages=[{"role": "user", "content": r.text}], max_tokens=max_tokens,
            enable_thinking=thinking == "on", extra=dict(extra),
        )
        for task_id, r in zip(problems["task_id"], rendered)
    ]


def _rows(problems: pd.DataFrame, rendered: list[prompts.Rendered], results: list[ChatResult],
          thinking_off: Optional[str] = None) -> pd.DataFrame:
    """The answers' rows; ``thinking_off``: the mechanism of a thinking-off partition's requests (None: thinking on)."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    return pd.DataFrame({
        "task_id": problems["task_id"].tolist(),
        "problem_idx": problems["problem_idx"].astype("int32").tolist(),
        "model": [r.model for r in results],
        "template_sha256": [p.template_sha256 for p in rendered],
        "prompt_sha256": [p.prompt_sha256 for p in rendered],
        "request_json": [r.request_json for r in results],
        "response_text": text_column([None if r.error else r.text for r in results]),
        "reasoning_text": text_column([r.reasoning for r in results]),
        "reasoning_present": [bool(r.reasoning_present) for r in results],
        "finish_reason": [r.finish_reason for r in results],
        "prompt_tokens": pd.array([r.prompt_tokens for r in results], dtype="Int32"),
        "completion_tokens": pd.array([r.completion_tokens for r in results], dtype="Int32"),
        "latency_s": pd.array([r.latency_s for r in results], dtype="Float64"),
        "server_url": [r.server_url for r in results],
        "server_props_sha256": [r.server_props_sha256 for r in results],
        "cache_key": [r.cache_key for r in results],
        "error": [r.error for r in results],
        "created_at": [now] * len(results),
        # determinism-relevant server settings of each answer
        "total_slots": pd.array([r.total_slots for r in results], dtype="Int32"),
        "cache_prompt": pd.array([r.cache_prompt for r in results], dtype="boolean"),
        "build_info": [r.build_info for r in results],
        "thinking_off": [thinking_off] * len(results),
    })


def _stored_rows(context: AssetExecutionContext, wh: Warehouse, table: str, condition: Optional[str],
                 thinking: str, columns: Sequence[str]) -> Optional[pd.DataFrame]:
    """``columns`` of the rows this step's partition (and model, language) holds now; None on a fresh file."""
    where, params = model_sql(context)
    clause = "thinking = ?" + (" AND condition = ?" if condition else "")
    try:
        return wh.query_df(f"SELECT {', '.join(columns)} FROM {table} WHERE {clause} AND {where}",
                           [thinking, *([condition] if condition else []), *params])
    except Exception:  # a first run on a fresh file: nothing stored to keep
        return None


def slice_note(context: AssetExecutionContext, wh: Warehouse, table: str, condition: Optional[str], thinking: str,
               asked: list[int]) -> Optional[str]:
    """One line when this run's problems differ from what the partition holds: a run over a
    slice replaces only its own problems' answers, so the partition keeps the others and grows."""
    stored = _stored_rows(context, wh, table, condition, thinking, ["problem_idx"])
    if stored is None:
        return None
    held = {int(i) for i in stored["problem_idx"].dropna()}
    kept = held - set(asked)
    if not held or not kept:
        return None
    label = f"{table}[{condition + '|' if condition else ''}{thinking}]"
    return (f"{label}: this run asks {len(set(asked))} problems ({problem_ranges(asked)}); the partition keeps its "
            f"stored answers for {len(kept)} other problems ({problem_ranges(sorted(kept))}) and will hold "
            f"{len(held | set(asked))}")


# What a partition's answers are. The data version is their hash over the whole partition (the rows this run
# wrote and those a run over a slice keeps): a new template, output cap, model or answer changes it, so the UI
# marks what was built from the old answers stale; the same answers again (replayed from the cache) keep it,
# and nothing downstream goes stale. (The code version, the template's hash, marks the partitions themselves.)
VERSION_COLUMNS = ("task_id", "cache_key", "model", "template_sha256", "response_text", "reasoning_text",
                   "finish_reason", "error")


def answers_version(context: AssetExecutionContext, wh: Warehouse, table: str, condition: Optional[str],
                    thinking: str, df: pd.DataFrame) -> DataVersion:
    """The partition's data version once ``df`` is stored (see VERSION_COLUMNS)."""
    stored = _stored_rows(context, wh, table, condition, thinking, VERSION_COLUMNS)
    if stored is None:
        stored = pd.DataFrame(columns=list(VERSION_COLUMNS))
    kept = stored[~stored["task_id"].isin(set(df["task_id"].astype(str)))]
    return DataVersion(rows_sha256(pd.concat([kept, df], ignore_index=True), VERSION_COLUMNS))


def mechanism_clash(context: AssetExecutionContext, wh: Warehouse, table: str, condition: Optional[str],
                    thinking_off: str, asked: list[int]) -> Optional[str]:
    """One line when the model (in this language) holds thinking-off answers made with another mechanism than
    ``thinking_off`` that this run does not replace: its rates and comparisons would pool two mechanisms. A row
    from before the setting existed was made with "template"; rows without a request (an empty spec) count not."""
    where, params = model_sql(context)
    parts = [f"SELECT '{t}' AS asset, {'condition' if t == 'test_generations' else 'NULL'} AS condition, problem_idx, "
             f"coalesce(thinking_off, '{DEFAULT_THINKING_OFF}') AS mechanism FROM {t} "
             f"WHERE thinking = 'off' AND request_json IS NOT NULL AND {where}"
             for t in ("model_specs", "test_generations")]
    try:
        other = wh.query_df(
            f"SELECT asset, condition, mechanism, count(*) AS n FROM ({' UNION ALL '.join(parts)}) "
            "WHERE mechanism <> ? AND NOT (asset = ? AND coalesce(condition, '') = ? AND list_contains(?, problem_idx)) "
            "GROUP BY ALL ORDER BY n DESC, asset, condition",
            [*params, *params, thinking_off, table, condition or "", [int(i) for i in asked]])
    except Exception:  # a fresh file: nothing stored
        return None
    if other.empty:
        return None
    first = other.iloc[0]
    label = f"{first['asset']}[{first['condition'] + '|' if isinstance(first['condition'], str) else ''}off]"
    return (f"{model_of(context).name} sends thinking-off requests with thinking_off = \"{thinking_off}\" but holds "
            f"{int(other['n'].sum())} thinking-off answers made with \"{first['mechanism']}\" (first: {label}); "
            "results of two mechanisms are never pooled: give this setting its own model name in the study file, "
            "or set thinking_off back")


def _metadata(results: list[ChatResult], stats: BatchStats, template_sha: str, max_tokens: int,
              problems: pd.DataFrame | None = None) -> dict[str, Any]:
    answered = [r for r in results if not r.error]
    shown = {} if problems is None else {
        # a 4-problem partition must never look like a 164-problem one in the UI
        "problems": len(problems), "problem_set": problem_ranges([int(i) for i in problems["problem_idx"]])}
    return {**shown,
        "answers": len(answered),
        "truncations": sum(1 for r in answered if r.finish_reason == "length"),
        "errors": len(results) - len(answered),
        "with_reasoning": sum(1 for r in answered if r.reasoning_present),
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in answered),
        "completion_tokens": sum(r.completion_tokens or 0 for r in answered),
        "new_completion_tokens": stats.completion_tokens,
        "tokens_per_s": round(stats.tokens_per_s, 2),
        "wall_s": round(stats.wall_s, 2),
        "cache_hits": stats.cache_hits,
        "requests_sent": stats.requests_sent,
        "max_tokens": max_tokens,
        "template_sha256": template_sha,
        "error_samples": MetadataValue.json([r.error for r in results if r.error][:5]),
    }


_OFF_HOW = {"template": "enable_thinking=false", "prefill": "the assistant prefill",
            "budget0": "a reasoning budget of 0"}


def thinking_check(asset_key: AssetKey | str, thinking: str, results: list[ChatResult],
                   thinking_off: str = DEFAULT_THINKING_OFF) -> AssetCheckResult:
    """``thinking_off``: the mechanism the thinking-off requests used (named in a failure, with where to choose
    another)."""
    answered = [r for r in results if not r.error]
    with_reasoning = sum(1 for r in answered if r.reasoning_present)
    if thinking == "off":
        passed = with_reasoning == 0
        text = (f"{with_reasoning} of {len(answered)} thinking-off answers carry reasoning: "
                f"the server did not honour {_OFF_HOW.get(thinking_off, thinking_off)} (thinking_off = "
                f"\"{thinking_off}\"); docs/own-model.md says which mechanism suits the model's family")
    else:
        passed = with_reasoning > 0
        text = (f"{with_reasoning} of {len(answered)} thinking-on answers carry reasoning"
                + ("" if passed else ": the server or model ignored enable_thinking=true"))
    return AssetCheckResult(
        asset_key=asset_key, check_name=THINKING_CHECK, passed=passed, severity=AssetCheckSeverity.ERROR,
        description=text, metadata={"answers": len(answered), "with_reasoning": with_reasoning, "thinking": thinking},
    )


def _generate(
    context: AssetExecutionContext, wh: Warehouse, llm: LLMResource, asset_name: str, condition: Optional[str],
    thinking: str, problems: pd.DataFrame, rendered: list[prompts.Rendered], config: GenerationConfig,
    max_tokens: int,
) -> tuple[pd.DataFrame, list[ChatResult], BatchStats]:
    if problems.empty:
        raise Failure(f"{asset_name}: no validated problem in EVALMISLEAD_PROBLEMS; widen the subset")
    model = model_of(context)
    try:  # before any request: a model that declares it cannot think gets no thinking-on work (unless the
        # resource names its own server: another model answers then)
        if not llm.urls.strip():
            model.refuse_thinking(thinking, str(settings.study_path()))
    except StudyError as exc:
        raise Failure(description=str(exc)) from None
    requests = _requests(asset_name, condition, thinking, problems, rendered, config, max_tokens)
    asked = [int(i) for i in problems["problem_idx"]]
    clash = mechanism_clash(context, wh, asset_name, condition, model.thinking_off, asked) if thinking == "off" else None
    if clash:  # refused before anything is sent
        raise Failure(description=clash)
    note = slice_note(context, wh, asset_name, condition, thinking, asked)
    if note:  # said before anything is sent: the partition's problem set changes
        context.log.warning(note)
    context.log.info(
        f"{asset_name}[{condition or '-'}|{thinking}] of {model.name}: {len(requests)} problems, "
        f"max_tokens {requests[0].max_tokens}, "
        f"template {rendered[0].template_name} sha256 {rendered[0].template_sha256[:12]}"
    )
    try:
        results, stats = llm.run_batch_with_stats(wh, requests, log=context.log, model=model)
    except LLMUnreachable as exc:  # answers received so far are in llm_cache; the partition keeps its old rows
        raise Failure(description=str(exc)) from None
    _fail_on_errors(f"{asset_name}[{condition or '-'}|{thinking}]", requests, results)
    return _rows(problems, rendered, results, model.thinking_off if thinking == "off" else None), results, stats


def _fail_on_errors(label: str, requests: list[ChatRequest], results: list[ChatResult]) -> None:
    """A server error is not an answer with zero tests: the step fails and the partition keeps its old rows."""
    line = batch_errors_line(label, [r.task_id for r in requests], [r.error for r in results])
    if line:
        raise Failure(description=line, metadata={
            "errors": sum(1 for r in results if r.error),
            "error_samples": MetadataValue.json([r.error for r in results if r.error][:5]),
        })


@asset(
    partitions_def=thinking_partitions,
    ins=STUDY_PROBLEM_INS,
    metadata={"partition_expr": "thinking", "replace_by": "task_id"},
    code_version=template_version(prompts.SPEC_TEMPLATE),
    group_name="generation",
    tags=GPU_HOST,
    check_specs=[AssetCheckSpec(THINKING_CHECK, asset="model_specs", description=_THINKING_CHECK_DOC)],
    description="One docstring per problem, written by the model from the buggy code (prompts/spec.md).",
)
def model_specs(
    context: AssetExecutionContext, config: GenerationConfig, warehouse: WarehouseResource, llm: LLMResource,
    study_settings: StudySettingsResource, problems: pd.DataFrame, problem_validation: pd.DataFrame,
):  # -> MaterializeResult(value=DataFrame); no annotation: its checks make it multi-output
    thinking = str(context.partition_key)
    problems = study_problems(problems, problem_validation, study_settings.problem_subset())
    template = prompts.load_template(prompts.SPEC_TEMPLATE, settings.prompts_dir())
    rendered = [prompts.spec_prompt(p, template) for p in problems.to_dict("records")]
    return spec_partition(context, warehouse.get(), llm, config, study_settings, thinking, problems, rendered,
                          template.sha256, prompts.extract_spec)


def spec_partition(
    context: AssetExecutionContext, wh: Warehouse, llm: LLMResource, config: GenerationConfig,
    study: StudySettingsResource, thinking: str, problems: pd.DataFrame, rendered: list[prompts.Rendered], template_sha256: str,
    extract: Callable[[str], str],
) -> MaterializeResult:
    """One model_specs partition, whatever the language: the answers (to llm_cache / llm_calls one by one as
    they arrive), ``extract`` reading each spec from its answer, the metadata, the thinking check and the data
    version. The IO manager replaces the partition's rows in one transaction."""
    cap = _max_tokens(config, study, thinking, model_of(context), "model_specs")
    df, results, stats = _generate(context, wh, llm, "model_specs", None, thinking, problems, rendered, config, cap)
    df.insert(0, "thinking", thinking)
    df["spec_text"] = text_column([None if r.error else extract(r.text) for r in results])
    metadata = _metadata(results, stats, template_sha256, cap, df)
    metadata["empty_specs"] = int(sum(1 for s in df["spec_text"] if not s))
    if thinking == "off":  # the mechanism that switched thinking off (also each row's thinking_off)
        metadata["thinking_off"] = model_of(context).thinking_off
    return MaterializeResult(value=df, metadata=metadata,
                             check_results=[thinking_check(context.asset_key, thinking, results,
                                                           model_of(context).thinking_off)],
                             data_version=answers_version(context, wh, "model_specs", None, thinking, df))


def _specs_for(specs: pd.DataFrame, thinking: str, task_ids: list[str]) -> dict[str, str]:
    """``specs``: the model_specs rows of this thinking mode (the mapped input partition)."""
    specs = specs[specs["thinking"] == thinking]
    # a stored row with no text is an empty spec (see _without_empty_specs), not a missing one
    by_task = {t: s if isinstance(s, str) else "" for t, s in zip(specs["task_id"], specs["spec_text"])}
    missing = [t for t in task_ids if t not in by_task]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise Failure(
            f"model_specs partition '{thinking}' has no spec for {shown}; materialize model_specs "
            f"(partition {thinking}) for these problems first"
        )
    return by_task


def _without_empty_specs(
    specs: pd.DataFrame, thinking: str, problems: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(problems to prompt, test_generations rows for those whose model spec is empty).

    An empty spec would make model_spec a near signature-only prompt; instead no request is
    sent and the answer row carries the reason (it counts as an answer with zero tests).
    """
    specs = specs[specs["thinking"] == thinking]
    why = {t: empty_spec_error(s, e) for t, s, e in zip(specs["task_id"], specs["spec_text"], specs["error"])}
    empty = problems["task_id"].map(lambda t: why.get(t) is not None).astype(bool)
    skipped = problems[empty]
    rows = pd.DataFrame({
        "task_id": skipped["task_id"].tolist(), "problem_idx": skipped["problem_idx"].astype("int32").tolist(),
        "error": [why[t] for t in skipped["task_id"]],
        "created_at": [datetime.now(timezone.utc).replace(tzinfo=None)] * len(skipped),
    })
    return problems[~empty].reset_index(drop=True), rows


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the mapping class is marked beta; it is what Dagster infers anyway
    SPECS_OF_SAME_THINKING = MultiToSingleDimensionPartitionMapping(partition_dimension_name="thinking")


@asset(
    partitions_def=condition_thinking_partitions,
    ins={
        **STUDY_PROBLEM_INS,
        # the specs of the same thinking mode; only the model_spec condition uses them
        "model_specs": AssetIn(partition_mapping=SPECS_OF_SAME_THINKING,
                               metadata={"columns": ["thinking", "task_id", "spec_text", "error"]}),
    },
    metadata={"replace_by": "task_id"},  # a run over a slice of problems keeps the partition's other answers
    code_version=template_version(prompts.TEST_TEMPLATE),
    group_name="generation",
    tags=GPU_HOST,
    check_specs=[AssetCheckSpec(THINKING_CHECK, asset="test_generations", description=_THINKING_CHECK_DOC)],
    description="The model's answer to the test-generation prompt (prompts/test_generation.md), one per problem.",
)
def test_generations(
    context: AssetExecutionContext, config: GenerationConfig, warehouse: WarehouseResource, llm: LLMResource,
    study_settings: StudySettingsResource, problems: pd.DataFrame, problem_validation: pd.DataFrame,
    model_specs: pd.DataFrame,
):  # -> MaterializeResult(value=DataFrame); no annotation: its checks make it multi-output
    condition, thinking = split_key(context.partition_key)
    template = prompts.load_template(prompts.TEST_TEMPLATE, settings.prompts_dir())
    return generation_partition(
        context, warehouse.get(), llm, config, study_settings, condition, thinking,
        study_problems(problems, problem_validation, study_settings.problem_subset()), model_specs, template.sha256,
        lambda chosen, specs: [prompts.generation_prompt(p, condition, specs.get(p["task_id"]), template)
                               for p in chosen.to_dict("records")])


def generation_partition(
    context: AssetExecutionContext, wh: Warehouse, llm: LLMResource, config: GenerationConfig,
    study: StudySettingsResource, condition: str, thinking: str, problems: pd.DataFrame, model_specs: pd.DataFrame,
    template_sha256: str,
    render: Callable[[pd.DataFrame, dict[str, str]], list[prompts.Rendered]],
) -> MaterializeResult:
    """One test_generations partition, whatever the language: its rows, metadata, thinking check and data
    version. ``render(problems, specs)`` gives the prompts of the problems to ask; under model_spec a problem
    whose spec is empty is not asked and gets its error row instead. The IO manager replaces the partition's
    rows in one transaction."""
    specs: dict[str, str] = {}
    skipped = pd.DataFrame(columns=["task_id", "problem_idx", "error", "created_at"])
    if condition == "model_spec":
        specs = _specs_for(model_specs, thinking, problems["task_id"].tolist())
        problems, skipped = _without_empty_specs(model_specs, thinking, problems)
    rendered = render(problems, specs)
    cap = _max_tokens(config, study, thinking, model_of(context), "test_generations")
    if len(problems) or skipped.empty:  # (no problem at all: _generate fails with its message)
        df, results, stats = _generate(context, wh, llm, "test_generations", condition, thinking, problems, rendered,
                                       config, cap)
    else:  # every spec is empty: nothing to send
        df, results, stats = skipped.iloc[0:0], [], BatchStats()
    if len(skipped):
        df = pd.concat([df, skipped], ignore_index=True).sort_values("problem_idx", kind="stable")
    df.insert(0, "thinking", thinking)
    df.insert(0, "condition", condition)
    metadata = _metadata(results, stats, template_sha256, cap, df)
    metadata["empty_model_specs"] = len(skipped)
    if thinking == "off":
        metadata["thinking_off"] = model_of(context).thinking_off
    return MaterializeResult(value=df, metadata=metadata,
                             check_results=[thinking_check(context.asset_key, thinking, results,
                                                           model_of(context).thinking_off)],
                             data_version=answers_version(context, wh, "test_generations", condition, thinking, df))
