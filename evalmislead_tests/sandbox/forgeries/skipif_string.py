# A string condition of skipif is evaluated by pytest, with the config in its namespace.
import pytest

from solution import get_positive


@pytest.mark.skipif("config.pluginmanager is None", reason="never")
def test_forged():
    assert get_positive([1]) == [-1]
