"""SQL views that make common questions one line (documented in docs/querying.md, "Views").

Views read only the tables declared in schema.py (the upstream tables), so they can be
created in any DuckDB file by any process; the analysis tables (condition_rates,
bootstrap_comparisons, ...) are summaries already and are queried directly.
Order matters: a view may use the views above it. Every view keeps `model_name` (its first column)
and joins on it, so one query sees every model side by side and never pairs two models' rows. Every view
ends with `language` (rows of two languages never join: their task_ids differ, Python/30 and
Java/30), so `select language, ... from live_rates` sets the languages side by side.
"""

from __future__ import annotations


def same(a: str, b: str) -> str:
    """Two tables' rows of one answer: the same model (a row of an older file has none:
    NULL matches NULL), condition, thinking mode and problem."""
    return (f"{a}.model_name IS NOT DISTINCT FROM {b}.model_name AND {a}.condition = {b}.condition "
            f"AND {a}.thinking = {b}.thinking AND {a}.task_id = {b}.task_id")


VIEWS: dict[str, str] = {
    # per condition x thinking x problem: the four cells and the tests that ended on a runner cap (problems with
    # tests only)
    "problem_cells": """
        SELECT model_name, condition, thinking, task_id,
               count(*) AS n_tests,
               count(*) FILTER (WHERE outcome = 'misleading') AS n_misleading,
               count(*) FILTER (WHERE outcome = 'effective') AS n_effective,
               count(*) FILTER (WHERE outcome = 'both_pass') AS n_both_pass,
               count(*) FILTER (WHERE outcome = 'both_fail') AS n_both_fail,
               count(*) FILTER (WHERE outcome = 'limit') AS n_limit, language
        FROM test_outcomes GROUP BY ALL
    """,
    # one row per misleading test, with the test module it came from
    "misleading_tests": f"""
        SELECT o.model_name, o.condition, o.thinking, o.task_id, o.problem_idx, o.test_id, o.buggy_detail,
               o.fixed_detail, g.source, o.language
        FROM test_outcomes o
        LEFT JOIN generated_tests g ON {same('o', 'g')}
        WHERE o.outcome = 'misleading'
    """,
    # every executed test with the function under test
    "test_results": """
        SELECT o.model_name, o.condition, o.thinking, o.task_id, o.problem_idx, p.entry_point, o.test_id,
               o.buggy_status, o.fixed_status, o.outcome, o.seconds, o.language
        FROM test_outcomes o LEFT JOIN problems p USING (task_id)
    """,
    # one row per answer: truncation, import, tests collected and run, the four cells
    "answers": f"""
        SELECT g.model_name, g.condition, g.thinking, g.task_id, g.problem_idx, g.finish_reason,
               g.finish_reason = 'length' AS truncated, g.completion_tokens, g.reasoning_present, g.error,
               t.import_ok, t.extraction, t.n_tests AS n_tests_collected,
               coalesce(c.n_tests, 0) AS n_tests, coalesce(c.n_misleading, 0) AS n_misleading,
               coalesce(c.n_effective, 0) AS n_effective, coalesce(c.n_both_pass, 0) AS n_both_pass,
               coalesce(c.n_both_fail, 0) AS n_both_fail, g.language
        FROM test_generations g
        LEFT JOIN generated_tests t ON {same('g', 't')}
        LEFT JOIN problem_cells c ON {same('g', 'c')}
    """,
    # answers that hit the token cap, with how many tests they still yielded
    "truncated_answers": """
        SELECT model_name, condition, thinking, task_id, completion_tokens, import_ok, n_tests, language
        FROM answers WHERE truncated
    """,
    # test files (answers with code) that could not be imported or collected against either version, with
    # the reason; answers without code (no fence, truncated, server error, empty model spec) are not files
    "unimportable_tests": """
        SELECT model_name, condition, thinking, task_id, extraction, finish_reason, error,
               coalesce(regexp_matches(error, '^collected against the (buggy|fixed) version only'), false)
                 AS one_version_only, language
        FROM generated_tests WHERE NOT import_ok AND source IS NOT NULL
    """,
    # pooled rates straight from the outcomes (no intervals; condition_rates has them)
    "live_rates": """
        SELECT model_name, condition, thinking, count(DISTINCT task_id) AS problems_with_tests, count(*) AS n_tests,
               count(*) FILTER (WHERE outcome = 'misleading') AS n_misleading,
               count(*) FILTER (WHERE outcome = 'effective') AS n_effective,
               round(100.0 * count(*) FILTER (WHERE outcome = 'misleading') / count(*), 1) AS misleading_pct,
               round(100.0 * count(*) FILTER (WHERE outcome = 'effective') / count(*), 1) AS effective_pct, language
        FROM test_outcomes GROUP BY ALL ORDER BY model_name, language, thinking, condition
    """,
}
