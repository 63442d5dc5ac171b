"""Missing values, the one test: None, or a non-string NaN/NA (the NULLs that come back from stored rows)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def is_missing(x: object) -> bool:
    """True for None and for a scalar that ``pandas.isna`` calls missing (float/numpy NaN, ``pd.NA``, NaT);
    False for every string (``"nan"`` and ``""`` included) and for anything that is not a scalar."""
    if x is None:
        return True
    if isinstance(x, str):
        return False
    try:
        na = pd.isna(x)
    except (TypeError, ValueError):
        return False
    return bool(na) if isinstance(na, (bool, np.bool_)) else False


def or_none(x: Any) -> Any:
    """``None`` where ``x`` is missing (see is_missing), else ``x`` unchanged."""
    return None if is_missing(x) else x
