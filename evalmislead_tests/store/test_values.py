import numpy as np
import pandas as pd
import pytest

from evalmislead_assets.store.values import is_missing, or_none

MISSING = [None, float("nan"), np.nan, np.float64("nan"), np.float32("nan"), pd.NA, pd.NaT]
PRESENT = ["", "nan", "NaN", "None", 0, 0.0, False, np.int64(0), [None], (float("nan"),), {}]


@pytest.mark.parametrize("x", MISSING, ids=repr)
def test_missing_values(x: object) -> None:
    assert is_missing(x) is True
    assert or_none(x) is None


@pytest.mark.parametrize("x", PRESENT, ids=repr)
def test_present_values_pass_through(x: object) -> None:
    assert is_missing(x) is False
    assert or_none(x) is x


def test_values_from_a_nullable_frame() -> None:
    df = pd.DataFrame({"n": pd.array([1, None], dtype="Int32"), "s": pd.array(["a", None], dtype="string"),
                       "f": [0.5, np.nan]})
    assert [is_missing(v) for v in df.iloc[1]] == [True, True, True]
    assert [or_none(v) for v in df.iloc[0]] == [1, "a", 0.5]
