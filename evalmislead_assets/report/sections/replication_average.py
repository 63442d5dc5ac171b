"""The replication section on the average over models (report/models.md, several models).

The paper's figures are averages over its model settings, so the models report sets the **mean over
the study's models** (``model_average``: the mean of per-model rates, paired bootstrap) beside them.
Every figure shown comes from one ``model_average`` row, and the SQL printed beside it reads exactly
that row: a comparison's two rates are the mean rates on the same paired problems and models as its
difference (``mean_a``, ``mean_b``), never the rate rows, which cover each condition's own problems.
What the average does not hold (thinking on minus off, problem counts, truncation counts) is said to
be "not averaged over models", not "not estimable": each model's own report has it.

Frames in, Markdown lines out; no Dagster, no DuckDB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from evalmislead_assets.report.sections import replication as rp

NOT_AVERAGED = "not averaged over models"
RATE_METRICS = ("misleading_rate", "effective_rate")
Frames = dict[str, pd.DataFrame]


def why_missing(x: pd.Series | dict[str, Any], how: str) -> str:
    """Why a ``model_average`` row has no ``how`` ('pooled' or 'mean') figure, as it really is: no model has
    rows, no common problem, no tests, or (the mean only) a model without tests, so its rate is not defined."""
    if int(x["n_models"] or 0) == 0:
        return "no rows"
    if int(x["n_problems"] or 0) == 0:
        return "no common problem"
    if not bool(x["estimable"]):
        return "0 tests: not estimable"
    return "not defined: a model has 0 tests" if how == "mean" else ""


def frames(avg: pd.DataFrame) -> Frames:
    """``model_average`` in the shapes the replication section reads: ``bootstrap_comparisons`` (a comparison's
    mean rates a and b, difference and interval, all on its paired problems) and ``condition_rates`` (each
    condition's mean rate). A figure that is not defined for the mean (a model without tests) has no value."""
    if avg.empty:
        return {}
    rates = avg[avg["kind"] == "rate"]
    wide = rates.pivot_table(index=["condition_a", "thinking"], columns="metric", values="mean", aggfunc="first")
    cond = wide.reset_index().rename(columns={"condition_a": "condition"})
    tests = rates.drop_duplicates(["condition_a", "thinking"]).set_index(["condition_a", "thinking"])["n_tests_a"]
    cond["n_tests"] = [tests.get((c, t)) for c, t in zip(cond["condition"], cond["thinking"])]
    for metric in RATE_METRICS:  # why a mean rate is missing, said as it is (a model without tests: not defined)
        why = {(x["condition_a"], x["thinking"]): why_missing(x, "mean")
               for _, x in rates[rates["metric"] == metric].iterrows() if not bool(x["mean_estimable"])}
        cond[f"{metric}_why"] = [why.get((c, t), "") for c, t in zip(cond["condition"], cond["thinking"])]
    comp = avg[avg["kind"] == "comparison"].copy()
    ok = comp["mean_estimable"].astype(bool)
    for src, dst in (("mean_a", "rate_a"), ("mean_b", "rate_b"), ("mean", "estimate"), ("mean_ci_low", "ci_low"),
                     ("mean_ci_high", "ci_high")):
        comp[dst] = comp[src].where(ok)
    comp["why"] = [why_missing(x, "mean") if not bool(x["mean_estimable"]) else "" for _, x in comp.iterrows()]
    return {"bootstrap_comparisons": comp, "condition_rates": cond}


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


@dataclass(frozen=True)
class Average(rp.Source):
    """The replication figures of the mean over ``models`` (model_average), with the SQL that reads each."""

    models: tuple[str, ...] = ()

    def this_run(self, comp: dict[str, Any], frames: Frames) -> dict[str, Any]:
        table = comp["table"]
        if table == "bootstrap_comparisons":
            out = rp.this_run(comp, frames)
            row = rp.row_of(frames.get(table, pd.DataFrame()), {
                k: comp[k] for k in ("thinking", "metric", "condition_a", "condition_b")})
            if row is not None and row.get("why"):
                out["absent"] = row["why"]
            where = {"kind": "comparison", "thinking": comp["thinking"], "metric": comp["metric"],
                     "condition_a": comp["condition_a"], "condition_b": comp["condition_b"]}
            out["sql"] = ("SELECT mean_a AS rate_a, mean_b AS rate_b, mean AS estimate, mean_ci_low AS ci_low, "
                          "mean_ci_high AS ci_high, n_tests_a, n_tests_b FROM model_average WHERE "
                          f"{rp.where_sql(where)};")
            return out
        if table == "condition_rates":  # two rate rows: their difference, no interval
            out = rp.from_rates(comp, frames.get("condition_rates", pd.DataFrame()))
            metric = comp["metric"]
            out["sql"] = (f"SELECT condition_a AS condition, mean AS {metric}, n_tests_a AS n_tests FROM model_average "
                          f"WHERE kind = 'rate' AND thinking = '{comp['thinking']}' AND metric = '{metric}' AND "
                          f"condition_a IN ({_in((comp['condition_a'], comp['condition_b']))});")
            return out
        return {"a": None, "b": None, "d": None, "lo": None, "hi": None, "n_a": None, "n_b": None,
                "absent": NOT_AVERAGED,
                "sql": f"-- {NOT_AVERAGED}: each model's own report reads it from {table}"}

    @staticmethod
    def _averaged(spec: dict[str, Any]) -> bool:
        return spec["table"] == "condition_rates" and len(spec["columns"]) == 1 and spec["columns"][0] in RATE_METRICS

    def figure(self, f: dict[str, Any], spec: dict[str, Any], frames: Frames) -> str:
        if not self._averaged(spec):
            return NOT_AVERAGED
        row = rp.row_of(frames.get("condition_rates", pd.DataFrame()), spec["where"])
        why = "" if row is None else row.get(f"{spec['columns'][0]}_why", "")
        return why or rp.figure_value(f, spec, frames)

    def figure_sql(self, spec: dict[str, Any]) -> str:
        if not self._averaged(spec):
            return f"-- {NOT_AVERAGED}: each model's own report reads it from {spec['table']}"
        where = spec["where"]
        return (f"SELECT mean AS {spec['columns'][0]} FROM model_average WHERE kind = 'rate' AND "
                f"condition_a = '{where['condition']}' AND thinking = '{where['thinking']}' AND "
                f"metric = '{spec['columns'][0]}';")

    def recompute_sql(self) -> str:
        among = f"WHERE model_name IN ({_in(self.models)}) " if self.models else ""
        return ("-- each model's pooled rates, recomputed from its executed tests (same as model_rates)\n"
                "SELECT model_name, condition, thinking, count(*) AS n_tests,\n"
                "       avg((outcome = 'misleading')::INT) AS misleading_rate,\n"
                "       avg((outcome = 'effective')::INT) AS effective_rate,\n"
                "       count(DISTINCT task_id) FILTER (WHERE outcome = 'effective') AS problems_with_effective\n"
                f"FROM test_outcomes {among}GROUP BY model_name, condition, thinking "
                "ORDER BY model_name, thinking, condition;")


def section(avg: pd.DataFrame, models: list[str], published: dict[str, Any] | None = None) -> list[str]:
    """The replication section's lines on the mean over ``models``."""
    return rp.section(frames(avg), published, Average(tuple(models)))
