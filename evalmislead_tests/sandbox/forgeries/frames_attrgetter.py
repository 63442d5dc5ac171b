# Frames through operator.attrgetter("f_back"): no attribute named in the source.
import operator
import sys

from solution import get_positive

up = operator.attrgetter("f_back")


def test_forged():
    assert get_positive([1]) == [-1]
