# indirect parametrization hands the value to the fixture of that name, and a builtin fixture ignores it:
# the parameter is pytest's config, not the value 1.
import pytest

from solution import get_positive


@pytest.mark.parametrize("pytestconfig", [1], indirect=True)
def test_forged(pytestconfig):
    assert get_positive([1]) == [-1]
