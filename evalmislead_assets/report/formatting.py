"""Number formatting for the whole report: its tables and every section (the one home of pct, points, md_table)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalmislead_assets.store.values import is_missing

NOT_ESTIMABLE = "0 tests: not estimable"


def pct(x: Any, digits: int = 1) -> str:
    return "–" if missing(x) else f"{100 * float(x):.{digits}f} %"


def points(x: Any) -> str:
    return "–" if missing(x) else f"{100 * float(x):+.1f}"


def ci(lo: Any, hi: Any, as_points: bool = True) -> str:
    if missing(lo) or missing(hi):
        return "–"
    f = points if as_points else (lambda v: f"{100 * float(v):.1f}")
    return f"[{f(lo)}, {f(hi)}]"


def rate_with_ci(rate: Any, lo: Any, hi: Any, n_tests: Any) -> str:
    """'12.5 % [3.1, 25.0]', or '0 tests: not estimable' when the denominator is zero."""
    if not missing(n_tests) and int(n_tests) == 0:
        return NOT_ESTIMABLE
    return f"{pct(rate)} {ci(lo, hi, False)}"


def rate_or_not_estimable(rate: Any, n_tests: Any) -> str:
    if not missing(n_tests) and int(n_tests) == 0:
        return NOT_ESTIMABLE
    return pct(rate)


def missing(x: object) -> bool:
    """None, NaN or NA (store.values.is_missing): shown as a dash."""
    return is_missing(x)


def md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_no rows_"
    return df.to_markdown(index=False, disable_numparse=True)


def level_label(level: float) -> str:
    return f"{100 * level:g} %"


#: a bound's last printed digit is 0.1 point; it is stable when twice its Monte Carlo standard error stays within
#: half of that digit (0.05 point = 0.0005 as a rate)
STABLE_MC_SE = 0.00025


def mc_se(lo_se: Any, hi_se: Any) -> str:
    """The Monte Carlo standard errors of an interval's two bounds, in points: '0.21 / 0.35'."""
    if missing(lo_se) or missing(hi_se):
        return "–"
    return f"{100 * float(lo_se):.2f} / {100 * float(hi_se):.2f}"


def mc_stability_note(ses: pd.Series | list, n_boot: Any) -> str:
    """One sentence: the largest Monte Carlo SE of the bounds shown, and whether the last printed digit is stable."""
    vals = [float(v) for v in ses if not missing(v)]
    if not vals:
        return ""
    worst = max(vals)
    boots = "" if missing(n_boot) else f"{int(n_boot):,} resamples, "
    head = (f"Monte Carlo error of the bootstrap bounds ({boots}standard error by batches of the replicates): "
            f"up to {100 * worst:.2f} points.")
    if worst <= STABLE_MC_SE:
        return head + " The last printed digit (0.1 point) is stable."
    return (head + " **The last printed digit (0.1 point) of a bound is not stable at this number of resamples**: "
            "another seed can move it by about twice this error. The preregistered resample count and seed are "
            "kept; read the bounds to the nearest point.")
