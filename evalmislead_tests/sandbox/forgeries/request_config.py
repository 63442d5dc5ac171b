# The request fixture used beyond request.param: request.config is pytest's configuration.
import pytest

from solution import get_positive


@pytest.fixture(params=[[1, -1]])
def values(request):
    request.config.option.verbose = 2
    return request.param


def test_forged(values):
    assert get_positive(values) == [1]
