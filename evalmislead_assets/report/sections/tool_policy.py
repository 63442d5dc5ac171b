"""Report section "What a pass-on-the-code filter keeps": the tool_policy table (analysis/tool_policy.py).

Registered in section_list. The figures are the ``tool_policy`` asset's rows; the SQL printed under the
table recomputes them from ``test_outcomes``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalmislead_assets.analysis.tool_policy import TOOL_POLICY_SQL
from evalmislead_assets.report.formatting import md_table

TITLE = "What a pass-on-the-code filter keeps (tool policy)"
TABLES = ("tool_policy",)


def _pct(x: Any) -> str:
    return "not defined (nothing kept)" if x is None or x != x else f"{100 * float(x):.1f} %"


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    df = frames.get("tool_policy", pd.DataFrame())
    intro = ("Tools that generate tests (CoverUp-like) keep a test only if it passes on the code it was written "
             "for. Filtered that way (on the version the prompt showed; on the buggy version where no code was "
             "shown, the code a tool would find in a repository that holds the bug), each condition's suite keeps "
             "its misleading tests and loses its effective ones. Computed from the stored outcomes, no new "
             "generation.")
    if df is None or df.empty:
        return [intro, "", "Not computed: `tool_policy` has no rows (no test was executed)."]
    shown = pd.DataFrame({
        "condition": df["condition"], "thinking": df["thinking"], "filter on": df["filter_version"],
        "tests": df["n_tests"], "kept": df["n_kept"],
        "misleading kept / all": [f"{a} / {b}" for a, b in zip(df["kept_misleading"], df["n_misleading"])],
        "effective discarded / all": [f"{a} / {b}" for a, b in zip(df["discarded_effective"], df["n_effective"])],
        "problems with an effective test: all -> kept": [
            f"{a} -> {b}" for a, b in zip(df["problems_with_effective"], df["problems_with_kept_effective"])],
        "kept suite bug-revealing": [_pct(x) for x in df["kept_bug_revealing_rate"]],
        "kept suite misleading": [_pct(x) for x in df["kept_misleading_rate"]],
    })
    return [intro, "", md_table(shown), "", "SQL (over `test_outcomes`):", "", "```sql", TOOL_POLICY_SQL, "```"]
