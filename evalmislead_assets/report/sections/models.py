"""Report section "Models side by side": per-model rates and comparisons, the average over models, model size.

Reads the tables of analysis/cross_model.py (``model_rates``, ``model_comparisons``,
``model_average``, ``model_sizes``); frames in, Markdown lines out (the section_list
convention: ``render(frames) -> list[str]``). A missing or empty table is said so, never
drawn as zeros; a rate over zero tests reads "not estimable", and an average without a figure says why
(replication_average.why_missing: no rows, no common problem, 0 tests, a mean not defined).
"""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.analysis import cross_model
from evalmislead_assets.report.formatting import ci, level_label, mc_se, md_table, missing, pct, points, rate_with_ci
from evalmislead_assets.report.sections.replication_average import why_missing
from evalmislead_assets.report.tables import comparison_table
from evalmislead_assets.study.conditions import THINKING_MODES

TITLE = "Models side by side"
TABLES = ("model_rates", "model_comparisons", "model_average", "model_sizes")
NOT_ESTIMABLE = "not estimable"

Frames = dict[str, pd.DataFrame]


def _get(frames: Frames, name: str) -> pd.DataFrame:
    df = frames.get(name)
    return pd.DataFrame() if df is None else df


def _level(*dfs: pd.DataFrame) -> str:
    for df in dfs:
        if not df.empty and "level" in df.columns and not missing(df["level"].iloc[0]):
            return level_label(float(df["level"].iloc[0]))
    return "98.75 %"


def rates_rows(rates: pd.DataFrame, thinking: str) -> pd.DataFrame:
    """model × condition: the four cells and both rates with their intervals."""
    r = rates[rates["thinking"] == thinking]
    return pd.DataFrame([{
        "model": x[cross_model.MODEL], "condition": x["condition"], "problems": x["n_problems"], "tests": x["n_tests"],
        "misleading": x["n_misleading"], "effective": x["n_effective"], "both pass": x["n_both_pass"],
        "both fail": x["n_both_fail"],
        "misleading rate": rate_with_ci(x["misleading_rate"], x["misleading_ci_low"], x["misleading_ci_high"],
                                        x["n_tests"]),
        "effective rate": rate_with_ci(x["effective_rate"], x["effective_ci_low"], x["effective_ci_high"],
                                       x["n_tests"]),
    } for _, x in r.iterrows()])


def comparison_rows(comp: pd.DataFrame, thinking: str) -> pd.DataFrame:
    """Each model's comparisons (report.tables.comparison_table), with the model first."""
    parts = []
    for model, c in comp[comp["thinking"] == thinking].groupby(cross_model.MODEL, sort=False):
        t = comparison_table(c, thinking)
        t.insert(0, "model", model)
        parts.append(t)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _value(x: pd.Series, how: str, as_points: bool) -> str:
    ok = bool(x["estimable"]) if how == "pooled" else bool(x["mean_estimable"])
    if not ok or missing(x[how]):
        return why_missing(x, how) or NOT_ESTIMABLE
    f = points if as_points else pct
    return f"{f(x[how])} {ci(x[f'{how}_ci_low'], x[f'{how}_ci_high'], as_points)}"


def _excludes(x: pd.Series, how: str) -> str:
    """'yes' / 'no' for a comparison's interval; a report-only comparison (thinking on) is marked so."""
    ok = bool(x["estimable"]) if how == "pooled" else bool(x["mean_estimable"])
    if x["kind"] != "comparison" or not ok:
        return ""
    text = "yes" if bool(x[f"{how}_excludes_zero"]) else "no"
    return f"{text} (report-only)" if x.get("role") == "report-only" else text


def _missing_models(names: object) -> str:
    return f" (missing: {names})" if isinstance(names, str) and names else ""


def average_rows(avg: pd.DataFrame, thinking: str) -> pd.DataFrame:
    """The average over models: rates, then comparisons (a − b, in points)."""
    a = avg[avg["thinking"] == thinking]
    rows = []
    for _, x in a.iterrows():
        is_comp = x["kind"] == "comparison"
        rows.append({
            "#": "" if not is_comp or missing(x["comparison_id"]) else str(int(x["comparison_id"])),
            "metric": str(x["metric"]).replace("_", " "),
            "condition": f"{x['condition_a']} − {x['condition_b']}" if is_comp else x["condition_a"],
            "models": f"{int(x['n_models'])}" + _missing_models(x["models_missing"]),
            "problems": int(x["n_problems"]),
            "tests": f"{x['n_tests_a']} / {x['n_tests_b']}" if is_comp else str(x["n_tests_a"]),
            "pooled": _value(x, "pooled", is_comp), "mean of models": _value(x, "mean", is_comp),
            "pooled excludes 0": _excludes(x, "pooled"), "mean excludes 0": _excludes(x, "mean"),
            "MC error of the bounds, pooled / mean (SE, points)": " ; ".join(
                mc_se(x.get(f"{how}_ci_low_mc_se"), x.get(f"{how}_ci_high_mc_se")) for how in ("pooled", "mean")),
            "note": x["note"] if isinstance(x["note"], str) else "",
        })
    return pd.DataFrame(rows)


