"""The worked example: one stored test shown with its status on the buggy and the fixed version.

One selection, used by the console's closing lines (cli/summary.py), the README's Results (results.py) and the
study report's summary paragraph (build.py): Python first, a misleading test first (passes on the buggy version,
fails on the fixed one), then `buggy_code` first, task 30 (the protocol's worked example) first, then the models
in the study's order, thinking off before on, and task and test id. ``query(sql, params)`` reads the rows: a
Warehouse's ``query_df`` or a report's in-memory ``ReportSource``, so the SQL reads tables only (no view).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from evalmislead_assets.report.tables import EXAMPLE_TASK, test_body

Query = Callable[..., pd.DataFrame]

# the same rows as the `misleading_tests` view (store/views.py) with the statuses and the function under test;
# {where} and {model_order} are filled by ``pick``
SQL = """
SELECT o.model_name, o.condition, o.thinking, o.task_id, o.test_id, o.buggy_status, o.fixed_status, o.outcome,
       g.source, p.entry_point, p.buggy_code, p.fixed_code
FROM test_outcomes o
JOIN generated_tests g ON g.model_name IS NOT DISTINCT FROM o.model_name AND g.condition = o.condition
     AND g.thinking = o.thinking AND g.task_id = o.task_id
JOIN problems p ON p.task_id = o.task_id
WHERE {where}
ORDER BY coalesce(o.language, 'python') <> 'python', o.outcome <> 'misleading', o.condition <> 'buggy_code',
         o.task_id <> '""" + EXAMPLE_TASK + """', {model_order}o.thinking, o.task_id, o.test_id
LIMIT 1"""


@dataclass(frozen=True)
class Example:
    """The chosen test: where it is, its two statuses and cell, the test file and the problem's two versions."""

    model_name: str | None
    condition: str
    thinking: str
    task_id: str
    test_id: str
    buggy_status: str
    fixed_status: str
    outcome: str
    source: str | None
    entry_point: str | None
    buggy_code: str | None
    fixed_code: str | None

    @property
    def misleading(self) -> bool:
        return self.outcome == "misleading"

    def body(self) -> str | None:
        """The test function's source (None when the file does not parse or has no function of that name)."""
        return test_body(self.source, self.test_id)

    def assertion(self, limit: int = 4) -> list[str]:
        """The test's assertion lines (stripped; the body's lines when it has no assert or raises)."""
        body = self.body()
        if not body:
            return []
        lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
        asserts = [ln for ln in lines if "assert" in ln or "raises" in ln] or lines[1:]
        return asserts[:limit]


def pick(query: Query, *, thinking: str | None = None, models: list[str] | None = None,
         unnamed: str | None = None, misleading_only: bool = False, python_only: bool = False) -> Example | None:
    """The worked example, or None when no test matches. ``thinking``: that mode only; ``models``: those models'
    rows only, in that order (``unnamed``: whose rows without a model are); ``misleading_only``: None when no
    misleading test is stored; ``python_only``: Python's tests only."""
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    order = ""
    if misleading_only:
        where.append("o.outcome = 'misleading'")
    if python_only:
        where.append("coalesce(o.language, 'python') = 'python'")
    if thinking is not None:
        where.append("o.thinking = ?")
        params.append(thinking)
    if models:
        where.append("list_contains(?, coalesce(o.model_name, ?))")
        params += [models, unnamed]
        order = "list_position(?, coalesce(o.model_name, ?)), "
    sql = SQL.format(where=" AND ".join(where), model_order=order)
    row = query(sql, params + ([models, unnamed] if models else []))
    if row.empty:
        return None
    x: dict[str, Any] = row.iloc[0].to_dict()
    text = lambda v: None if v is None or (isinstance(v, float) and v != v) else str(v)  # noqa: E731
    return Example(
        model_name=text(x["model_name"]), condition=str(x["condition"]), thinking=str(x["thinking"]),
        task_id=str(x["task_id"]), test_id=str(x["test_id"]), buggy_status=str(x["buggy_status"]),
        fixed_status=str(x["fixed_status"]), outcome=str(x["outcome"]), source=text(x["source"]),
        entry_point=text(x["entry_point"]), buggy_code=text(x["buggy_code"]), fixed_code=text(x["fixed_code"]))
