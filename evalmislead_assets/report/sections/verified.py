"""Report section "Verified subset": how many tests the runner vouches for, and every rate with
and without the tests it does not.

A test file inside the verified subset (sandbox/verified_subset.py) can reach nothing of the harness, so
its verdicts are what its assertions produced; a file outside it is still run and scored (``tampered``
stays for what is caught at run time), and its tests are flagged ``unverified`` with the reason. The
section gives, per condition, the verified share of tests and a sensitivity line: the misleading and
effective rates over all tests beside the same rates over verified tests only (condition_rates'
``*_verified`` columns), and the most common reasons a file is outside the subset. Registered in
section_list.py.
"""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.report.formatting import md_table
from evalmislead_assets.store.values import is_missing

TITLE = "Verified subset: rates with and without unverified tests"
TABLES = ("condition_rates", "generated_tests")

SQL = """\
SELECT condition, thinking, n_tests, n_tests_verified,
       round(100.0 * n_tests_verified / n_tests, 1) AS verified_pct,
       round(100 * misleading_rate, 1) AS misleading_pct,
       round(100 * misleading_rate_verified, 1) AS misleading_verified_pct,
       round(100 * effective_rate, 1) AS effective_pct,
       round(100 * effective_rate_verified, 1) AS effective_verified_pct
FROM condition_rates ORDER BY thinking, condition"""
REASONS_SQL = """\
SELECT unverified_reason, count(*) AS files, sum(n_tests) AS tests
FROM generated_tests WHERE verified = false AND n_tests > 0
GROUP BY unverified_reason ORDER BY tests DESC, files DESC LIMIT 10"""

INTRO = (
    "A test file inside the *verified subset* (an allow list of imports, fixtures, builtins and attributes, "
    "checked on the file's syntax tree before it runs: no frames, no dunder or computed attribute access, no "
    "threads, no pytest internals, no file access) can reach nothing of the runner, so its verdicts are what "
    "its own assertions produced. Files outside it are still run and scored, and their tests are flagged "
    "unverified. Each rate is shown over all tests and over verified tests only (a sensitivity line, not a "
    "preregistered comparison): where the two differ, unverified tests move the figure."
)


def _pct(x: object) -> str:
    return "not estimable" if is_missing(x) else f"{100 * float(x):.1f} %"  # type: ignore[arg-type]


def table(rates: pd.DataFrame) -> pd.DataFrame:
    """condition, thinking, tests, verified tests, verified share, the two rates all vs verified only."""
    rows = []
    for r in rates.sort_values(["thinking", "condition"]).itertuples(index=False):
        n, nv = int(r.n_tests), r.n_tests_verified
        checked = not is_missing(nv)
        rows.append({
            "condition": r.condition, "thinking": r.thinking, "tests": n,
            "verified tests": int(nv) if checked else "not checked",
            "verified share": _pct(int(nv) / n if n else float("nan")) if checked else "not checked",
            "misleading (all)": _pct(r.misleading_rate),
            "misleading (verified)": _pct(r.misleading_rate_verified) if checked else "not checked",
            "effective (all)": _pct(r.effective_rate),
            "effective (verified)": _pct(r.effective_rate_verified) if checked else "not checked",
        })
    return pd.DataFrame(rows)


def reasons(generated: pd.DataFrame, limit: int = 10) -> pd.DataFrame:
    """The most common reasons a file with tests is outside the subset: reason, files, tests."""
    cols = ["reason", "files", "tests"]
    if generated is None or generated.empty or "verified" not in generated:
        return pd.DataFrame(columns=cols)
    g = generated[generated["verified"].map(lambda v: not is_missing(v) and not bool(v)).astype(bool)
                  & (pd.to_numeric(generated["n_tests"], errors="coerce").fillna(0) > 0)]
    if g.empty:
        return pd.DataFrame(columns=cols)
    out = g.groupby("unverified_reason").agg(files=("task_id", "size"), tests=("n_tests", "sum")).reset_index()
    out = out.rename(columns={"unverified_reason": "reason"}).sort_values(["tests", "files"], ascending=False)
    return out.head(limit)[cols]


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    rates = frames.get("condition_rates", pd.DataFrame())
    if rates is None or rates.empty or "n_tests_verified" not in rates:
        return [INTRO, "", "Not computed: `condition_rates` has no rows (materialize it)."]
    lines = [INTRO, "", md_table(table(rates))]
    why = reasons(frames.get("generated_tests", pd.DataFrame()))
    if not why.empty:
        lines += ["", "Why files with tests are outside the subset (most tests first):", "", md_table(why)]
    lines += ["", "SQL:", "", "```sql", SQL, "```", "", "```sql", REASONS_SQL, "```"]
    return lines
