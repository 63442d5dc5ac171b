"""Every DuckDB table, declared once: name, one-line description, columns (name, type, description).

One table per asset (same name), plus the LLM call log and cache. The registry is static: no
module adds tables at import time; modules that need a table's column names read them from
here (``column_names``). New columns may be appended; existing ones are never renamed, so old
DuckDB files keep working (database.ensure_schema adds missing columns; ``migrate`` converts
columns whose type changed).

Plain data only (no Dagster): ``dagster_metadata.table_schema`` turns ``column_schema`` into a
Dagster ``TableSchema``. The documentation's schema reference (docs/reference/schema.md) is generated from
this registry, whole, and a test checks that the committed page is the generated one:

    python -m evalmislead_assets.store.schema --markdown          # print the page
    python -m evalmislead_assets.store.schema --write-docs        # rewrite docs/reference/schema.md
    python -m evalmislead_assets.store.schema --migrate DB        # convert an old DuckDB file in place
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOCS_PAGE = Path("docs") / "reference" / "schema.md"  # relative to the project root


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # DuckDB type, possibly with a constraint ("VARCHAR PRIMARY KEY")
    description: str = ""


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    columns: tuple[Column, ...]


def _table(name: str, description: str, *columns: tuple[str, str] | tuple[str, str, str]) -> Table:
    return Table(name, description, tuple(Column(*c) for c in columns))


# Columns several tables share (same meaning everywhere).
_CONDITION = ("condition", "VARCHAR", "prompt condition, e.g. buggy_code")
_THINKING = ("thinking", "VARCHAR", "off | on")
_TASK = ("task_id", "VARCHAR", "HumanEvalPack id, e.g. Python/30")
_IDX = ("problem_idx", "INTEGER", "position in the dataset, 0-163")
_PLAN = ("plan_sha256", "VARCHAR", "sha256 of the analysis plan the row was computed under")
_LEVEL = ("level", "DOUBLE", "interval level, 0.9875 in the plan")
_N_BOOT = ("n_boot", "INTEGER", "bootstrap resamples")
_SEED = ("seed", "BIGINT", "bootstrap seed")
_MC_SE_LOW = ("ci_low_mc_se", "DOUBLE", "Monte Carlo standard error of ci_low (batches of the bootstrap replicates)")
_MC_SE_HIGH = ("ci_high_mc_se", "DOUBLE", "Monte Carlo standard error of ci_high (batches of the bootstrap replicates)")
_KEYWORDS = ("keywords_sha256", "VARCHAR", "sha256 of prompts/reasoning_keywords.txt")
# described once above the reference's table, shown bare in its rows
_SHARED = (_CONDITION, _THINKING, _TASK, _IDX, _PLAN, _LEVEL, _N_BOOT, _SEED, _KEYWORDS)
_ANSWER = (  # the answer columns shared by model_specs and test_generations
    ("model", "VARCHAR", "model name reported by the server"),
    ("template_sha256", "VARCHAR", "sha256 of the prompt template file"),
    ("prompt_sha256", "VARCHAR", "sha256 of the rendered prompt"),
    ("request_json", "VARCHAR", "the exact request body sent"),
    ("response_text", "VARCHAR", "the answer's content"),
)
_ANSWER_META = (
    ("reasoning_text", "VARCHAR", "the reasoning: reasoning_content, or a think block in the answer"),
    ("reasoning_present", "BOOLEAN", "the answer carried reasoning"),
    ("finish_reason", "VARCHAR", "stop, or length: cut at the token cap"),
    ("prompt_tokens", "INTEGER"), ("completion_tokens", "INTEGER"), ("latency_s", "DOUBLE"),
    ("server_url", "VARCHAR"), ("server_props_sha256", "VARCHAR", "sha256 of the server's /props, kept in server_props"),
    ("cache_key", "VARCHAR", "llm_cache key of the answer"), ("error", "VARCHAR", "server error, else NULL"),
    ("created_at", "TIMESTAMP"),
    # server settings that affect determinism, per answer
    ("total_slots", "INTEGER", "the server's parallel slots, from /props"),
    ("cache_prompt", "BOOLEAN", "the request's prompt-cache flag"),
    ("build_info", "VARCHAR", "the server's build, from /props"),
)

_SPECS: tuple[Table, ...] = (
    # ---------------------------------------------------------------- problems
    _table(
        "problems", "one row per HumanEvalPack Python problem, with the buggy and fixed function",
        _TASK, _IDX, ("entry_point", "VARCHAR", "name of the function under test"), ("declaration", "VARCHAR"),
        ("signature", "VARCHAR"), ("docstring", "VARCHAR"), ("prompt", "VARCHAR"), ("canonical_solution", "VARCHAR"),
        ("buggy_solution", "VARCHAR"), ("bug_type", "VARCHAR"), ("failure_symptoms", "VARCHAR"),
        ("test", "VARCHAR", "the dataset's oracle"), ("example_test", "VARCHAR"),
        ("buggy_code", "VARCHAR", "complete buggy module"), ("fixed_code", "VARCHAR", "complete fixed module"),
        ("source_sha256", "VARCHAR", "sha256 of the shipped dataset file"),
    ),
    _table(
        "problem_validation", "the dataset oracle run against each version; `valid` problems enter the study",
        _TASK, _IDX, ("buggy_passed", "BOOLEAN", "the oracle passed on the buggy version; expected false"),
        ("fixed_passed", "BOOLEAN", "the oracle passed on the fixed version; expected true"),
        ("buggy_detail", "VARCHAR"), ("fixed_detail", "VARCHAR"), ("seconds", "DOUBLE"),
        ("valid", "BOOLEAN", "buggy fails and fixed passes"),
    ),
    # ---------------------------------------------------------------- the LLM
    _table(
        "llm_calls", "every HTTP request actually sent (a cache hit adds no row)",
        ("call_id", "VARCHAR"), ("ts", "TIMESTAMP"), ("asset", "VARCHAR", "asset that sent it"), _CONDITION,
        _THINKING, _TASK, ("server_url", "VARCHAR"), ("cache_key", "VARCHAR"), ("status_code", "INTEGER"),
        ("latency_s", "DOUBLE"), ("prompt_tokens", "INTEGER"), ("completion_tokens", "INTEGER"),
        ("error", "VARCHAR"),
        # the row is written before the request is sent and completed after
        ("state", "VARCHAR", "sent (written before sending; still so: the process was killed), answered, error, "
                             "abandoned (an interrupt stopped the wait)"),
        ("finished_at", "TIMESTAMP", "when the request ended; NULL: never completed"),
    ),
    _table(
        "llm_cache", "successful answers keyed by the sha256 of the full request body",
        ("cache_key", "VARCHAR PRIMARY KEY", "sha256 of request_json"), ("request_json", "VARCHAR"),
        ("response_json", "VARCHAR"), ("server_url", "VARCHAR"), ("server_props_sha256", "VARCHAR"),
        ("latency_s", "DOUBLE"), ("created_at", "TIMESTAMP"),
    ),
    _table(
        "server_props", "each distinct /props document a server returned",
        ("server_props_sha256", "VARCHAR PRIMARY KEY"), ("server_url", "VARCHAR"), ("model", "VARCHAR"),
        ("props_json", "VARCHAR"), ("first_seen", "TIMESTAMP"),
    ),
    # ---------------------------------------------------------------- generation
    _table(
        "model_specs", "the model-written spec per problem, input of the model_spec condition [thinking]",
        _THINKING, _TASK, _IDX, *_ANSWER, ("spec_text", "VARCHAR", "the spec after extraction; empty: not sent on"),
        *_ANSWER_META,
    ),
    _table(
        "test_generations", "one answer per problem: the model asked to write tests [condition × thinking]",
        _CONDITION, _THINKING, _TASK, _IDX, *_ANSWER, *_ANSWER_META,
    ),
    _table(
        "determinism_probe", "stored test-generation requests re-sent with the cache bypassed: did the answer move?",
        _CONDITION, _THINKING, _TASK, _IDX, ("cache_key", "VARCHAR", "the original answer's llm_cache key"),
        ("original_text", "VARCHAR"), ("probe_text", "VARCHAR"), ("identical", "BOOLEAN", "byte-identical answers"),
        ("reasoning_identical", "BOOLEAN"),
        ("original_n_tests", "INTEGER"), ("original_misleading", "INTEGER"), ("original_effective", "INTEGER"),
        ("original_both_pass", "INTEGER"), ("original_both_fail", "INTEGER"),
        ("probe_n_tests", "INTEGER"), ("probe_misleading", "INTEGER"), ("probe_effective", "INTEGER"),
        ("probe_both_pass", "INTEGER"), ("probe_both_fail", "INTEGER"),
        ("tests_identical", "BOOLEAN", "same test ids with the same cell each"),
        ("probe_error", "VARCHAR"), ("probe_finish_reason", "VARCHAR"),
        ("original_total_slots", "INTEGER"), ("original_cache_prompt", "BOOLEAN"), ("original_build_info", "VARCHAR"),
        ("probe_total_slots", "INTEGER"), ("probe_cache_prompt", "BOOLEAN"), ("probe_build_info", "VARCHAR"),
        ("probe_server_url", "VARCHAR"), ("sample_seed", "BIGINT"), ("created_at", "TIMESTAMP"),
    ),
    # ---------------------------------------------------------------- execution
    _table(
        "generated_tests", "the test module extracted from each answer and the test ids pytest collected",
        _CONDITION, _THINKING, _TASK, _IDX, ("source", "VARCHAR", "extracted module; NULL: no code in the answer"),
        ("extraction", "VARCHAR", "extraction steps, e.g. fence:markdown>python;import:main->solution"),
        ("import_ok", "BOOLEAN", "imported and collected against both versions"),
        ("n_tests", "INTEGER", "collected tests"),
        ("test_ids", "VARCHAR[]", "collected pytest node ids, in file order"),
        ("error", "VARCHAR", "why no tests were collected"), ("finish_reason", "VARCHAR"),
        ("one_version_ids", "VARCHAR[]", "ids collected against one version only: not scored, not in n_tests"),
        ("n_tests_over_cap", "INTEGER", "collected tests past the per-answer cap: not scored, not in n_tests"),
        ("max_tests", "INTEGER", "the per-answer test cap in force"),
        # the verified subset
        ("verified", "BOOLEAN", "the file is inside the verified subset (sandbox/verified_subset.py); NULL: "
                                "scored before the check existed"),
        ("unverified_reason", "VARCHAR", "the first construct outside the subset, e.g. 'imports os'"),
    ),
    _table(
        "test_outcomes", "each collected test run against both versions, with its cell",
        _CONDITION, _THINKING, _TASK, _IDX, ("test_id", "VARCHAR"),
        ("buggy_status", "VARCHAR", ("passed | failed | error | timeout | crashed | tampered | limit:output | "
                                     "limit:memory | limit:fsize | limit:nproc | limit:disk")),
        ("fixed_status", "VARCHAR", "as buggy_status"),
        ("outcome", "VARCHAR", ("misleading | effective | both_pass | both_fail | limit (a runner cap on either "
                                "version: never misleading or effective)")),
        ("buggy_detail", "VARCHAR"), ("fixed_detail", "VARCHAR"), ("seconds", "DOUBLE"),
    ),
    _table(
        "test_coverage", "coverage of the entry point's body by each test file, per version",
        _CONDITION, _THINKING, _TASK, _IDX, ("version", "VARCHAR", "buggy | fixed"), ("n_statements", "INTEGER"),
        ("n_statements_run", "INTEGER"), ("line_coverage", "DOUBLE"), ("n_branches", "INTEGER"),
        ("n_branches_taken", "INTEGER"), ("branch_coverage", "DOUBLE", "NULL: no branch"), ("n_tests", "INTEGER"),
        ("n_tests_measured", "INTEGER", "tests that reported coverage"),
    ),
    # ---------------------------------------------------------------- analysis
    _table(
        "condition_rates", "per condition × thinking: cell counts, rates with intervals, answer counts",
        _PLAN, _CONDITION, _THINKING, ("n_problems", "INTEGER"),
        ("n_answers", "INTEGER", "server errors and empty-spec rows included"), ("n_errors", "INTEGER"),
        ("n_tests", "INTEGER"), ("n_misleading", "INTEGER"), ("n_effective", "INTEGER"), ("n_both_pass", "INTEGER"),
        ("n_both_fail", "INTEGER"), ("misleading_rate", "DOUBLE", "NaN over zero tests"),
        ("effective_rate", "DOUBLE", "NaN over zero tests"), ("problems_with_effective", "INTEGER"),
        ("problems_with_misleading", "INTEGER"), ("n_zero_tests", "INTEGER"), ("n_truncated", "INTEGER"),
        ("n_truncated_no_tests", "INTEGER"), ("n_unimportable", "INTEGER"), ("n_tests_collected", "INTEGER"),
        ("misleading_ci_low", "DOUBLE"), ("misleading_ci_high", "DOUBLE"), ("effective_ci_low", "DOUBLE"),
        ("effective_ci_high", "DOUBLE"), _LEVEL, _N_BOOT, _SEED,
        # zero-test rules: one-version files, empty specs
        ("n_collect_one_version", "INTEGER", "files that collected against one version only"),
        ("n_empty_spec", "INTEGER", "answers not sent for an empty model spec"),
        # the sensitivity line, over the tests of verified files only (report-only)
        ("n_tests_verified", "INTEGER", "tests whose file is in the verified subset; NULL: not checked"),
        ("misleading_rate_verified", "DOUBLE", "misleading / n_tests_verified; NaN over zero"),
        ("effective_rate_verified", "DOUBLE", "effective / n_tests_verified; NaN over zero"),
        # what made the cell's answers; a mixed cell's rates are not estimable
        ("template_sha256", "VARCHAR", "the test-generation template of every answered row; NULL: mixed or unknown"),
        ("reported_model", "VARCHAR", "the model every answered row names; NULL: mixed or unknown"),
        ("max_tokens", "INTEGER", "the output cap of every answered request; NULL: mixed or unknown"),
        ("provenance_note", "VARCHAR", "why the rates are not estimable: the rows mix prompt versions, models or caps"),
        ("n_limit", "INTEGER", ("tests that ended on a runner cap on either version (outcome limit; in "
                                "n_tests, in no cell)")),
    ),
    _table(
        "bootstrap_comparisons", "the primary comparisons per thinking mode: paired bootstrap estimate and verdict",
        _PLAN, ("comparison_id", "INTEGER"), _THINKING, ("role", "VARCHAR", "primary | report-only"),
        ("metric", "VARCHAR", "misleading_rate | effective_rate"), ("condition_a", "VARCHAR"),
        ("condition_b", "VARCHAR"), ("rate_a", "DOUBLE"), ("rate_b", "DOUBLE"), ("estimate", "DOUBLE", "rate_a - rate_b"),
        ("ci_low", "DOUBLE"),
        ("ci_high", "DOUBLE"), _LEVEL, _N_BOOT, _SEED, ("n_problems", "INTEGER"), ("n_tests_a", "INTEGER"),
        ("n_tests_b", "INTEGER"), ("n_zero_denominator", "INTEGER", "resamples where a side drew no test"),
        ("excludes_zero", "BOOLEAN"), ("verdict", "VARCHAR"),
        ("subset", "VARCHAR", "all | truncation_matched"),
        _MC_SE_LOW, _MC_SE_HIGH,
        ("n_problems_with_tests_a", "INTEGER", "of the n_problems paired, those where condition_a has a test"),
        ("n_problems_with_tests_b", "INTEGER", "of the n_problems paired, those where condition_b has a test"),
        ("n_problems_with_tests_both", "INTEGER", "of the n_problems paired, those where both sides have a test"),
    ),
    _table(
        "truncation_matched_subset", "problems with a test in buggy_code and fixed_code in both thinking modes",
        _PLAN, _TASK, _IDX, ("n_tests_buggy_off", "INTEGER"), ("n_tests_fixed_off", "INTEGER"),
        ("n_tests_buggy_on", "INTEGER"), ("n_tests_fixed_on", "INTEGER"), ("in_subset", "BOOLEAN"),
    ),
    _table(
        "thinking_comparisons", "thinking on minus off per condition, on the truncation-matched subset",
        _PLAN, _CONDITION, ("metric", "VARCHAR", "misleading_rate | effective_rate"), ("rate_off", "DOUBLE"),
        ("rate_on", "DOUBLE"),
        ("estimate", "DOUBLE", "rate_on - rate_off"), ("ci_low", "DOUBLE"), ("ci_high", "DOUBLE"), _LEVEL, _N_BOOT,
        _SEED, ("n_problems", "INTEGER"), ("n_tests_off", "INTEGER"), ("n_tests_on", "INTEGER"),
        ("n_cell_off", "INTEGER"), ("n_cell_on", "INTEGER"), ("n_zero_denominator", "INTEGER"),
        ("excludes_zero", "BOOLEAN"),
        ("note", "VARCHAR", "why there is no estimate: the modes' answers came from different templates or models"),
        _MC_SE_LOW, _MC_SE_HIGH,
    ),
    _table(
        "tool_policy", "per condition × thinking: what a generator keeping only tests that pass on the code would keep",
        _CONDITION, _THINKING,
        ("filter_version", "VARCHAR", "the version the tool runs the tests against: fixed for fixed_code, else buggy"),
        ("n_tests", "INTEGER"), ("n_kept", "INTEGER", "tests passing on filter_version"),
        ("kept_misleading", "INTEGER"), ("n_misleading", "INTEGER"), ("kept_effective", "INTEGER"),
        ("discarded_effective", "INTEGER"), ("n_effective", "INTEGER"), ("problems_with_effective", "INTEGER"),
        ("problems_with_kept_effective", "INTEGER"),
        ("kept_bug_revealing_rate", "DOUBLE", "kept effective / kept; NaN when nothing is kept"),
        ("kept_misleading_rate", "DOUBLE", "kept misleading / kept; NaN when nothing is kept"),
        ("kept_misleading_ci_low", "DOUBLE", "cluster-adjusted Wilson interval of kept_misleading_rate (tests "
                                             "clustered in problems)"),
        ("kept_misleading_ci_high", "DOUBLE"),
        ("kept_bug_revealing_ci_low", "DOUBLE", "cluster-adjusted Wilson interval of kept_bug_revealing_rate"),
        ("kept_bug_revealing_ci_high", "DOUBLE"), _LEVEL,
    ),
    # ---------------------------------------------------------------- problem level (secondary, plan amendment)
    _table(
        "problem_rates", "per condition × thinking: problems with at least one misleading / effective test",
        _PLAN, _CONDITION, _THINKING, ("n_problems", "INTEGER", "problems run (answered, with or without tests)"),
        ("n_problems_with_tests", "INTEGER", "problems whose answer gave at least one scored test"),
        ("problems_with_misleading", "INTEGER"), ("problems_with_effective", "INTEGER"),
        ("misleading_share", "DOUBLE", "problems_with_misleading / n_problems"),
        ("misleading_share_ci_low", "DOUBLE", "Wilson score interval over problems"),
        ("misleading_share_ci_high", "DOUBLE"),
        ("misleading_share_of_tested", "DOUBLE", "problems_with_misleading / n_problems_with_tests; NaN over zero"),
        ("effective_share", "DOUBLE", "problems_with_effective / n_problems"),
        ("effective_share_ci_low", "DOUBLE"), ("effective_share_ci_high", "DOUBLE"),
        ("effective_share_of_tested", "DOUBLE", "problems_with_effective / n_problems_with_tests; NaN over zero"),
        _LEVEL,
    ),
    _table(
        "problem_comparisons", "the plan's four comparisons on problem indicators (at least one misleading / "
        "effective test): exact McNemar test and paired bootstrap",
        _PLAN, ("comparison_id", "INTEGER"), _THINKING, ("role", "VARCHAR", "secondary | report-only"),
        ("metric", "VARCHAR", "misleading_rate | effective_rate: the cell whose indicator is compared"),
        ("condition_a", "VARCHAR"), ("condition_b", "VARCHAR"), ("subset", "VARCHAR", "all | truncation_matched"),
        ("n_problems", "INTEGER", "problems paired (answered in both conditions)"),
        ("n_problems_with_tests_a", "INTEGER"), ("n_problems_with_tests_b", "INTEGER"),
        ("n_problems_with_tests_both", "INTEGER"),
        ("problems_a", "INTEGER", "paired problems where condition_a has at least one test of the cell"),
        ("problems_b", "INTEGER"), ("share_a", "DOUBLE", "problems_a / n_problems"), ("share_b", "DOUBLE"),
        ("estimate", "DOUBLE", "share_a - share_b"), ("ci_low", "DOUBLE", "paired bootstrap percentile bound"),
        ("ci_high", "DOUBLE"), _MC_SE_LOW, _MC_SE_HIGH,
        ("discordant_a", "INTEGER", "problems with the cell in condition_a only"),
        ("discordant_b", "INTEGER", "problems with the cell in condition_b only"),
        ("mcnemar_p", "DOUBLE", "exact McNemar test: two-sided binomial test of discordant_a in the discordant pairs"),
        ("alpha", "DOUBLE", "1 - level: the Bonferroni threshold of the four comparisons"),
        ("excludes_zero", "BOOLEAN"), ("verdict", "VARCHAR"), _LEVEL, _N_BOOT, _SEED,
        ("note", "VARCHAR", "why there is no estimate"),
    ),
    # ---------------------------------------------------------------- repetition (report-only, plan amendment)
    _table(
        "test_repeats", "per scored test: is its body an exact copy of an earlier test's in the same answer",
        _CONDITION, _THINKING, _TASK, _IDX, ("test_id", "VARCHAR"), ("outcome", "VARCHAR"),
        ("body_sha256", "VARCHAR", "sha256 of the test function's body, whitespace normalised, name left out; "
                                   "NULL: body not found in the file"),
        ("duplicate_of", "VARCHAR", "test_id of the first earlier test of the answer with the same body (and the "
                                    "same parameters); NULL: none"),
    ),
    _table(
        "answer_repeats", "per answer (test_generations; 0 tests included): repeated test bodies, and whether it was cut "
        "at the cap while repeating",
        _CONDITION, _THINKING, _TASK, _IDX, ("n_tests", "INTEGER"), ("n_distinct", "INTEGER", "tests not a copy"),
        ("n_duplicates", "INTEGER", "tests whose duplicate_of is set"), ("finish_reason", "VARCHAR"),
        ("tail_repeating", "BOOLEAN", "the answer's end repeats (digits masked): at most half of its last 30 lines "
                                      "distinct, or its last 2,000 characters compress to 12 % or less"),
        ("loop", "BOOLEAN", "cut at the cap (finish_reason = length) while repeating: duplicates or a repeating tail"),
        ("n_misleading", "INTEGER"), ("n_effective", "INTEGER"),
    ),
    _table(
        "repetition_rates", "per condition × thinking: the preregistered pooled rates, then the same with exact-copy "
        "tests counted once, the share of the cell's events from its top problem, and what loops hold",
        _PLAN, _CONDITION, _THINKING, ("n_tests", "INTEGER"), ("n_misleading", "INTEGER"), ("n_effective", "INTEGER"),
        ("misleading_rate", "DOUBLE", "preregistered pooled rate (as condition_rates)"),
        ("effective_rate", "DOUBLE", "preregistered pooled rate (as condition_rates)"),
        ("n_tests_distinct", "INTEGER", "tests that are not an exact copy of an earlier one in their answer"),
        ("n_misleading_distinct", "INTEGER"), ("n_effective_distinct", "INTEGER"),
        ("misleading_rate_distinct", "DOUBLE", "exact copies counted once; NaN over zero"),
        ("effective_rate_distinct", "DOUBLE", "exact copies counted once; NaN over zero"),
        ("top_misleading_task", "VARCHAR", "the problem with the most misleading tests"),
        ("top_misleading_n", "INTEGER"), ("top_misleading_share", "DOUBLE", "top_misleading_n / n_misleading"),
        ("top_effective_task", "VARCHAR"), ("top_effective_n", "INTEGER"),
        ("top_effective_share", "DOUBLE", "top_effective_n / n_effective"),
        ("n_answers_with_tests", "INTEGER"),
        ("n_loop_answers", "INTEGER", "answers with scored tests cut at the cap while repeating"),
        ("n_tests_in_loops", "INTEGER"), ("n_misleading_in_loops", "INTEGER"), ("n_effective_in_loops", "INTEGER"),
    ),
    _table(
        "reasoning_mentions", "per thinking-on answer: does its reasoning say the code is wrong?",
        _PLAN, _KEYWORDS, _CONDITION, _THINKING, _TASK, _IDX, ("has_reasoning", "BOOLEAN"),
        ("reasoning_chars", "INTEGER"), ("mentions", "BOOLEAN"), ("n_matches", "INTEGER"),
        ("matched_keywords", "VARCHAR", "JSON list"), ("first_snippet", "VARCHAR"), ("n_tests", "INTEGER"),
        ("n_misleading", "INTEGER"), ("has_misleading", "BOOLEAN"),
    ),
    _table(
        "reasoning_mention_matches", "every keyword match in the reasoning, with a snippet",
        _PLAN, _KEYWORDS, _THINKING, _TASK, ("keyword", "VARCHAR", "the pattern's line in the keyword file"),
        ("match", "VARCHAR"), ("position", "INTEGER", "character offset in the reasoning"), ("snippet", "VARCHAR"),
    ),
    _table(
        "reasoning_mention_summary", "misleading rate of answers whose reasoning mentions the bug vs not",
        _PLAN, _KEYWORDS, _CONDITION, _THINKING, ("mention_group", "VARCHAR", "mentions | no_mention | all_with_tests"),
        ("n_problems", "INTEGER"), ("n_problems_with_misleading", "INTEGER"), ("n_tests", "INTEGER"),
        ("n_misleading", "INTEGER"), ("misleading_rate", "DOUBLE"),
    ),
    _table(
        "spec_label_splits", "misleading and effective rates split by spec label",
        _PLAN, _THINKING, _CONDITION,
        ("category", "VARCHAR", "a category, unlabelled, or transcribes_bug=yes|no|unlabelled; split_by execution: "
                                "the execution judge's category or no_evidence"),
        ("n_problems", "INTEGER"), ("n_tests", "INTEGER"), ("n_misleading", "INTEGER"), ("misleading_rate", "DOUBLE"),
        ("n_effective", "INTEGER"), ("effective_rate", "DOUBLE"),
        ("split_by", "VARCHAR", "category | transcribes_bug | execution (the execution judge alone)"),
    ),
    _table(
        "spec_labels", "per model spec: does it transcribe the bug, does it state the correct behaviour; LLM judge, execution "
        "judge (the spec's examples run on both versions), then human",
        _PLAN, _THINKING, _TASK, _IDX, ("entry_point", "VARCHAR"), ("spec_sha256", "VARCHAR"),
        ("judge_model", "VARCHAR"), ("judge_template_sha256", "VARCHAR"), ("judge_prompt_sha256", "VARCHAR"),
        ("judge_cache_key", "VARCHAR"), ("judge_finish_reason", "VARCHAR"), ("judge_text", "VARCHAR"),
        ("judge_transcribes_bug", "BOOLEAN"), ("judge_states_correct", "BOOLEAN"),
        ("judge_error", "VARCHAR", "why the judge's answer gave no label"),
        ("in_review_sample", "BOOLEAN", "in the seeded human-review sample"),
        ("human_transcribes_bug", "BOOLEAN"), ("human_states_correct", "BOOLEAN"), ("human_note", "VARCHAR"),
        ("transcribes_bug", "BOOLEAN", "final label: human if given, else judge"), ("states_correct", "BOOLEAN"),
        ("label_source", "VARCHAR", "human, execution or judge, or a '+' of them where the two labels differ"),
        ("category", "VARCHAR", "transcribes_bug | restores_correct | neither"),
        ("exec_category", "VARCHAR", "execution judge: transcribes_bug | restores_correct; NULL: no evidence"),
        ("exec_note", "VARCHAR", "why the execution judge gives no label"),
        ("exec_n_examples", "INTEGER", "examples read from the spec and run (repeats removed, at most 20)"),
        ("exec_n_buggy_only", "INTEGER", "examples that pass on the buggy version only"),
        ("exec_n_fixed_only", "INTEGER", "examples that pass on the fixed version only"),
        ("exec_n_both_pass", "INTEGER", "examples that pass on both versions"),
        ("exec_n_neither", "INTEGER", "examples that pass on neither version"),
        ("exec_examples", "VARCHAR", "JSON: each example's line and its status on each version"),
        ("judges_agree", "BOOLEAN", "the LLM judge's category is the execution judge's; NULL where either has none"),
    ),
    _table(
        "spec_label_agreement", "human vs LLM judge on the reviewed specs; execution judge vs each of them",
        _PLAN, _THINKING,
        ("label", "VARCHAR", "transcribes_bug | states_correct | category: human vs LLM judge; execution_vs_judge | "
                             "execution_vs_human: the category"),
        ("n_reviewed", "INTEGER", "specs both sides label"),
        ("n_agree", "INTEGER"), ("agreement", "DOUBLE"), ("kappa", "DOUBLE", "Cohen's kappa"),
    ),
    # ---------------------------------------------------------------- mutation score
    _table(
        "mutants", "up to 30 mutants of each validated problem's fixed function, with the oracle's verdict",
        _TASK, _IDX, ("mutant_id", "INTEGER", "stable under sampling"), ("operator", "VARCHAR"),
        ("line", "INTEGER"), ("description", "VARCHAR"), ("diff", "VARCHAR"), ("mutant_code", "VARCHAR"),
        ("oracle_killed", "BOOLEAN", "the dataset oracle fails on the mutant"), ("oracle_detail", "VARCHAR"),
        ("likely_equivalent", "BOOLEAN", "not killed by the oracle; left out of the score"),
        ("n_candidates", "INTEGER", "mutants before sampling"), ("mutator_version", "VARCHAR"),
        ("cap", "INTEGER"), ("seed", "BIGINT"),
    ),
    _table(
        "mutation_scores", "per generated test file: share of non-equivalent mutants its passing tests kill",
        _CONDITION, _THINKING, _TASK, _IDX, ("n_tests", "INTEGER"), ("n_tests_passing_fixed", "INTEGER"),
        ("n_mutants", "INTEGER"), ("n_likely_equivalent", "INTEGER"), ("n_killed", "INTEGER"),
        ("n_killed_non_equivalent", "INTEGER"), ("n_killed_likely_equivalent", "INTEGER"),
        ("mutation_score", "DOUBLE", "NULL: not estimable"), ("runs", "INTEGER", "test × mutant runs"),
        ("mutant_timeout_s", "DOUBLE"), ("mutator_version", "VARCHAR"),
        ("n_killed_by_timeout", "INTEGER", "killed mutants whose killing run timed out"),
        ("n_timeouts_not_kills", "INTEGER", "mutant runs over the limit whose fixed run took half the limit or more"),
        ("max_runs", "INTEGER", "the per-file run cap in force"),
        ("n_tests_capped", "INTEGER", "passing tests the run cap kept out of the mutant pass"),
        ("runs_dropped", "INTEGER", "mutant runs the run cap left out"),
    ),
    _table(
        "mutant_kills", "per test file and mutant: killed or not, and by which test",
        _CONDITION, _THINKING, _TASK, _IDX, ("mutant_id", "INTEGER"), ("operator", "VARCHAR"),
        ("likely_equivalent", "BOOLEAN"), ("killed", "BOOLEAN"),
        ("killing_test", "VARCHAR", "first passing test, in file order, that does not pass on the mutant"),
        ("killing_status", "VARCHAR"), ("n_tests_run", "INTEGER"),
        ("killed_by_timeout", "BOOLEAN", "the killing run went over the limit (its fixed run took under half of it)"),
        ("n_timeouts_not_kills", "INTEGER", "runs over the limit not counted as kills (fixed run took half or more)"),
    ),
    # ---------------------------------------------------------------- the file itself (issues 15, 18)
    _table(
        "storage_info", "the database file: its id (checked at every open), storage version, creation and migration",
        ("key", "VARCHAR PRIMARY KEY", "database_id, storage_version, readable_by, created_at, created_with, "
                                       "migrated_from, migrated_at"),
        ("value", "VARCHAR"),
    ),
    _table(
        "storage_repairs", "strings changed so DuckDB could store them (lone surrogates escaped), per write",
        ("ts", "TIMESTAMP"), ("table_name", "VARCHAR"), ("column_name", "VARCHAR"),
        ("n_values", "INTEGER", "values changed in that write"), ("repair", "VARCHAR"),
        ("first_row", "VARCHAR", "JSON: key columns of the first changed row"),
    ),
)

# Tables written by a model's assets: each row names its model. The column is appended,
# so files from before it keep their columns; their rows get the study's first model's name at the
# next run (Warehouse.name_unnamed_rows).
MODEL_COLUMN = "model_name"
PER_MODEL_TABLES: tuple[str, ...] = (
    "model_specs", "test_generations", "determinism_probe", "generated_tests", "test_outcomes", "test_coverage",
    "condition_rates", "bootstrap_comparisons", "truncation_matched_subset", "thinking_comparisons",
    "reasoning_mentions", "reasoning_mention_matches", "reasoning_mention_summary", "spec_label_splits",
    "spec_labels", "spec_label_agreement", "mutation_scores", "mutant_kills", "tool_policy",
    "problem_rates", "problem_comparisons", "test_repeats", "answer_repeats", "repetition_rates",
)
_MODEL = Column(MODEL_COLUMN, "VARCHAR", "the study's name of the model whose answers the row comes from (study.toml)")
_SPECS = tuple(Table(t.name, t.description, (*t.columns, _MODEL)) if t.name in PER_MODEL_TABLES else t
               for t in _SPECS)

# Tables whose rows belong to one language of the study: the problems, their validation and every
# per-model table. The column is appended with a default, so a file from before it opens with every old row
# as Python's (database.ensure_schema adds it; DuckDB fills the default into existing rows).
LANGUAGE_COLUMN = "language"
PER_LANGUAGE_TABLES: tuple[str, ...] = ("problems", "problem_validation", *PER_MODEL_TABLES)
_LANGUAGE = Column(LANGUAGE_COLUMN, "VARCHAR DEFAULT 'python'",
                   "python | java | js: the HumanEvalPack split the row comes from (study.toml `languages`)")
_SPECS = tuple(Table(t.name, t.description, (*t.columns, _LANGUAGE)) if t.name in PER_LANGUAGE_TABLES else t
               for t in _SPECS)

# How each answer's thinking-off request switched thinking off (study.toml thinking_off). Appended after the
# columns older files have, so a file from before it opens with the column added; its rows stay NULL, and were
# made with "template" (the only mechanism then).
THINKING_OFF_COLUMN = "thinking_off"
_THINKING_OFF = Column(THINKING_OFF_COLUMN, "VARCHAR",
                       "how the thinking-off request switched thinking off: template, prefill or budget0 (study.toml "
                       "thinking_off); NULL: thinking on, no request, or a row from before the setting (template)")
_SPECS = tuple(Table(t.name, t.description, (*t.columns, _THINKING_OFF))
               if t.name in ("model_specs", "test_generations") else t for t in _SPECS)

# ---------------------------------------------------------------- across models
_BY_NAME = {t.name: t for t in _SPECS}


def _with_model_first(source: str, name: str, description: str) -> Table:
    """``source``'s columns with model_name after plan_sha256 (one row per model of what source holds)."""
    cols = [c for c in _BY_NAME[source].columns if c.name not in (MODEL_COLUMN, LANGUAGE_COLUMN)]
    return Table(name, description, (cols[0], _MODEL, *cols[1:]))


