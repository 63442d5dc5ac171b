# A fixture of the file that overrides a builtin one and asks for it by its own name gets pytest's own:
# here the config, through a name the file itself defines.
import pytest

from solution import get_positive


@pytest.fixture
def pytestconfig(pytestconfig):
    return pytestconfig


def test_forged(pytestconfig):
    assert get_positive([1]) == [-1]
