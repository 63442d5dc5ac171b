"""Table definitions: one table per asset (same name), plus the LLM call log and cache.

Columns are documented in the README ("SQL tables"). New columns may be appended;
existing ones are never renamed, so old DuckDB files keep working (see storage.ensure_schema).
"""

from __future__ import annotations

# name -> list of (column, type)
TABLES: dict[str, list[tuple[str, str]]] = {
    "problems": [
        ("task_id", "VARCHAR"), ("problem_idx", "INTEGER"), ("entry_point", "VARCHAR"),
        ("declaration", "VARCHAR"), ("signature", "VARCHAR"), ("docstring", "VARCHAR"),
        ("prompt", "VARCHAR"), ("canonical_solution", "VARCHAR"), ("buggy_solution", "VARCHAR"),
        ("bug_type", "VARCHAR"), ("failure_symptoms", "VARCHAR"), ("test", "VARCHAR"),
        ("example_test", "VARCHAR"), ("buggy_code", "VARCHAR"), ("fixed_code", "VARCHAR"),
        ("source_sha256", "VARCHAR"),
    ],
    "problem_validation": [
        ("task_id", "VARCHAR"), ("problem_idx", "INTEGER"), ("buggy_passed", "BOOLEAN"),
        ("fixed_passed", "BOOLEAN"), ("buggy_detail", "VARCHAR"), ("fixed_detail", "VARCHAR"),
        ("seconds", "DOUBLE"), ("valid", "BOOLEAN"),
    ],
    # Every HTTP request actually sent; a cache hit adds no row.
    "llm_calls": [
        ("call_id", "VARCHAR"), ("ts", "TIMESTAMP"), ("asset", "VARCHAR"), ("condition", "VARCHAR"),
        ("thinking", "VARCHAR"), ("task_id", "VARCHAR"), ("server_url", "VARCHAR"),
        ("cache_key", "VARCHAR"), ("status_code", "INTEGER"), ("latency_s", "DOUBLE"),
        ("prompt_tokens", "INTEGER"), ("completion_tokens", "INTEGER"), ("error", "VARCHAR"),
    ],
    # Successful responses keyed by sha256 of the full request body.
    "llm_cache": [
        ("cache_key", "VARCHAR PRIMARY KEY"), ("request_json", "VARCHAR"), ("response_json", "VARCHAR"),
        ("server_url", "VARCHAR"), ("server_props_sha256", "VARCHAR"), ("latency_s", "DOUBLE"),
        ("created_at", "TIMESTAMP"),
    ],
    "server_props": [
        ("server_props_sha256", "VARCHAR PRIMARY KEY"), ("server_url", "VARCHAR"),
        ("model", "VARCHAR"), ("props_json", "VARCHAR"), ("first_seen", "TIMESTAMP"),
    ],
    "model_specs": [
        ("thinking", "VARCHAR"), ("task_id", "VARCHAR"), ("problem_idx", "INTEGER"), ("model", "VARCHAR"),
        ("template_sha256", "VARCHAR"), ("prompt_sha256", "VARCHAR"), ("request_json", "VARCHAR"),
        ("response_text", "VARCHAR"), ("spec_text", "VARCHAR"), ("reasoning_text", "VARCHAR"),
        ("reasoning_present", "BOOLEAN"), ("finish_reason", "VARCHAR"), ("prompt_tokens", "INTEGER"),
        ("completion_tokens", "INTEGER"), ("latency_s", "DOUBLE"), ("server_url", "VARCHAR"),
        ("server_props_sha256", "VARCHAR"), ("cache_key", "VARCHAR"), ("error", "VARCHAR"),
        ("created_at", "TIMESTAMP"),
        # issue 10: server settings that affect determinism, per answer
        ("total_slots", "INTEGER"), ("cache_prompt", "BOOLEAN"), ("build_info", "VARCHAR"),
    ],
    "test_generations": [
        ("condition", "VARCHAR"), ("thinking", "VARCHAR"), ("task_id", "VARCHAR"), ("problem_idx", "INTEGER"),
        ("model", "VARCHAR"), ("template_sha256", "VARCHAR"), ("prompt_sha256", "VARCHAR"),
        ("request_json", "VARCHAR"), ("response_text", "VARCHAR"), ("reasoning_text", "VARCHAR"),
        ("reasoning_present", "BOOLEAN"), ("finish_reason", "VARCHAR"), ("prompt_tokens", "INTEGER"),
        ("completion_tokens", "INTEGER"), ("latency_s", "DOUBLE"), ("server_url", "VARCHAR"),
        ("server_props_sha256", "VARCHAR"), ("cache_key", "VARCHAR"), ("error", "VARCHAR"),
        ("created_at", "TIMESTAMP"),
        # issue 10: server settings that affect determinism, per answer
        ("total_slots", "INTEGER"), ("cache_prompt", "BOOLEAN"), ("build_info", "VARCHAR"),
    ],
    "generated_tests": [
        ("condition", "VARCHAR"), ("thinking", "VARCHAR"), ("task_id", "VARCHAR"), ("problem_idx", "INTEGER"),
        ("source", "VARCHAR"), ("extraction", "VARCHAR"), ("import_ok", "BOOLEAN"), ("n_tests", "INTEGER"),
        ("test_ids", "VARCHAR"), ("error", "VARCHAR"), ("finish_reason", "VARCHAR"),
    ],
    "test_outcomes": [
        ("condition", "VARCHAR"), ("thinking", "VARCHAR"), ("task_id", "VARCHAR"), ("problem_idx", "INTEGER"),
        ("test_id", "VARCHAR"), ("buggy_status", "VARCHAR"), ("fixed_status", "VARCHAR"),
        ("outcome", "VARCHAR"), ("buggy_detail", "VARCHAR"), ("fixed_detail", "VARCHAR"),
        ("seconds", "DOUBLE"),
    ],
}

# Determinism probe (issue 10): stored answers re-sent with the response cache bypassed.
TABLES["determinism_probe"] = [
    ("condition", "VARCHAR"), ("thinking", "VARCHAR"), ("task_id", "VARCHAR"), ("problem_idx", "INTEGER"),
    ("cache_key", "VARCHAR"), ("original_text", "VARCHAR"), ("probe_text", "VARCHAR"), ("identical", "BOOLEAN"),
    ("reasoning_identical", "BOOLEAN"),
    ("original_n_tests", "INTEGER"), ("original_misleading", "INTEGER"), ("original_effective", "INTEGER"),
    ("original_both_pass", "INTEGER"), ("original_both_fail", "INTEGER"),
    ("probe_n_tests", "INTEGER"), ("probe_misleading", "INTEGER"), ("probe_effective", "INTEGER"),
    ("probe_both_pass", "INTEGER"), ("probe_both_fail", "INTEGER"), ("tests_identical", "BOOLEAN"),
    ("probe_error", "VARCHAR"), ("probe_finish_reason", "VARCHAR"),
    ("original_total_slots", "INTEGER"), ("original_cache_prompt", "BOOLEAN"), ("original_build_info", "VARCHAR"),
    ("probe_total_slots", "INTEGER"), ("probe_cache_prompt", "BOOLEAN"), ("probe_build_info", "VARCHAR"),
    ("probe_server_url", "VARCHAR"), ("sample_seed", "BIGINT"), ("created_at", "TIMESTAMP"),
]

# Analysis tables (issue 5) register themselves here from their own modules via
# register_table(), so that storage creates them like the ones above.


def register_table(name: str, columns: list[tuple[str, str]]) -> None:
    TABLES[name] = columns