_SPECS = (*_SPECS,
    _with_model_first("condition_rates", "model_rates",
                      "each model's condition_rates side by side [model × condition × thinking]"),
    _with_model_first("bootstrap_comparisons", "model_comparisons",
                      "each model's primary comparisons side by side (paired bootstrap per model)"),
    _table(
        "model_average", "the paper-style average over the study's models: pooled and mean of per-model rates, "
        "paired bootstrap resampling the same problems for every model",
        _PLAN, ("kind", "VARCHAR", "rate (of condition_a) or comparison (condition_a minus condition_b)"),
        ("comparison_id", "INTEGER", "the plan's comparison id (comparison rows)"), _THINKING,
        ("role", "VARCHAR", "primary | report-only (comparison rows)"),
        ("metric", "VARCHAR", "misleading_rate | effective_rate"),
        ("condition_a", "VARCHAR"), ("condition_b", "VARCHAR"), ("subset", "VARCHAR", "all | truncation_matched"),
        ("n_models", "INTEGER", "models averaged"), ("models", "VARCHAR", "their names, comma-separated"),
        ("models_missing", "VARCHAR", "study models without rows for the cell"),
        ("n_problems", "INTEGER", "problems every averaged model answered (paired)"),
        ("n_tests_a", "BIGINT"), ("n_tests_b", "BIGINT"),
        ("pooled", "DOUBLE", "sum of cell counts over models / sum of tests"), ("pooled_ci_low", "DOUBLE"),
        ("pooled_ci_high", "DOUBLE"), ("pooled_excludes_zero", "BOOLEAN"),
        ("pooled_a", "DOUBLE", "comparison rows: condition_a's pooled rate on the same problems and models"),
        ("pooled_b", "DOUBLE", "comparison rows: condition_b's pooled rate on the same problems and models"),
        ("mean", "DOUBLE", "unweighted mean of the per-model rates (or differences)"), ("mean_ci_low", "DOUBLE"),
        ("mean_ci_high", "DOUBLE"), ("mean_excludes_zero", "BOOLEAN"),
        ("mean_a", "DOUBLE", "comparison rows: condition_a's mean rate on the same problems and models (mean = "
                             "mean_a - mean_b)"),
        ("mean_b", "DOUBLE", "comparison rows: condition_b's mean rate on the same problems and models"),
        ("estimable", "BOOLEAN", "false: no common problem or no test; estimate and interval are NULL"),
        ("mean_estimable", "BOOLEAN", "false also when a model has no test on the common problems"),
        ("pooled_n_zero_denominator", "INTEGER"), ("mean_n_zero_denominator", "INTEGER"),
        ("note", "VARCHAR", "why a row is not estimable"), _LEVEL, _N_BOOT, _SEED,
        ("pooled_ci_low_mc_se", "DOUBLE", "Monte Carlo standard error of pooled_ci_low (batches of the replicates)"),
        ("pooled_ci_high_mc_se", "DOUBLE"), ("mean_ci_low_mc_se", "DOUBLE"), ("mean_ci_high_mc_se", "DOUBLE"),
    ),
    _table(
        "model_sizes", "the size table: one family's models by parameter count, rates per condition",
        _PLAN, ("size_rank", "INTEGER", "1 = the smallest; models of equal size share a rank"),
        (MODEL_COLUMN, "VARCHAR", _MODEL.description), ("size", "VARCHAR", "size label, e.g. 1.5B"),
        ("n_params_billion", "DOUBLE"), _THINKING, _CONDITION, ("n_tests", "BIGINT"), ("n_misleading", "BIGINT"),
        ("n_effective", "BIGINT"), ("misleading_rate", "DOUBLE"), ("misleading_ci_low", "DOUBLE"),
        ("misleading_ci_high", "DOUBLE"), ("effective_rate", "DOUBLE"), ("effective_ci_low", "DOUBLE"),
        ("effective_ci_high", "DOUBLE"), _LEVEL, _N_BOOT, _SEED,
    ),
)

