# An index field of a format string ("{0[0]}") is a subscript with a literal key, which the subset allows.
from solution import get_positive


def test_formats_the_first_element():
    assert "{0[0]}".format([5, 6]) == "5"
    assert "first: {0[0]}, {1[key]}".format(get_positive([3, -3]), {"key": "k"}) == "first: 3, k"


def test_formats_the_buggy_answer():
    assert "{0[0]}".format(get_positive([3, -3])) == "-3"
