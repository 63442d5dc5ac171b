"""Report section "Repetition loops": each condition's pooled rates (first, as preregistered), then with exact
copies counted once, the top problem's share of each cell's tests, and what loop answers hold, from
``repetition_rates`` (analysis/repetition.py). Registered in section_list."""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalmislead_assets.report.formatting import md_table, missing, pct

TITLE = "Repetition loops: rates with copies counted once, and the top problem's share (report-only)"
TABLES = ("repetition_rates",)

INTRO = ("At temperature 0 a small model often falls into a loop and writes one test again and again until the "
         "output cap cuts the answer; every copy is scored. The preregistered pooled rates (first two rate "
         "columns, unchanged) count every copy. Beside them: the same rates with each exact copy (a test whose "
         "body, whitespace normalised, repeats an earlier test's in the same answer: `test_repeats.duplicate_of`) "
         "counted once; the share of each cell's tests that come from its top problem; and the tests of answers "
         "cut at the cap while repeating (`answer_repeats.loop`). Report-only (plan amendment of 2026-12-07): "
         "conditions are ranked by the pooled rates only with this table in view.")


def _top(task: Any, n: Any, share: Any) -> str:
    return "–" if missing(task) else f"{task}: {int(n)} ({pct(share)})"


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    df = frames.get("repetition_rates", pd.DataFrame())
    if df is None or df.empty:
        return [INTRO, "", "Not computed: `repetition_rates` has no rows (no test was scored)."]
    shown = pd.DataFrame([{
        "condition": x["condition"], "thinking": x["thinking"],
        "misleading rate (pooled)": f"{pct(x['misleading_rate'])} ({x['n_misleading']}/{x['n_tests']})",
        "effective rate (pooled)": f"{pct(x['effective_rate'])} ({x['n_effective']}/{x['n_tests']})",
        "misleading, copies once": f"{pct(x['misleading_rate_distinct'])} "
                                   f"({x['n_misleading_distinct']}/{x['n_tests_distinct']})",
        "effective, copies once": f"{pct(x['effective_rate_distinct'])} "
                                  f"({x['n_effective_distinct']}/{x['n_tests_distinct']})",
        "top problem, misleading": _top(x["top_misleading_task"], x["top_misleading_n"], x["top_misleading_share"]),
        "top problem, effective": _top(x["top_effective_task"], x["top_effective_n"], x["top_effective_share"]),
        "answers with tests: cut in a loop / all": f"{x['n_loop_answers']} / {x['n_answers_with_tests']}",
        "misleading / effective in loops": f"{x['n_misleading_in_loops']} / {x['n_effective_in_loops']}",
    } for _, x in df.sort_values(["thinking", "condition"], kind="stable").iterrows()])
    return [INTRO, "", md_table(shown), "",
            "SQL (the copies-once rates from the per-test table): `SELECT condition, thinking, count(*) FILTER (WHERE "
            "outcome = 'misleading') / count(*) AS misleading_rate_distinct FROM test_repeats WHERE duplicate_of IS "
            "NULL GROUP BY ALL ORDER BY ALL`."]