# ---------------------------------------------------------------- across languages
_SPECS = (*_SPECS,
    _table(
        "language_comparisons", "one model's languages side by side: language_a minus language_b per condition "
        "and metric, paired bootstrap over the problems both answered (same problem_idx)",
        _PLAN, (MODEL_COLUMN, "VARCHAR", _MODEL.description), _THINKING, _CONDITION,
        ("metric", "VARCHAR", "misleading_rate | effective_rate | line_coverage | mutation_score"),
        ("language_a", "VARCHAR"), ("language_b", "VARCHAR"),
        ("rate_a", "DOUBLE", "language_a's pooled rate on the paired problems; NULL: not estimable"),
        ("rate_b", "DOUBLE", "language_b's pooled rate on the paired problems; NULL: not estimable"),
        ("estimate", "DOUBLE", "rate_a - rate_b; NULL: not estimable"), ("ci_low", "DOUBLE"), ("ci_high", "DOUBLE"),
        ("excludes_zero", "BOOLEAN", "the interval excludes 0; NULL: not estimable"),
        ("n_problems", "INTEGER", "paired problems: answered in both languages"),
        ("n_tests_a", "INTEGER"), ("n_tests_b", "INTEGER"), ("n_cell_a", "INTEGER"), ("n_cell_b", "INTEGER"),
        ("n_zero_denominator", "INTEGER", "resamples where a side drew no test"),
        ("estimable", "BOOLEAN"), ("note", "VARCHAR", "why a row is not estimable"), _LEVEL, _N_BOOT, _SEED,
        _MC_SE_LOW, _MC_SE_HIGH,
    ),
)

