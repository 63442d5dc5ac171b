# traceback.print_exc / format_exc to show an unexpected exception, as many hand-written tests do.
import traceback

import pytest

from solution import get_positive


def test_keeps_positives():
    try:
        result = get_positive([1, -1])
    except Exception:
        traceback.print_exc()
        raise
    assert result == [1]


def test_rejects_none():
    try:
        get_positive(None)
    except TypeError:
        traceback.print_exc()
        text = traceback.format_exc()
        assert "TypeError" in text
    else:
        pytest.fail("no TypeError for None")


def test_keeps_negatives_with_stack_printed():
    traceback.print_stack()
    assert get_positive([-2, 2]) == [-2]
