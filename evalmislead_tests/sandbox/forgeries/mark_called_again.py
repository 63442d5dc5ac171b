# A mark kept in a name can be called again, and a call with a non-function argument adds conditions:
# MARK("...") gives the stored skipif a string condition no static view of the call site shows.
import pytest

from solution import get_positive

MARK = pytest.mark.skipif(False, reason="never")


@MARK("config.pluginmanager is None")
def test_forged():
    assert get_positive([1]) == [-1]