SPECS: dict[str, Table] = {t.name: t for t in _SPECS}
assert set(PER_MODEL_TABLES) <= set(SPECS), "a per-model table is not in the schema"
assert len(SPECS) == len(_SPECS), "duplicate table name in schema"

# name -> list of (column, type): what storage creates
TABLES: dict[str, list[tuple[str, str]]] = {t.name: [(c.name, c.type) for c in t.columns] for t in _SPECS}


def column_names(table: str) -> list[str]:
    """The columns a computation fills, in order: every column but ``model_name`` and ``language``, which the
    IO manager (or the asset writing a side table) fills from the asset's key."""
    return [c.name for c in SPECS[table].columns if c.name not in (MODEL_COLUMN, LANGUAGE_COLUMN)]


def stored_columns(table: str) -> list[str]:
    """Every column of the table as stored, ``model_name`` included."""
    return [c.name for c in SPECS[table].columns]


def column_schema(table: str) -> list[tuple[str, str, str]]:
    """(name, DuckDB type without constraints, description) per column; Dagster-free."""
    return [(c.name, _bare_type(c.type), c.description) for c in SPECS[table].columns]


def _bare_type(typ: str) -> str:
    """The DuckDB type without its constraint or default ("VARCHAR DEFAULT 'python'" -> "VARCHAR")."""
    return typ.replace(" PRIMARY KEY", "").split(" DEFAULT ")[0]


