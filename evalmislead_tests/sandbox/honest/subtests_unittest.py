# unittest's self.subTest: a failing subtest fails the test (plain pytest: SUBFAILED, exit code 1).
import unittest

from solution import get_positive


class TestSubTests(unittest.TestCase):
    def test_keeps_positives(self):
        for x in [1, 2, 7]:
            with self.subTest(x=x):
                self.assertEqual(get_positive([x, -x]), [x])

    def test_keeps_negatives(self):
        for x in [1, 2]:
            with self.subTest(x=x):
                self.assertEqual(get_positive([x, -x]), [-x])

    def test_wrong_on_both(self):
        for value, want in [([], []), ([0], [0])]:
            with self.subTest(value=value):
                self.assertEqual(get_positive(value), want)

    def test_no_subtest_fails(self):
        for value in [[], [0]]:
            with self.subTest(value=value):
                self.assertEqual(get_positive(value), [])
