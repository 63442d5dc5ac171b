"""Several models side by side, and the paper-style average over them (no DuckDB, no Dagster).

Inputs are the upstream frames (``test_outcomes``, ``test_generations``, ``generated_tests``)
with a ``model_name`` column (the study's short name of the model); a non-empty frame without
it, or with NULL names, is an error rather than rows silently dropped. Each function returns
the rows of one table, with the columns listed in the module constants below:

- ``per_model_rates``       -> ``model_rates``       (MODEL_RATES_COLUMNS): rates.condition_rates per model
- ``per_model_comparisons`` -> ``model_comparisons`` (MODEL_COMPARISONS_COLUMNS): rates.bootstrap_comparisons per model
- ``cross_model_average``   -> ``model_average``     (MODEL_AVERAGE_COLUMNS)
- ``size_table``            -> ``model_sizes``       (MODEL_SIZES_COLUMNS)

The average (``model_average``), as the paper averages its 13 model settings, two ways:
``pooled`` = sum over models of the cell count / sum over models of the tests (a model with
more tests weighs more), and ``mean`` = the unweighted mean of the per-model pooled rates.
One row per condition x thinking present and metric (``kind='rate'``), and one per plan
comparison and thinking mode (``kind='comparison'``: rate of condition_a minus rate of
condition_b, averaged both ways; ``pooled_a``/``pooled_b`` and ``mean_a``/``mean_b`` are the two
sides' rates on the same paired problems and models, so ``mean = mean_a - mean_b``; a rate row's own
figure, over every problem its models answered in that one condition, can differ from them).

Pairing. A row averages the *contributing* models: those of ``models`` with any row for the
condition (for a comparison: for both conditions) in that thinking mode; the others are named in
``models_missing``. It pairs over the problems every contributing model answered (in both
conditions, for a comparison; for a thinking mode whose plan subset is ``truncation_matched``,
also in every contributing model's truncation-matched subset). Each bootstrap draw resamples
those problems once (bootstrap.resample_counts, ``default_rng(plan.seed)``, as the per-model
code does) and applies the same draw to every model's per-problem counts and to both conditions
of a comparison; percentile interval at ``plan.level``. So with one model, or identical models,
the average's interval equals the per-model interval on the same problems. Because the average
uses the common problems, a model's share of it may differ from its own row in ``model_rates``
when models answered different problems (``n_problems`` says how many were paired).

Not estimable. ``estimable`` (pooled) is False when no problem is common, or when the pooled
tests are 0 (either side, for a comparison): estimate and interval are NaN, never 0.0.
An interval "excludes 0" only by more than float noise (bootstrap.ZERO_TOL).
``mean_estimable`` is False also when any contributing model has 0 tests on the common
problems (either side): its rate is undefined, and dropping the model would average a different
set of models than the pooled figure. ``note`` says why. Within a resample a side whose drawn
problems have 0 tests takes the plan's ``zero_denominator_rate`` (as in rates.py) and is counted
in ``pooled_n_zero_denominator`` / ``mean_n_zero_denominator`` (any model's side).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeAlias

import numpy as np
import pandas as pd

from evalmislead_assets.analysis import bootstrap, rates
from evalmislead_assets.analysis import plan as analysis_plan
from evalmislead_assets.analysis.plan import (
    METRICS,
    Plan,
    answered,
    cells_present,
    per_problem,
    problem_counts,
    universe,
)
from evalmislead_assets.store import schema

NAN = float("nan")
MODEL = "model_name"

# condition_rates' own columns (the schema's, so a column added there is a column here)
_RATE_COLUMNS = [c for c in schema.column_names("condition_rates") if c not in ("plan_sha256", MODEL)]
# bootstrap_comparisons' own columns (the schema's, as for condition_rates)
_COMPARISON_COLUMNS = [c for c in schema.column_names("bootstrap_comparisons") if c not in ("plan_sha256", MODEL)]
#: model_rates: condition_rates' columns with model_name after plan_sha256
MODEL_RATES_COLUMNS = ["plan_sha256", MODEL, *_RATE_COLUMNS]
#: model_comparisons: bootstrap_comparisons' columns with model_name after plan_sha256
MODEL_COMPARISONS_COLUMNS = ["plan_sha256", MODEL, *_COMPARISON_COLUMNS]
#: model_average: kind 'rate' (condition_a = the condition, condition_b and comparison_id NULL) or 'comparison'
MODEL_AVERAGE_COLUMNS = [
    "plan_sha256", "kind", "comparison_id", "thinking", "role", "metric", "condition_a", "condition_b", "subset",
    "n_models", "models", "models_missing", "n_problems", "n_tests_a", "n_tests_b",
    "pooled", "pooled_ci_low", "pooled_ci_high", "pooled_excludes_zero", "pooled_a", "pooled_b",
    "mean", "mean_ci_low", "mean_ci_high", "mean_excludes_zero", "mean_a", "mean_b",
    "estimable", "mean_estimable", "pooled_n_zero_denominator", "mean_n_zero_denominator", "note",
    "level", "n_boot", "seed",
    "pooled_ci_low_mc_se", "pooled_ci_high_mc_se", "mean_ci_low_mc_se", "mean_ci_high_mc_se",
]
#: model_sizes: one row per model x condition, models ordered by parameter count (size_rank 1 = smallest)
MODEL_SIZES_COLUMNS = [
    "plan_sha256", "size_rank", MODEL, "size", "n_params_billion", "thinking", "condition", "n_tests",
    "n_misleading", "n_effective", "misleading_rate", "misleading_ci_low", "misleading_ci_high",
    "effective_rate", "effective_ci_low", "effective_ci_high", "level", "n_boot", "seed",
]

Frame: TypeAlias = pd.DataFrame | None

# ---------------------------------------------------------------- splitting by model


def model_names(*frames: Frame) -> list[str]:
    """The model names present in any frame, sorted (the default ``models``)."""
    _check(frames)
    names: set[str] = set()
    for df in frames:
        if df is not None and len(df):
            names.update(df[MODEL].astype(str))
    return sorted(names)


def _check(frames: Sequence[Frame]) -> None:
    for i, df in enumerate(frames):
        if df is None or len(df) == 0:
            continue
        if MODEL not in df.columns:
            raise ValueError(f"frame {i} ({len(df)} rows) has no {MODEL} column; every per-model table needs one")
        n_null = int(df[MODEL].isna().sum())
        if n_null:
            raise ValueError(f"frame {i} has {n_null} rows with a NULL {MODEL}; fill it in (e.g. migrate old rows)")


def _models(frames: Sequence[Frame], models: Sequence[str] | None) -> list[str]:
    _check(frames)
    out = list(models) if models is not None else model_names(*frames)
    if len(set(out)) != len(out):
        raise ValueError(f"models {out} has duplicates")
    return out


def _of(df: Frame, model: str) -> Frame:
    if df is None or len(df) == 0:
        return df
    return df[df[MODEL] == model].drop(columns=[MODEL]).reset_index(drop=True)


def _with_model(df: pd.DataFrame, model: str, columns: list[str]) -> pd.DataFrame:
    df = df.drop(columns=[MODEL], errors="ignore")
    df.insert(1, MODEL, model)
    return df.reindex(columns=columns)


# ---------------------------------------------------------------- per model


def per_model_rates(
    outcomes: Frame, generations: Frame, generated: Frame, plan: Plan, models: Sequence[str] | None = None
) -> pd.DataFrame:
    """rates.condition_rates of each model (in ``models`` order), with ``model_name``: MODEL_RATES_COLUMNS."""
    parts = []
    for m in _models((outcomes, generations, generated), models):
        r = rates.condition_rates(_of(outcomes, m), _of(generations, m), _of(generated, m), plan)
        parts.append(_with_model(r, m, MODEL_RATES_COLUMNS))
    return _concat(parts, MODEL_RATES_COLUMNS)


def per_model_comparisons(
    outcomes: Frame, generations: Frame, generated: Frame, plan: Plan, models: Sequence[str] | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """rates.bootstrap_comparisons of each model, with ``model_name``; notes prefixed with the model's name."""
    parts, notes = [], []
    for m in _models((outcomes, generations, generated), models):
        c, n = rates.bootstrap_comparisons(_of(outcomes, m), _of(generations, m), _of(generated, m), plan)
        parts.append(_with_model(c, m, MODEL_COMPARISONS_COLUMNS))
        notes += [f"{m}: {x}" for x in n]
    return _concat(parts, MODEL_COMPARISONS_COLUMNS), notes


