# str.format reads attributes named in the format string: "{0.__class__}" reaches what a dunder would.
from solution import get_positive


def test_forged():
    text = "{0.__globals__}".format(get_positive)
    assert text
