"""The report's opening: its result in a few lines, generated from the stored rows.

The primary thinking mode's comparisons with their verdicts (every comparison of the plan, a missing one named),
the largest misleading and effective rates, and the misleading worked example (report.worked_example): one test
that passes on the buggy version and fails on the fixed one, with its assertion. A rate over 0 tests is "not
estimable", never 0.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalmislead_assets.analysis.plan import Plan
from evalmislead_assets.report.formatting import ci, level_label, missing, pct, points

ReportData = Any  # report.build.ReportData (build imports this module)


def _with_tests(rates: pd.DataFrame) -> pd.DataFrame:
    return rates[rates["n_tests"].fillna(0).astype(int) > 0]


def largest(rates: pd.DataFrame, cell: str) -> str:
    """'`buggy_code` 11.7 % [8.0, 16.8] (12/103 tests)', the condition with the largest ``cell`` rate among those
    with tests; 'not estimable (no condition has tests)' when none has any."""
    r = _with_tests(rates)
    r = r[r[f"{cell}_rate"].notna()]
    if r.empty:
        return "not estimable (no condition has tests)"
    if int(r[f"n_{cell}"].fillna(0).sum()) == 0:
        return f"none: no {cell} test among the {int(r['n_tests'].sum())} tests of {len(r)} conditions"
    x = r.sort_values([f"{cell}_rate", "condition"], ascending=[False, True]).iloc[0]
    return (f"`{x['condition']}` {pct(x[f'{cell}_rate'])} {ci(x[f'{cell}_ci_low'], x[f'{cell}_ci_high'], False)} "
            f"({int(x[f'n_{cell}'])}/{int(x['n_tests'])} tests)")


def verdict_lines(comp: pd.DataFrame, plan: Plan) -> list[str]:
    """One bullet per comparison of the plan: its difference, interval and verdict, or why it has none."""
    mode = plan.primary_thinking
    c = comp[comp["thinking"] == mode].set_index("comparison_id") if len(comp) else pd.DataFrame()
    out = []
    for spec in plan.comparisons:
        what = f"#{spec['id']} {str(spec['metric']).replace('_', ' ')}, `{spec['condition_a']}` − `{spec['condition_b']}`"
        if spec["id"] not in c.index:
            out.append(f"- {what}: not computed (no stored rows; its conditions were not run or not analysed).")
            continue
        x = c.loc[spec["id"]]
        empty = any(missing(x.get(k)) or int(x.get(k)) == 0 for k in ("n_tests_a", "n_tests_b"))
        if empty or missing(x["estimate"]):
            out.append(f"- {what}: not estimable ({x['verdict']}).")
        else:
            out.append(f"- {what}: {points(x['estimate'])} points {ci(x['ci_low'], x['ci_high'])}: {x['verdict']}.")
    return out


def example_line(data: ReportData, mode: str) -> str:
    x = data.misleading_examples.get(mode)
    if x is None:
        return (f"No misleading test is stored for thinking {mode}: no generated test passes on the buggy version "
                "and fails on the fixed one.")
    asserts = x.assertion(2)
    said = f" It asserts `{' / '.join(asserts)}`." if asserts else ""
    return (f"A misleading test, the worked example: `{x.test_id}` for `{x.entry_point}` ({x.task_id}, condition "
            f"`{x.condition}`) {x.buggy_status} on the buggy version and {x.fixed_status} on the fixed one, so it "
            f"locks the bug in.{said} (Section 7 shows a problem's tests in full.)")


def render(data: ReportData, plan: Plan) -> list[str]:
    """The report's opening lines."""
    mode = plan.primary_thinking
    rates = data.condition_rates
    primary = rates[rates["thinking"] == mode] if len(rates) else rates
    if primary.empty:
        return [f"**Result.** No thinking-{mode} rates are stored yet: nothing to summarise (run the study, or "
                "materialize `condition_rates` and `bootstrap_comparisons`)."]
    n_tests = int(primary["n_tests"].fillna(0).sum())
    problems = f"{data.study_problems} problems, " if data.study_problems is not None else ""
    head = (f"**Result** (thinking {mode}, the primary analysis; {problems}{n_tests} executed tests over "
            f"{len(primary)} conditions). The largest misleading rate: {largest(primary, 'misleading')}; the "
            f"largest effective rate: {largest(primary, 'effective')} ({level_label(plan.level)} cluster-adjusted "
            f"Wilson intervals). The four primary comparisons (paired bootstrap, {level_label(plan.level)} "
            "intervals; a difference is claimed only where the interval excludes 0):")
    return [head, "", *verdict_lines(data.bootstrap_comparisons, plan), "", example_line(data, mode)]