def _concat(parts: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return pd.concat(parts, ignore_index=True)[columns]


# ---------------------------------------------------------------- the average over models


class _Model:
    """One model's per-problem counts and answered cells."""

    def __init__(self, outcomes: Frame, generations: Frame, generated: Frame, plan: Plan, subset_needed: bool) -> None:
        self.counts = problem_counts(outcomes)
        self.answered = answered(generations, generated, outcomes)
        self.present = set(cells_present(generations, generated, outcomes))
        self.matched: set[str] = set()
        if subset_needed:
            m = rates.truncation_matched_subset(outcomes, generations, generated, plan)
            self.matched = set(m.loc[m["in_subset"].astype(bool), "task_id"]) if len(m) else set()


def _common(ms: list[_Model], thinking: str, conditions: list[str], restrict: bool) -> pd.DataFrame:
    """Problems every model answered in every condition (and, if ``restrict``, in every matched subset)."""
    probs = universe(ms[0].answered, thinking, conditions)
    for m in ms[1:]:
        probs = probs[probs["task_id"].isin(universe(m.answered, thinking, conditions)["task_id"])]
    if restrict:
        for m in ms:
            probs = probs[probs["task_id"].isin(m.matched)]
    return probs.reset_index(drop=True)


def _matrix(ms: list[_Model], probs: pd.DataFrame, condition: str, thinking: str, col: str) -> np.ndarray:
    """(n_problems, n_models) per-problem counts of column ``col`` (n_tests, n_misleading, ...)."""
    if not ms:
        return np.zeros((len(probs), 0))
    return np.column_stack([per_problem(m.counts, probs, condition, thinking)[col].to_numpy(dtype=float) for m in ms])


def _side(w: np.ndarray, num: np.ndarray, den: np.ndarray, zero_rate: float) -> dict[str, np.ndarray]:
    """Pooled and mean rates on every resample (rows of w) and at the estimate."""
    bn, bd = w @ num, w @ den
    n_models = num.shape[1]
    per_model = num.sum(0) / np.where(den.sum(0) > 0, den.sum(0), np.nan)
    mean = bootstrap.pooled_rate(bn, bd, zero_rate).mean(1) if n_models else np.full(len(w), NAN)
    return {
        "pooled": bootstrap.pooled_rate(bn.sum(1), bd.sum(1), zero_rate), "mean": mean,
        "pooled_est": analysis_plan.rate(num.sum(), den.sum()), "mean_est": float(per_model.mean()) if n_models else NAN,
        "pooled_zero": bd.sum(1) == 0, "mean_zero": (bd == 0).any(1),
        "n_tests": int(den.sum()), "all_have_tests": bool(len(per_model)) and bool((den.sum(0) > 0).all()),
    }


def _interval(samples: np.ndarray, estimate: float, ok: bool, level: float) -> tuple[float, float, float, bool]:
    if not ok:
        return NAN, NAN, NAN, False
    lo, hi = bootstrap.percentile_interval(samples, level)
    return estimate, float(lo), float(hi), bootstrap.excludes_zero(float(lo), float(hi))


def _mc_se(samples: np.ndarray, ok: bool, level: float) -> tuple[float, float]:
    """The Monte Carlo standard errors of the two bounds (bootstrap.bound_mc_se); NaN when not estimable."""
    if not ok:
        return NAN, NAN
    lo, hi = bootstrap.bound_mc_se(samples, level)
    return float(lo[0]), float(hi[0])


def _row(plan: Plan, sides: list[dict[str, np.ndarray]], n_problems: int, note: str) -> dict[str, object]:
    """Estimates and intervals of one rate (one side) or one difference (two sides, a - b)."""
    pooled_ok = n_problems > 0 and all(s["n_tests"] > 0 for s in sides)
    mean_ok = pooled_ok and all(s["all_have_tests"] for s in sides)
    if not note and not pooled_ok:
        note = "not estimable: 0 tests on the common problems"
    elif not note and not mean_ok:
        note = "mean not estimable: a model has 0 tests on the common problems"
    out: dict[str, object] = {"n_problems": n_problems, "note": note or None}
    for how, ok in (("pooled", pooled_ok), ("mean", mean_ok)):
        if len(sides) == 1:
            samples, est = sides[0][how], float(sides[0][f"{how}_est"])
            zero = sides[0][f"{how}_zero"] if ok else np.zeros(0)
        else:
            samples, est = sides[0][how] - sides[1][how], float(sides[0][f"{how}_est"]) - float(sides[1][f"{how}_est"])
            zero = (sides[0][f"{how}_zero"] | sides[1][f"{how}_zero"]) if ok else np.zeros(0)
        e, lo, hi, excl = _interval(samples, est, ok, plan.level)
        se_lo, se_hi = _mc_se(samples, ok, plan.level)
        out.update({how: e, f"{how}_ci_low": lo, f"{how}_ci_high": hi, f"{how}_excludes_zero": excl,
                    f"{how}_n_zero_denominator": int(zero.sum()), f"{how}_ci_low_mc_se": se_lo,
                    f"{how}_ci_high_mc_se": se_hi})
        if len(sides) == 2:  # each side's rate on the same problems and models as the difference
            out.update({f"{how}_a": float(sides[0][f"{how}_est"]) if ok else NAN,
                        f"{how}_b": float(sides[1][f"{how}_est"]) if ok else NAN})
    out.update({"estimable": pooled_ok, "mean_estimable": mean_ok})
    return out


def cross_model_average(
    outcomes: Frame, generations: Frame, generated: Frame, plan: Plan, models: Sequence[str] | None = None
) -> pd.DataFrame:
    """The average over ``models`` (default: every model present), pooled and mean: MODEL_AVERAGE_COLUMNS.

    Rate rows for every condition x thinking present in any model, then comparison rows for every
    plan comparison in each of the plan's comparison thinking modes that any model has rows for.
    See the module docstring for the pairing and the not-estimable rules.
    """
    frames = (outcomes, generations, generated)
    names = _models(frames, models)
    restrict_modes = {t for t in plan.comparison_thinking_modes if plan.comparison_subset(t) == "truncation_matched"}
    ms = {m: _Model(_of(outcomes, m), _of(generations, m), _of(generated, m), plan, bool(restrict_modes))
          for m in names}
    all_cells = set().union(*(m.present for m in ms.values())) if ms else set()
    boot = {"level": plan.level, "n_boot": plan.n_boot, "seed": plan.seed}
    rows: list[dict[str, object]] = []

    def average(kind: str, thinking: str, conds: list[str], subset: str, metrics: list[str],
                extra: dict[str, object]) -> None:
        contributing = [m for m in names if all((c, thinking) in ms[m].present for c in conds)]
        cm = [ms[m] for m in contributing]
        probs = _common(cm, thinking, conds, subset == "truncation_matched") if cm else pd.DataFrame(
            columns=["task_id", "problem_idx"])
        w = bootstrap.resample_counts(len(probs), plan.n_boot, np.random.default_rng(plan.seed)).astype(float)
        if not cm:
            note = f"no model has rows for {' and '.join(conds)} (thinking {thinking})"
        elif len(probs) == 0:
            note = ("no problem is in every contributing model's truncation-matched subset"
                    if subset == "truncation_matched" else "no problem was answered by every contributing model")
        else:
            note = ""
        dens = {c: _matrix(cm, probs, c, thinking, "n_tests") for c in conds}
        head = {"kind": kind, "thinking": thinking, "subset": subset, "condition_a": conds[0],
                "condition_b": conds[1] if len(conds) > 1 else None, "n_models": len(cm),
                "models": ",".join(contributing), "models_missing": ",".join(m for m in names if m not in contributing),
                "n_tests_a": int(dens[conds[0]].sum()),
                "n_tests_b": int(dens[conds[1]].sum()) if len(conds) > 1 else None, **boot, **extra}
        for metric in metrics:
            cell = f"n_{METRICS[metric]}"
            sides = [_side(w, _matrix(cm, probs, c, thinking, cell), dens[c], plan.zero_rate) for c in conds]
            rows.append({**head, "metric": metric, **_row(plan, sides, len(probs), note)})

    for condition, thinking in cells_present(*(pd.DataFrame(sorted(m.present), columns=["condition", "thinking"])
                                               for m in ms.values())):
        average("rate", thinking, [condition], "all", list(METRICS), {})
    for thinking in plan.comparison_thinking_modes:
        if not any(t == thinking for _, t in all_cells):
            continue
        for comp in plan.comparisons:
            average("comparison", thinking, [comp["condition_a"], comp["condition_b"]],
                    plan.comparison_subset(thinking), [comp["metric"]], {
                        "comparison_id": int(comp["id"]),
                        "role": "primary" if thinking == plan.primary_thinking else "report-only"})
    out = pd.DataFrame(rows).reindex(columns=MODEL_AVERAGE_COLUMNS[1:]) if rows else pd.DataFrame(
        {c: pd.Series(dtype=object) for c in MODEL_AVERAGE_COLUMNS[1:]})
    out["comparison_id"] = pd.array(out["comparison_id"], dtype="Int64")
    out["n_tests_b"] = pd.array(out["n_tests_b"], dtype="Int64")
    return analysis_plan.sha_col(out, plan)


# ---------------------------------------------------------------- model size

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmbt]?)\s*$", re.IGNORECASE)
_SCALE = {"": 1.0, "k": 1e-6, "m": 1e-3, "b": 1.0, "t": 1e3}


