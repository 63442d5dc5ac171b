# pytest.raises hands over the traceback: its frames lead to the harness.
import pytest

from solution import get_positive


def test_forged():
    with pytest.raises(TypeError) as excinfo:
        get_positive(None)
    frame = excinfo.tb.tb_frame.f_back
    assert frame is not None
