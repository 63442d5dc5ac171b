"""Sensitivity of the determinism probe: how far each stored comparison moves when the
probed answers' re-generations replace them (the numbers; report/sections/determinism.py words them).

For each comparison row only the probed answers among the problems that comparison pairs over
count (thinking on: the truncation-matched subset), and each is swapped against its stored
test_outcomes, the rows the estimate came from. Chosen design and its limits:
``determinism.py`` (module docstring) and prompts/analysis_plan_changes.md. Pure (no Dagster).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalmislead_assets.execution.cells import OUTCOMES
from evalmislead_assets.store.values import or_none

SENSITIVITY_COLUMNS = [
    "comparison_id", "thinking", "role", "metric", "condition_a", "condition_b", "subset", "estimate", "ci_low",
    "ci_high", "level", "n_probed", "n_changed", "n_outside", "estimate_swapped", "shift", "not_measured",
]
_KEY3 = ["condition", "thinking", "task_id"]


def _stored_counts(outcomes: pd.DataFrame) -> dict[tuple[str, str, str], dict[str, int]]:
    """(condition, thinking, task_id) -> n_tests and the four cell counts of the stored test_outcomes."""
    if outcomes is None or outcomes.empty:
        return {}
    o = outcomes[_KEY3 + ["outcome"]]
    out: dict[tuple[str, str, str], dict[str, int]] = {}
    for (cond, thinking, task), g in o.groupby(_KEY3, sort=False):
        vc = g["outcome"].value_counts()
        out[(str(cond), str(thinking), str(task))] = {"n_tests": len(g), **{c: int(vc.get(c, 0)) for c in OUTCOMES}}
    return out


def _answered(*frames: pd.DataFrame | None) -> set[tuple[str, str, str]]:
    keys: set[tuple[str, str, str]] = set()
    for df in frames:
        if df is not None and len(df) and all(k in df.columns for k in _KEY3):
            keys |= set(zip(df["condition"].astype(str), df["thinking"].astype(str), df["task_id"].astype(str)))
    return keys


def comparison_problems(
    c: Any, answered: set[tuple[str, str, str]], matched: pd.DataFrame | None,
) -> tuple[set[str], str | None]:
    """The task_ids a stored comparison row pairs over, and why none when they cannot be known.

    As `analysis.bootstrap_comparisons` builds them: problems answered in both conditions (same
    thinking mode); for ``subset = truncation_matched`` only those of `truncation_matched_subset`.
    """
    a = {task for cond, th, task in answered if cond == c.condition_a and th == c.thinking}
    b = {task for cond, th, task in answered if cond == c.condition_b and th == c.thinking}
    probs = a & b
    if str(or_none(getattr(c, "subset", None)) or "all") == "truncation_matched":
        if matched is None or matched.empty:
            return set(), "truncation_matched_subset is not stored"
        probs &= set(matched.loc[matched["in_subset"].astype(bool), "task_id"].astype(str))
    return probs, None


def sensitivity(
    probe: pd.DataFrame, comparisons: pd.DataFrame, outcomes: pd.DataFrame | None,
    answered: pd.DataFrame | None, matched: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per stored comparison row: the estimate with the probed answers' re-generations swapped in.

    Only probed answers of the comparison's own problems count (for thinking on, the
    truncation-matched subset; ``n_outside`` counts those left out), and each is swapped against
    its STORED outcomes (``outcomes`` = test_outcomes), the rows the estimate was computed from,
    not against the probe's re-scoring of the original answer: an answer that came back
    byte-identical changes nothing; another one replaces its stored cell and test counts with
    the probe's. Pooled counts of each side are rebuilt from ``rate`` x ``n_tests``.
    ``answered``: rows naming every stored answer (condition, thinking, task_id), e.g.
    generated_tests. ``shift`` is NULL (not measured, ``not_measured`` says why) when no probed
    answer falls in the comparison, a side has no tests, or the stored outcomes are missing.
    """
    if comparisons is None or comparisons.empty:
        return pd.DataFrame(columns=SENSITIVITY_COLUMNS)
    got = probe[probe["probe_error"].isna()] if len(probe) else probe
    stored = _stored_counts(outcomes)
    known = _answered(answered, outcomes, got)
    empty = {"n_tests": 0, **{c: 0 for c in OUTCOMES}}
    rows = []
    for c in comparisons.sort_values(["thinking", "comparison_id"], kind="stable").itertuples(index=False):
        cell = str(c.metric).removesuffix("_rate")
        probs, why = comparison_problems(c, known, matched)
        swapped, n_probed, n_changed, n_outside = [], 0, 0, 0
        estimable = or_none(c.estimate) is not None
        for cond, rate, n_tests in ((c.condition_a, c.rate_a, c.n_tests_a), (c.condition_b, c.rate_b, c.n_tests_b)):
            n_tests = int(or_none(n_tests) or 0)
            rate = or_none(rate)
            estimable = estimable and rate is not None and n_tests > 0
            num = round(float(rate or 0.0) * n_tests)
            mine = got[(got["condition"] == cond) & (got["thinking"] == c.thinking)] if len(got) else got
            for r in mine.itertuples(index=False):
                if str(r.task_id) not in probs:
                    n_outside += 1
                    continue
                n_probed += 1
                before = stored.get((str(cond), str(c.thinking), str(r.task_id)), empty)
                if bool(or_none(r.identical)):
                    continue  # the same text: the stored scoring stands
                after = {k: int(or_none(getattr(r, f"probe_{k}", None)) or 0) for k in ("n_tests", *OUTCOMES)}
                if after != before:
                    n_changed += 1
                num += after[cell] - before[cell]
                n_tests += after["n_tests"] - before["n_tests"]
            swapped.append(num / n_tests if n_tests > 0 else float("nan"))
        shift = None
        if why is None and n_probed and estimable and not stored:
            why = "the stored test_outcomes are not loaded"
        elif why is None and not n_probed:
            why = "no probed answer among this comparison's problems"
        elif why is None and not (estimable and all(x == x for x in swapped)):
            why = "not estimable"  # a side with 0 tests: never a 0.0 shift
        if why is None:
            shift = (swapped[0] - swapped[1]) - (float(c.rate_a) - float(c.rate_b))
        rows.append({
            "comparison_id": c.comparison_id, "thinking": c.thinking, "role": getattr(c, "role", None),
            "metric": c.metric, "condition_a": c.condition_a, "condition_b": c.condition_b,
            "subset": or_none(getattr(c, "subset", None)) or "all", "estimate": c.estimate,
            "ci_low": c.ci_low, "ci_high": c.ci_high, "level": c.level, "n_probed": n_probed, "n_changed": n_changed,
            "n_outside": n_outside, "estimate_swapped": None if shift is None else float(c.estimate) + shift,
            "shift": shift, "not_measured": why,
        })
    return pd.DataFrame(rows, columns=SENSITIVITY_COLUMNS)
