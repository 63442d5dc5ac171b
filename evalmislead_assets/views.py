"""SQL views that make common questions one line (documented in the README)."""

from __future__ import annotations

VIEWS: dict[str, str] = {
    # one row per test, with the problem and the test module it came from
    "misleading_tests": """
        SELECT o.condition, o.thinking, o.task_id, o.test_id, o.buggy_detail, o.fixed_detail, g.source
        FROM test_outcomes o
        LEFT JOIN generated_tests g USING (condition, thinking, task_id)
        WHERE o.outcome = 'misleading'
    """,
    "problem_cells": """
        SELECT condition, thinking, task_id,
               count(*) AS n_tests,
               count(*) FILTER (WHERE outcome = 'misleading') AS n_misleading,
               count(*) FILTER (WHERE outcome = 'effective') AS n_effective,
               count(*) FILTER (WHERE outcome = 'both_pass') AS n_both_pass,
               count(*) FILTER (WHERE outcome = 'both_fail') AS n_both_fail
        FROM test_outcomes GROUP BY ALL
    """,
}
