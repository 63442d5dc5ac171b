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
