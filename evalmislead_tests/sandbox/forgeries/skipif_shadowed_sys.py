# A static-looking mark condition `sys.platform == "x"` where `sys` is a parameter: its platform's __eq__
# returns a string, and pytest evaluates that string as code at set-up.
import sys

import pytest

from solution import get_positive


class Condition:
    def __eq__(self, other):
        return "config.pluginmanager is None"


class FakeSys:
    platform = Condition()


def make(sys):
    @pytest.mark.skipif(sys.platform == "x", reason="never")
    def test_inner():
        assert get_positive([1]) == [-1]
    return test_inner


test_forged = make(FakeSys())
assert sys.maxsize
