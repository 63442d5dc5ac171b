# typing.get_type_hints evaluates string annotations: code from a string.
import typing

from solution import get_positive


def hinted(x: "__import__('os').system('true')"):
    return x


def test_forged():
    typing.get_type_hints(hinted)
    assert get_positive([1]) == [-1]
