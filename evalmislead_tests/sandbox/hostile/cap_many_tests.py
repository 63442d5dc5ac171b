# More parametrized cases than the cap: the file's error, never a crash.
import pytest


@pytest.mark.parametrize("i", range(6000))
def test_case(i):
    assert i >= 0
