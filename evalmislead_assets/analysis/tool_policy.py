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

What is a finding and what is not: the filter keeps a test exactly when it passes on the filter's version.
For a condition filtered on the buggy version, a misleading test passes on the buggy version and an effective
one fails there, by definition of the cells, so the filter keeps every misleading test and drops every
effective one: "kept misleading / all" = 100 % and "effective discarded / all" = 100 % are identities, not
measurements. The finding is the kept suite's composition: the share of misleading (and bug-revealing) tests
among those kept, with a cluster-adjusted Wilson interval (tests clustered in problems, as the condition rates;
analysis/rate_interval.py) at the level given (the plan's).

One SQL statement computes the counts, over ``test_outcomes``; the asset runs it and the report prints it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalmislead_assets.analysis.rate_interval import cluster_wilson

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
           "problems_with_kept_effective", "kept_bug_revealing_rate", "kept_misleading_rate",
           "kept_misleading_ci_low", "kept_misleading_ci_high", "kept_bug_revealing_ci_low",
           "kept_bug_revealing_ci_high", "level"]
DEFAULT_LEVEL = 0.9875  # the plan's level; the asset passes the plan's own


def _kept(o: pd.DataFrame) -> pd.Series:
    status = np.where(o["condition"] == "fixed_code", o["fixed_status"], o["buggy_status"])
    return pd.Series(status == "passed", index=o.index)


def kept_intervals(test_outcomes: pd.DataFrame, condition: str, thinking: str, level: float) -> dict[str, float]:
    """The kept suite's misleading and bug-revealing shares with cluster-adjusted Wilson intervals (per-problem
    counts of the kept tests; NaN when nothing is kept)."""
    o = test_outcomes[(test_outcomes["condition"] == condition) & (test_outcomes["thinking"] == thinking)]
    o = o[_kept(o)]
    nan = float("nan")
    if o.empty:
        return {"kept_misleading_ci_low": nan, "kept_misleading_ci_high": nan,
                "kept_bug_revealing_ci_low": nan, "kept_bug_revealing_ci_high": nan}
    per = pd.DataFrame({"task_id": o["task_id"], "m": (o["outcome"] == "misleading").astype(int),
                        "e": (o["outcome"] == "effective").astype(int), "n": 1}).groupby("task_id").sum()
    mis = cluster_wilson(per["m"].to_numpy(), per["n"].to_numpy(), level)
    eff = cluster_wilson(per["e"].to_numpy(), per["n"].to_numpy(), level)
    return {"kept_misleading_ci_low": mis.ci_low, "kept_misleading_ci_high": mis.ci_high,
            "kept_bug_revealing_ci_low": eff.ci_low, "kept_bug_revealing_ci_high": eff.ci_high}


def tool_policy(test_outcomes: pd.DataFrame, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """The table of TOOL_POLICY_SQL over ``test_outcomes`` (rates NaN where the tool keeps no test), with the
    kept suite's intervals at ``level``."""
    import duckdb

    con = duckdb.connect(":memory:")
    frame = test_outcomes[list(INPUT_COLUMNS)]
    con.register("test_outcomes", frame)
    df = con.execute(TOOL_POLICY_SQL).df() if len(frame) else pd.DataFrame(columns=COLUMNS[:14])
    con.close()
    ivs = [kept_intervals(frame, c, t, level) for c, t in zip(df["condition"], df["thinking"])]
    for c in COLUMNS[14:18]:
        df[c] = pd.Series([iv[c] for iv in ivs], index=df.index, dtype="float64")
    df["level"] = float(level)
    for c in COLUMNS[3:12]:
        df[c] = df[c].astype("int64")
    for c in ("kept_bug_revealing_rate", "kept_misleading_rate"):
        df[c] = df[c].astype("float64")
    return df[COLUMNS].reset_index(drop=True)
