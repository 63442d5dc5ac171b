# A fixture's scope may be a callable: pytest calls it with (fixture_name, config), pytest's Config, whose
# options decide how reports are read (runxfail turns an expected failure into a plain one).
import pytest

from solution import get_positive

SEEN = []


def scope(fixture_name, config):
    SEEN.append(config.getoption("capture"))
    config.option.runxfail = True
    return "function"


@pytest.fixture(scope=scope)
def values():
    return [1]


def test_forged(values):
    assert SEEN and get_positive(values) == values
