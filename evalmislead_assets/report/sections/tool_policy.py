"""Report section "What a pass-on-the-code filter keeps": the tool_policy table (analysis/tool_policy.py).

Registered in section_list. The figures are the ``tool_policy`` asset's rows; the SQL printed under the
table recomputes them from ``test_outcomes``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalmislead_assets.analysis.tool_policy import TOOL_POLICY_SQL
from evalmislead_assets.report.formatting import level_label, md_table, missing

TITLE = "What a pass-on-the-code filter keeps (tool policy)"
TABLES = ("tool_policy",)


def _pct(x: Any) -> str:
    return "not defined (nothing kept)" if x is None or x != x else f"{100 * float(x):.1f} %"


def _pct_ci(x: Any, lo: Any, hi: Any) -> str:
    if missing(x):
        return "not defined (nothing kept)"
    bounds = "" if missing(lo) or missing(hi) else f" [{100 * float(lo):.1f}, {100 * float(hi):.1f}]"
    return f"{100 * float(x):.1f} %{bounds}"


IDENTITY = ("Tools that generate tests (CoverUp-like) keep a test only if it passes on the code it was written "
            "for. Filtered that way (on the version the prompt showed; on the buggy version where no code was "
            "shown, the code a tool would find in a repository that holds the bug), a suite filtered on the buggy "
            "version keeps every misleading test and drops every effective one **by definition**: a misleading "
            "test is one that passes on the buggy version, an effective one fails there. The columns \"misleading "
            "kept / all\" and \"effective discarded / all\" state that identity (all of them, wherever the filter "
            "runs on the buggy version); they are not findings. The finding is the kept suite's composition: the "
            "share of misleading and of bug-revealing tests among the tests kept, with its cluster-adjusted Wilson "
            "interval (tests clustered in problems, as the condition rates). Computed from the stored outcomes, no "
            "new generation.")


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    df = frames.get("tool_policy", pd.DataFrame())
    intro = IDENTITY
    if df is None or df.empty:
        return [intro, "", "Not computed: `tool_policy` has no rows (no test was executed)."]
    has_ci = "kept_misleading_ci_low" in df.columns
    level = df["level"].dropna().iloc[0] if "level" in df.columns and df["level"].notna().any() else None
    label = f" ({level_label(float(level))} interval)" if level is not None else ""
    shown = pd.DataFrame({
        "condition": df["condition"], "thinking": df["thinking"], "filter on": df["filter_version"],
        "tests": df["n_tests"], "kept": df["n_kept"],
        "misleading kept / all": [f"{a} / {b}" for a, b in zip(df["kept_misleading"], df["n_misleading"])],
        "effective discarded / all": [f"{a} / {b}" for a, b in zip(df["discarded_effective"], df["n_effective"])],
        "problems with an effective test: all -> kept": [
            f"{a} -> {b}" for a, b in zip(df["problems_with_effective"], df["problems_with_kept_effective"])],
        f"kept suite misleading{label}": [
            _pct_ci(x, lo, hi) if has_ci else _pct(x)
            for x, lo, hi in zip(df["kept_misleading_rate"], *(
                (df["kept_misleading_ci_low"], df["kept_misleading_ci_high"]) if has_ci else ([None] * len(df),) * 2))],
        f"kept suite bug-revealing{label}": [
            _pct_ci(x, lo, hi) if has_ci else _pct(x)
            for x, lo, hi in zip(df["kept_bug_revealing_rate"], *(
                (df["kept_bug_revealing_ci_low"], df["kept_bug_revealing_ci_high"]) if has_ci
                else ([None] * len(df),) * 2))],
    })
    return [intro, "", md_table(shown), "", "SQL of the counts (over `test_outcomes`; the intervals are computed from "
            "the same rows per problem, analysis/tool_policy.py):", "", "```sql", TOOL_POLICY_SQL, "```"]
