# pytest evaluates a string mark condition as code, in a frame of its own ("<skipif condition>"): code the
# test wrote, though no frame of the test file is on the stack.
import pytest

from solution import get_positive


@pytest.mark.skipif("sys._getframe(0) is None", reason="never")
def test_string_condition_reaches_frames():
    assert get_positive([-1]) == [-1]
