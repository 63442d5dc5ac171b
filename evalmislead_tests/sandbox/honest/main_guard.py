# A file meant to be run as a script too: pytest.main() under the __main__ guard never runs under pytest.
import sys

import pytest

from solution import get_positive


def test_keeps_positives():
    assert get_positive([5, -5]) == [5]


def test_keeps_negatives():
    assert get_positive([5, -5]) == [-5]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
