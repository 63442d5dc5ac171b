# Only a constant string condition used to be refused: a name holding a string is evaluated by pytest at
# set-up all the same, in a frame of its own ("<skipif condition>") with the config in its namespace.
import pytest

from solution import get_positive

CONDITION = "config.pluginmanager is None"


@pytest.mark.skipif(CONDITION, reason="never")
def test_forged():
    assert get_positive([1]) == [-1]