def size_rows(sizes: pd.DataFrame) -> pd.DataFrame:
    s = sizes.sort_values(["size_rank"], kind="stable")
    return pd.DataFrame([{
        "rank": x["size_rank"], "size": x["size"], "model": x[cross_model.MODEL], "thinking": x["thinking"],
        "condition": x["condition"],
        "tests": x["n_tests"],
        "misleading rate": rate_with_ci(x["misleading_rate"], x["misleading_ci_low"], x["misleading_ci_high"],
                                        x["n_tests"]),
        "effective rate": rate_with_ci(x["effective_rate"], x["effective_ci_low"], x["effective_ci_high"],
                                       x["n_tests"]),
    } for _, x in s.iterrows()])


def _models(rates: pd.DataFrame, comp: pd.DataFrame) -> list[str]:
    names: list[str] = []
    for df in (rates, comp):
        if not df.empty and cross_model.MODEL in df.columns:
            names += list(df[cross_model.MODEL].astype(str))
    return list(dict.fromkeys(names))


def render(frames: Frames) -> list[str]:
    """Markdown lines of the section 'Models side by side'."""
    rates, comp = _get(frames, "model_rates"), _get(frames, "model_comparisons")
    avg, sizes = _get(frames, "model_average"), _get(frames, "model_sizes")
    models = _models(rates, comp)
    if not models:
        return ["_No per-model rows are stored yet (materialize `model_rates` and `model_comparisons`): "
                "nothing to set side by side._"]
    lvl = _level(rates, comp, avg)
    out = [f"{len(models)} model{'s' if len(models) != 1 else ''}: {', '.join(f'`{m}`' for m in models)}. Each "
           f"model's rates are pooled over its own tests, with {lvl} cluster-adjusted Wilson intervals (tests "
           "clustered in problems); each model's comparisons pair its own answered problems (thinking on: its "
           "truncation-matched subset) with percentile intervals from a paired bootstrap, as in the single-model "
           "tables above.", ""]
    for thinking in THINKING_MODES:
        if not rates.empty and (rates["thinking"] == thinking).any():
            out += [f"**Rates per model, thinking {thinking}**", "", md_table(rates_rows(rates, thinking)), ""]
    for thinking in THINKING_MODES:
        if not comp.empty and (comp["thinking"] == thinking).any():
            out += [f"**Comparisons per model, thinking {thinking}** (a − b, points)", "",
                    md_table(comparison_rows(comp, thinking)), ""]
    if comp.empty:
        out += ["_No per-model comparisons stored (materialize `model_comparisons`)._", ""]

    out += ["**Average over models**", ""]
    if len(models) == 1:
        out += [f"With one model (`{models[0]}`) the cross-model average equals that model's figures above; "
                "no average table is shown.", ""]
    elif avg.empty:
        out += ["_No cross-model average stored (materialize `model_average`)._", ""]
    else:
        out += ["As the paper averages its model settings, two ways: **pooled** (every model's cell counts summed "
                "over every model's tests, so a model with more tests weighs more) and **mean of models** (the "
                "unweighted mean of the per-model rates). Both pair over the problems every averaged model "
                "answered (for a comparison, in both conditions; thinking on, also in every model's "
                "truncation-matched subset), and each bootstrap draw resamples those problems once for every "
                f"model and both conditions; {lvl} percentile intervals (rates in %, differences in points). "
                "Without a figure a cell says why: `no rows`, `no common problem`, `0 tests: not estimable`, or, "
                "for the mean, `not defined: a model has 0 tests` (that model's rate is 0/0). Thinking-on "
                "comparisons are report-only, as in each model's report.", ""]
        for thinking in THINKING_MODES:
            if (avg["thinking"] == thinking).any():
                out += [f"thinking {thinking}:", "", md_table(average_rows(avg, thinking)), ""]

    out += ["**By model size**", ""]
    if sizes.empty:
        out += ["_No size table stored (`model_sizes` needs a model family with parameter counts)._"]
    else:
        out += ["One family's models ordered by parameter count (smallest first; models of equal size share a rank).",
                "", md_table(size_rows(sizes))]
    return out


def render_markdown(frames: Frames, replication: list[str] | None = None) -> str:
    """The section as one Markdown string, under its title; ``replication``: the replication section's lines
    computed on the average (replication_average.section), shown under it when the study has several models."""
    out = [f"## {TITLE}", "", *render(frames)]
    if replication:
        out += ["", "## Replication on the average over models", "",
                "The paper's figures are averages over its model settings; here this study's figures are the "
                "**mean over its models** (`model_average`, mean of per-model rates, paired bootstrap), in place of "
                "one model's: a comparison's two rates and its difference are all on the same paired problems and "
                "models. Each SQL statement below returns exactly the figure shown, from `model_average`; what "
                "the average does not hold is `not averaged over models` (each model's own report has it).", "",
                *replication]
    return "\n".join(out)
