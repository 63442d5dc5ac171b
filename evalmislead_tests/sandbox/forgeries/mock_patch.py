# unittest.mock.patch takes a dotted string, as monkeypatch does.
from unittest import mock

from solution import get_positive


def test_forged():
    with mock.patch("builtins.AssertionError", Exception):
        assert get_positive([1]) == [-1]
