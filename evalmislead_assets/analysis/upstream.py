"""The columns each analysis reads from its stored upstream tables, as SQL select items over the stored table.

One list per input, shared by the analysis assets (assets/analysis_inputs.py and assets/analysis.py hand them to
the IO manager as an input's ``columns``) and by `evalmislead verify` (report/package_consistency.py selects the
same items from a reproduction package's tables), so that both hand the analysis functions the same frames.
An item is a column name or ``<expression> AS <name>``. Nothing here touches DuckDB or Dagster.
"""

from __future__ import annotations

# the three upstream tables every analysis reads (all partitions)
OUTCOME_COLUMNS = ["condition", "thinking", "task_id", "problem_idx", "test_id", "outcome"]
GENERATION_COLUMNS = [
    "condition", "thinking", "task_id", "problem_idx", "finish_reason", "error", "template_sha256", "model",
    "TRY_CAST(json_extract_string(request_json, '$.max_tokens') AS INTEGER) AS max_tokens"]
GENERATED_COLUMNS = ["condition", "thinking", "task_id", "problem_idx", "n_tests", "import_ok", "error",
                     "source IS NOT NULL AS has_code", "verified"]
UPSTREAM_COLUMNS: dict[str, list[str]] = {
    "test_outcomes": OUTCOME_COLUMNS, "test_generations": GENERATION_COLUMNS, "generated_tests": GENERATED_COLUMNS,
}

# repetition_rates reads the test sources and the answers' text instead
REPETITION_GENERATED_COLUMNS = ["condition", "thinking", "task_id", "source", "test_ids"]
REPETITION_GENERATION_COLUMNS = ["condition", "thinking", "task_id", "problem_idx", "finish_reason", "response_text"]
# reasoning_mentions reads the answers' reasoning
REASONING_GENERATION_COLUMNS = ["condition", "thinking", "task_id", "problem_idx", "reasoning_text", "response_text"]


def item_name(item: str) -> str:
    """The column a select item yields: its ``AS`` name, else the column itself."""
    head, sep, alias = item.rpartition(" AS ")
    return alias.strip() if sep and head else item.strip()
