"""The tool-policy view: what a test generator that keeps only the tests passing on the code would keep.

Test-generation tools (CoverUp-like) run each generated test against the code under test and discard the
ones that fail, on the assumption that the code is right. With a bug in the code this keeps the tests that
lock the bug in and discards the ones that reveal it. From the stored outcomes (no new generation), per
condition and thinking mode: the tests kept by a filter on the version the tool runs them against, the
misleading tests it keeps, the effective tests it discards, and the kept suite's bug-revealing rate.

The filter's version: the one the prompt showed (``fixed_code``: the fixed version; ``buggy_code`` and
``buggy_code_with_docstring``: the buggy one); a condition that shows no code (``model_spec``,
``signature_only``, ``human_docstring``) is filtered on the buggy version, the code a tool would find in
a repository that holds the bug. A test "passes" only with status ``passed`` (failed, error, timeout,
crashed and tampered are discarded, as a tool discards a test that does not pass).

One SQL statement computes the table, over ``test_outcomes``; the asset runs it and the report prints it.
"""

from __future__ import annotations

import pandas as pd

FILTER_VERSION = {"fixed_code": "fixed"}  # every other condition: buggy

TOOL_POLICY_SQL = """\
WITH t AS (
  SELECT condition, thinking, task_id, outcome,
         CASE WHEN condition = 'fixed_code' THEN 'fixed' ELSE 'buggy' END AS filter_version,
         (CASE WHEN condition = 'fixed_code' THEN fixed_status ELSE buggy_status END) = 'passed' AS kept
  FROM test_outcomes
)
SELECT condition, thinking, any_value(filter_version) AS filter_version,
       count(*) AS n_tests,
       count(*) FILTER (WHERE kept) AS n_kept,
       count(*) FILTER (WHERE kept AND outcome = 'misleading') AS kept_misleading,
       count(*) FILTER (WHERE outcome = 'misleading') AS n_misleading,
       count(*) FILTER (WHERE kept AND outcome = 'effective') AS kept_effective,
       count(*) FILTER (WHERE NOT kept AND outcome = 'effective') AS discarded_effective,
       count(*) FILTER (WHERE outcome = 'effective') AS n_effective,
       count(DISTINCT task_id) FILTER (WHERE outcome = 'effective') AS problems_with_effective,
       count(DISTINCT task_id) FILTER (WHERE kept AND outcome = 'effective') AS problems_with_kept_effective,
       count(*) FILTER (WHERE kept AND outcome = 'effective') / nullif(count(*) FILTER (WHERE kept), 0)
         AS kept_bug_revealing_rate,
       count(*) FILTER (WHERE kept AND outcome = 'misleading') / nullif(count(*) FILTER (WHERE kept), 0)
         AS kept_misleading_rate
FROM t GROUP BY condition, thinking ORDER BY thinking, condition"""

INPUT_COLUMNS = ("condition", "thinking", "task_id", "outcome", "buggy_status", "fixed_status")
COLUMNS = ["condition", "thinking", "filter_version", "n_tests", "n_kept", "kept_misleading", "n_misleading",
           "kept_effective", "discarded_effective", "n_effective", "problems_with_effective",
           "problems_with_kept_effective", "kept_bug_revealing_rate", "kept_misleading_rate"]


def tool_policy(test_outcomes: pd.DataFrame) -> pd.DataFrame:
    """The table of TOOL_POLICY_SQL over ``test_outcomes`` (rates NaN where the tool keeps no test)."""
    import duckdb

    con = duckdb.connect(":memory:")
    frame = test_outcomes[list(INPUT_COLUMNS)]
    con.register("test_outcomes", frame)
    df = con.execute(TOOL_POLICY_SQL).df() if len(frame) else pd.DataFrame(columns=COLUMNS)
    con.close()
    for c in COLUMNS[3:12]:
        df[c] = df[c].astype("int64")
    for c in ("kept_bug_revealing_rate", "kept_misleading_rate"):
        df[c] = df[c].astype("float64")
    return df[COLUMNS].reset_index(drop=True)
