"""The consistency check's comparison: which values count as the same, and which row a disagreement names."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalmislead_assets import settings
from evalmislead_assets.analysis import rates
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.report.package_consistency import check_tables, compare_table, same


def test_same_reads_null_and_nan_alike_and_floats_within_the_tolerance() -> None:
    assert same(None, float("nan")) and same(np.float64("nan"), pd.NA)
    assert same(0.1 + 0.2, 0.3) and same(np.int32(3), 3.0) and same(np.bool_(True), True)
    assert same(np.array(["a", "b"]), ["a", "b"])
    # and a real difference is one
    assert not same(0.3, 0.3 + 1e-6) and not same(None, 0.0) and not same("a", "b") and not same(True, False)
    assert not same(["a"], ["a", "b"])
    assert not same(float("nan"), 0.0)


def test_compare_table_names_the_row_the_column_and_both_values() -> None:
    stored = pd.DataFrame({"condition": ["a", "b"], "thinking": ["off", "off"], "n": [1, 2], "r": [0.5, 0.25]})
    key = ("condition", "thinking")
    assert compare_table("t", key, stored, stored.copy()) is None
    again = stored.assign(r=[0.5, 0.2])
    d = compare_table("t", key, stored, again)
    assert d is not None and d.line() == "t row condition=b, thinking=off: r stored 0.25, recomputed 0.2"
    d = compare_table("t", key, stored.iloc[:1], stored)
    assert d is not None and d.line() == "t row condition=b, thinking=off: row stored NULL, recomputed 'present'"
    d = compare_table("t", key, stored, stored.iloc[1:])
    assert d is not None and (d.row, d.column) == ("condition=a, thinking=off", "row")
    d = compare_table("t", key, pd.concat([stored, stored.iloc[:1]]), stored)
    assert d is not None and (d.row, d.stored) == ("condition=a, thinking=off", "twice")


def _upstream(model: str) -> dict[str, pd.DataFrame]:
    rows = []
    for cond in ("buggy_code", "fixed_code"):
        for i in range(4):
            for k, (b, f, o) in enumerate([("passed", "failed", "misleading"), ("failed", "passed", "effective")][: 1 + i % 2]):
                rows.append({"model_name": model, "language": "python", "condition": cond, "thinking": "off",
                             "task_id": f"Python/{i}", "problem_idx": i, "test_id": f"test_{k}",
                             "buggy_status": b, "fixed_status": f, "outcome": o})
    outcomes = pd.DataFrame(rows)
    return {"test_outcomes": outcomes, "test_generations": pd.DataFrame(
        {"model_name": model, "language": "python", "condition": outcomes["condition"], "thinking": "off",
         "task_id": outcomes["task_id"], "problem_idx": outcomes["problem_idx"], "finish_reason": "stop",
         "error": None, "template_sha256": "t", "model": model, "max_tokens": 100, "response_text": ""}
    ).drop_duplicates(["condition", "task_id"]), "generated_tests": pd.DataFrame(
        {"model_name": model, "language": "python", "condition": outcomes["condition"], "thinking": "off",
         "task_id": outcomes["task_id"], "problem_idx": outcomes["problem_idx"], "n_tests": 1, "import_ok": True,
         "error": None, "has_code": True, "verified": None, "source": None, "test_ids": None}
    ).drop_duplicates(["condition", "task_id"])}


def test_each_model_is_recomputed_from_its_own_rows_and_named_in_the_line() -> None:
    plan = load_plan(settings.analysis_plan_path())
    parts = {m: _upstream(m) for m in ("a", "b")}
    inputs = {t: pd.concat([parts[m][t] for m in parts], ignore_index=True) for t in parts["a"]}
    stored = pd.concat([rates.condition_rates(parts[m]["test_outcomes"], parts[m]["test_generations"],
                                              parts[m]["generated_tests"], plan).assign(model_name=m, language="python")
                        for m in parts], ignore_index=True)
    ok = check_tables(inputs, pd.DataFrame(), {"condition_rates": stored}, plan)
    assert ok.ok and ok.rows == {"test_outcomes": len(inputs["test_outcomes"]), "condition_rates": 4}
    assert "bootstrap_comparisons" in ok.not_stored
    # model b's row edited: named with its model; model a's rows alone would not show it
    edited = stored.copy()
    edited.loc[(edited["model_name"] == "b") & (edited["condition"] == "fixed_code"), "n_effective"] += 1
    bad = check_tables(inputs, pd.DataFrame(), {"condition_rates": edited}, plan)
    assert bad.first is not None
    assert bad.first.line().startswith("condition_rates row model=b, language=python, condition=fixed_code, "
                                       "thinking=off: n_effective stored ")
