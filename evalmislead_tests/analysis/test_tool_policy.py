"""The tool-policy view: a filter that keeps tests passing on the code keeps misleading tests, drops effective ones."""

from __future__ import annotations

import math

import duckdb
import pandas as pd

from evalmislead_assets.analysis.tool_policy import TOOL_POLICY_SQL, tool_policy
from evalmislead_assets.execution.cells import outcome
from evalmislead_assets.report.sections.tool_policy import render


def _row(cond: str, task: str, buggy: str, fixed: str) -> dict:
    cell = outcome(buggy, fixed)
    return {"condition": cond, "thinking": "off", "task_id": task, "test_id": f"t{buggy}{fixed}",
            "buggy_status": buggy, "fixed_status": fixed, "outcome": cell}


OUTCOMES = pd.DataFrame([
    _row("buggy_code", "Python/1", "passed", "failed"),   # misleading: kept on buggy
    _row("buggy_code", "Python/1", "failed", "passed"),   # effective: discarded on buggy
    _row("buggy_code", "Python/2", "passed", "passed"),   # both pass: kept
    _row("buggy_code", "Python/2", "error", "passed"),    # effective (error on buggy): discarded
    _row("fixed_code", "Python/1", "failed", "passed"),   # effective: kept on fixed
    _row("fixed_code", "Python/1", "passed", "failed"),   # misleading: discarded on fixed
    _row("model_spec", "Python/3", "failed", "passed"),   # no code shown: filtered on buggy, discarded
])


def test_policy_counts_by_hand():
    df = tool_policy(OUTCOMES).set_index("condition")
    b = df.loc["buggy_code"]
    assert (b.filter_version, b.n_tests, b.n_kept, b.kept_misleading, b.discarded_effective, b.n_effective) == (
        "buggy", 4, 2, 1, 2, 2)
    assert b.kept_bug_revealing_rate == 0.0 and b.kept_misleading_rate == 0.5
    assert (b.problems_with_effective, b.problems_with_kept_effective) == (2, 0)
    f = df.loc["fixed_code"]
    assert (f.filter_version, f.n_kept, f.kept_effective, f.kept_misleading, f.discarded_effective) == (
        "fixed", 1, 1, 0, 0)
    assert f.kept_bug_revealing_rate == 1.0
    m = df.loc["model_spec"]
    assert m.filter_version == "buggy" and m.n_kept == 0 and math.isnan(m.kept_bug_revealing_rate)


def test_printed_sql_returns_the_table_and_the_section_says_not_defined():
    con = duckdb.connect(":memory:")
    con.register("test_outcomes", OUTCOMES)
    direct = con.execute(TOOL_POLICY_SQL).df()
    mine = tool_policy(OUTCOMES)
    counts = [c for c in mine.columns if c in direct.columns]  # the intervals come from the same rows per problem
    assert len(counts) == 14
    pd.testing.assert_frame_equal(direct[counts].astype(mine[counts].dtypes.to_dict()), mine[counts])
    text = "\n".join(render({"tool_policy": mine}))
    assert "not defined (nothing kept)" in text and "1 / 1" in text and TOOL_POLICY_SQL in text
    assert "by definition" in text and "not findings" in text
    assert "no rows" in "\n".join(render({"tool_policy": tool_policy(OUTCOMES.iloc[0:0])}))


def test_kept_suite_composition_has_a_cluster_interval():
    df = tool_policy(OUTCOMES, level=0.9875).set_index("condition")
    b = df.loc["buggy_code"]  # kept: one misleading and one both-pass test, in problems 0 and 1
    assert b.level == 0.9875
    assert 0.0 < b.kept_misleading_ci_low < 0.5 < b.kept_misleading_ci_high < 1.0
    assert b.kept_bug_revealing_ci_low == 0.0 and 0.0 < b.kept_bug_revealing_ci_high < 1.0
    m = df.loc["model_spec"]  # nothing kept: no interval
    assert math.isnan(m.kept_misleading_ci_low) and math.isnan(m.kept_bug_revealing_ci_high)
    text = "\n".join(render({"tool_policy": tool_policy(OUTCOMES)}))
    assert f"50.0 % [{100 * b.kept_misleading_ci_low:.1f}, {100 * b.kept_misleading_ci_high:.1f}]" in text
