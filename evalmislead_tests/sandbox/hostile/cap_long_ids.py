# Two honest tests with 600 kB ids: over the id-length cap (and, together, over the old reader's 1 MiB).
import pytest


@pytest.mark.parametrize("x", [pytest.param(1, id="a" * 600_000), pytest.param(2, id="b" * 600_000)])
def test_long(x):
    assert x > 0