def table_description(table: str) -> str:
    return SPECS[table].description


# ---------------------------------------------------------------- old files


def migrate(con: Any) -> list[str]:
    """Bring an existing DuckDB file's column types up to the registry; returns what changed.

    - ``generated_tests.test_ids``: JSON text (``VARCHAR``, in older files) -> ``VARCHAR[]``; rows that
      newer code wrote into the old column hold DuckDB's text form of a list, which casts back exactly.
    """
    done = []
    row = con.execute(
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' AND table_name = 'generated_tests' AND column_name = 'test_ids'"
    ).fetchall()
    if row and row[0][0] == "VARCHAR":
        con.execute(
            "ALTER TABLE generated_tests ALTER COLUMN test_ids SET DATA TYPE VARCHAR[] "
            "USING CASE WHEN test_ids IS NULL THEN NULL WHEN json_valid(test_ids) "
            "THEN from_json(test_ids, '[\"VARCHAR\"]') ELSE CAST(test_ids AS VARCHAR[]) END"
        )
        done.append("generated_tests.test_ids: JSON text -> VARCHAR[]")
    return done


# ---------------------------------------------------------------- the schema reference (docs)


def markdown() -> str:
    """The documentation's schema reference page (docs/reference/schema.md), rendered from the registry."""
    lines = [
        "<!-- generated by `python -m evalmislead_assets.store.schema --write-docs` from "
        "evalmislead_assets/store/schema.py; do not edit by hand -->",
        "",
        "# Schema reference",
        "",
        "Tables (one per asset, same name; analysis rows carry `plan_sha256`). Generated from",
        "`evalmislead_assets/store/schema.py` by `python -m evalmislead_assets.store.schema --write-docs`;",
        "column types: `evalmislead sql 'describe TABLE'`. The views and how to query them:",
        "[Query the results](../querying.md).",
        "",
        "Columns in many tables: " + ", ".join(f"{n} ({_md(d)})" for n, _, d in _SHARED) + ".",
        "",
        "| table | rows | columns |",
        "|---|---|---|",
    ]
    for t in _SPECS:
        cols = ", ".join(_md_column(c) for c in t.columns)
        lines.append(f"| `{t.name}` | {_md(t.description)} | {cols} |")
    return "\n".join(lines) + "\n"


