# `from math import *` binds math's public functions and constants: none of them reaches the harness.
from math import *

from solution import get_positive


def test_keeps_positives():
    assert get_positive([sqrt(4), -floor(2.5), -pi]) == [2.0]


def test_keeps_negatives():
    assert get_positive([sqrt(4), -floor(2.5)]) == [-2]
