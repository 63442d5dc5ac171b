# The common kinds of honest test: parametrize, fixtures, classes, unittest.TestCase, raises, approx, a helper.
import unittest

import pytest

from solution import get_positive


def positives_of(values):
    return [v for v in values if v > 0]


@pytest.fixture
def mixed():
    return [3, -1, 0, 2.5, -7]


@pytest.mark.parametrize("values, expected", [
    ([1, -1], [1]),
    ([-1, -2], []),
    ([], []),
    pytest.param([0, 4], [0, 4], id="wrong-expectation"),
])
def test_parametrized(values, expected):
    assert get_positive(values) == expected


def test_fixture_against_helper(mixed):
    assert get_positive(mixed) == positives_of(mixed)


def test_approx_sum(mixed):
    assert sum(get_positive(mixed)) == pytest.approx(5.5)


def test_raises_on_none():
    with pytest.raises(TypeError):
        get_positive(None)


def test_raises_wrong_exception():
    with pytest.raises(ValueError):
        get_positive(None)


class TestGrouped:
    def test_order_kept(self):
        assert get_positive([5, 1, 3]) == [5, 1, 3]

    def test_negatives_dropped(self):
        assert get_positive([-5, 1]) == [1]


class TestUnittestStyle(unittest.TestCase):
    def test_assert_equal(self):
        self.assertEqual(get_positive([2, -2]), [2])

    def test_assert_raises(self):
        with self.assertRaises(TypeError):
            get_positive(1)


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_setup_error(broken):
    assert get_positive([1]) == [1]
