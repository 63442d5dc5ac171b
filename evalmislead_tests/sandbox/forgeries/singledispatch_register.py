# functools.singledispatch's register reads the function's annotations with typing.get_type_hints, which
# evaluates a string annotation: code from a string, run at import.
import functools

from solution import get_positive


@functools.singledispatch
def show(value):
    return value


@show.register
def _(value: "__import__('os').getpid()"):
    return value


def test_forged():
    assert get_positive([1]) == [-1]
