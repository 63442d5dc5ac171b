# getattr with a constant name is the attribute itself, and is checked as the attribute would be.
import math

from solution import get_positive


class Box:
    def __init__(self, value):
        self.value = value


def test_reads_a_constant_attribute():
    assert getattr(Box(3), "value") == 3
    assert getattr(Box(3), "missing", None) is None
    assert getattr(math, "pi") > 3
    assert get_positive(getattr(Box([-1, 2]), "value")) == [2]


def test_keeps_negatives():
    assert get_positive(getattr(Box([-1, 2]), "value")) == [-1]
