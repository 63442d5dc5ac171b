# A function's __name__ is a string: reading it reaches nothing.
from solution import get_positive


def test_the_function_is_named():
    assert get_positive.__name__ == "get_positive"


def test_keeps_positives():
    assert get_positive([-1, 2]) == [2], f"{get_positive.__name__} kept the wrong numbers"