def parse_size(size: str | float) -> float:
    """Parameters in billions: a number is taken as billions; '0.5B', '1.5b', '500M', '7 B', '1T' are parsed."""
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return float(size)
    m = _SIZE.match(str(size))
    if not m:
        raise ValueError(f"model size {size!r}: give a number of billions or e.g. '0.5B', '500M'")
    return float(m.group(1)) * _SCALE[m.group(2).lower()]


def size_table(
    per_model_rates_df: pd.DataFrame, sizes: Mapping[str, str | float], thinking: str = "off",
    conditions: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One family's models (the keys of ``sizes``) ordered by parameter count: MODEL_SIZES_COLUMNS.

    Rows come from ``per_model_rates_df`` (model_rates) for the given thinking mode and conditions
    (default: all present, in the study's order); a model of ``sizes`` without rows adds none, a
    model not in ``sizes`` is not part of the family. Models of equal size share a rank (1, 1, 3: one plus
    the number of smaller models) and keep the order of ``sizes`` among themselves.
    """
    order = sorted(sizes, key=lambda m: parse_size(sizes[m]))  # stable: ties keep the mapping's order
    ranks = {m: 1 + sum(parse_size(sizes[o]) < parse_size(sizes[m]) for o in order) for m in order}
    r = per_model_rates_df
    if r is None or r.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in MODEL_SIZES_COLUMNS})
    r = r[(r["thinking"] == thinking) & r[MODEL].isin(order)]
    if conditions is not None:
        r = r[r["condition"].isin(list(conditions))]
    cond_order = [c for c, t in cells_present(r[["condition", "thinking"]])] if len(r) else []
    if conditions is not None:
        cond_order = [c for c in conditions if c in set(cond_order)]
    rows = []
    for m in order:
        rank = ranks[m]
        for c in cond_order:
            hit = r[(r[MODEL] == m) & (r["condition"] == c)]
            if len(hit):
                x = hit.iloc[0]
                rows.append({**{k: x.get(k) for k in MODEL_SIZES_COLUMNS if k in x.index}, "size_rank": rank,
                             "size": str(sizes[m]), "n_params_billion": parse_size(sizes[m])})
    return pd.DataFrame(rows, columns=MODEL_SIZES_COLUMNS) if rows else pd.DataFrame(
        {c: pd.Series(dtype=object) for c in MODEL_SIZES_COLUMNS})
