# `from solution import *`: the module under test's public names, nothing of the harness.
from solution import *


def test_keeps_positives():
    assert get_positive([-1, 2]) == [2]


def test_keeps_negatives():
    assert get_positive([-1, 2]) == [-1]


def test_empty():
    assert get_positive([]) == []
