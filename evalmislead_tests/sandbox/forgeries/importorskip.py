# pytest.importorskip imports any module by name.
import pytest

from solution import get_positive

inspect = pytest.importorskip("inspect")


def test_forged():
    assert get_positive([1]) == [-1]