def _md_column(c: Column) -> str:
    typ = _bare_type(c.type)
    name = f"{c.name} `{typ}`" if typ.endswith("[]") else c.name
    if not c.description or (c.name, c.type, c.description) in _SHARED:
        return name
    return f"{name} ({_md(c.description)})"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


def docs_path(root: Path | None = None) -> Path:
    """Where the schema reference page lives under the project root (default: this checkout's)."""
    return (root or Path(__file__).resolve().parents[2]) / DOCS_PAGE


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evalmislead_assets.store.schema", description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--markdown", action="store_true", help="print the schema reference page")
    g.add_argument("--write-docs", action="store_true", help=f"rewrite the schema reference page, {DOCS_PAGE}")
    g.add_argument("--migrate", metavar="DB", help="convert an old DuckDB file's column types in place")
    args = p.parse_args(argv)
    if args.markdown:
        sys.stdout.write(markdown())
    elif args.write_docs:
        path = docs_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(markdown(), encoding="utf-8")
        print(f"wrote the schema reference, {path}")
    else:
        import duckdb

        from evalmislead_assets.store.file_format import connect_config

        with duckdb.connect(args.migrate, config=connect_config()) as con:  # a new file: 1.x-readable
            for line in migrate(con) or ["nothing to migrate"]:
                print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
