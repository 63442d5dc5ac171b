"""Report section "Tests that ended on a runner limit": per condition, the tests whose run ended on one of
the runner's caps on either version (a ``limit:*`` status: the output cap, memory, the file-size cap, the
process cap, the run's disk; sandbox/limits.py) and so have the outcome ``limit``: counted among the tests,
in none of the four cells, never misleading or effective. Plain pytest has none of these caps, so what such
a test asserts is unknown. Registered in report_sections.
"""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.report.formatting import md_table

TITLE = "Tests that ended on a runner limit"
TABLES = ("test_outcomes",)

SQL = """\
SELECT condition, thinking, count(*) AS tests,
       count(*) FILTER (WHERE outcome = 'limit') AS ended_on_a_limit,
       count(*) FILTER (WHERE buggy_status LIKE 'limit:%') AS limit_on_buggy,
       count(*) FILTER (WHERE fixed_status LIKE 'limit:%') AS limit_on_fixed
FROM test_outcomes GROUP BY condition, thinking ORDER BY thinking, condition"""
KINDS_SQL = """\
SELECT status, count(*) AS runs FROM (
  SELECT buggy_status AS status FROM test_outcomes UNION ALL SELECT fixed_status FROM test_outcomes
) WHERE status LIKE 'limit:%' GROUP BY status ORDER BY status"""


def counts(outcomes: pd.DataFrame) -> pd.DataFrame:
    """condition, thinking, tests, ended on a limit, and on which version (the section's table)."""
    cols = ["condition", "thinking", "tests", "ended on a limit", "limit on buggy", "limit on fixed"]
    if outcomes is None or outcomes.empty:
        return pd.DataFrame(columns=cols)
    on = {v: outcomes[f"{v}_status"].astype(str).str.startswith("limit:") for v in ("buggy", "fixed")}
    rows = []
    for (cond, think), g in outcomes.groupby(["condition", "thinking"]):
        rows.append({"condition": cond, "thinking": think, "tests": len(g),
                     "ended on a limit": int((g["outcome"] == "limit").sum()),
                     "limit on buggy": int(on["buggy"][g.index].sum()), "limit on fixed": int(on["fixed"][g.index].sum())})
    return pd.DataFrame(rows, columns=cols).sort_values(["thinking", "condition"]).reset_index(drop=True)


def kinds(outcomes: pd.DataFrame) -> dict[str, int]:
    """Runs per limit status, both versions together."""
    if outcomes is None or outcomes.empty:
        return {}
    both = pd.concat([outcomes["buggy_status"], outcomes["fixed_status"]]).astype(str)
    hit = both[both.str.startswith("limit:")]
    return {str(k): int(v) for k, v in sorted(hit.value_counts().items())}


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    outcomes = frames.get("test_outcomes", pd.DataFrame())
    intro = ("A run that ends on one of the runner's caps (its output over the output cap, memory, a file over the "
             "file-size cap, a process or thread refused, the run's disk full) is stored with a status of its own "
             "(`limit:output`, `limit:memory`, `limit:fsize`, `limit:nproc`, `limit:disk`). Plain pytest has no such "
             "caps, so a test with a limit status on either version has the outcome `limit`: it counts among the "
             "tests (every rate's denominator) but is never misleading, effective, both pass or both fail. The time "
             "limit is the protocol's own (10 s per test) and stays `timeout`, a non-pass.")
    if outcomes is None or outcomes.empty:
        return [intro, "", "Not computed: `test_outcomes` has no rows."]
    table = counts(outcomes)
    lines = [intro, "", md_table(table)]
    found = kinds(outcomes)
    lines += ["", "Runs per limit: " + (", ".join(f"`{k}` {v}" for k, v in found.items()) if found else "none") + "."]
    lines += ["", "SQL:", "", "```sql", SQL, "```", "", "```sql", KINDS_SQL, "```"]
    return lines
