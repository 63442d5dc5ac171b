# hasattr with a dunder name: a yes/no question about the result's type.
from solution import get_positive


def test_result_is_iterable():
    result = get_positive([1, -1])
    assert hasattr(result, "__iter__") and hasattr(result, "__len__")


def test_result_keeps_positives():
    result = get_positive([1, -1])
    assert hasattr(result, "__getitem__")
    assert list(result) == [1]


def test_result_is_not_callable():
    assert not hasattr(get_positive([]), "__call__")
