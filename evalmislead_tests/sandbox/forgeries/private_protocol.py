# unittest calls private methods of the test case with its result, which under pytest is pytest's item:
# self._addSkip(result, test_case, reason), self._callTestMethod(method).
import unittest

from solution import get_positive


class TestForged(unittest.TestCase):
    def _addSkip(self, result, test_case, reason):
        result.listchain()

    def test_forged(self):
        self.assertEqual(get_positive([1]), [-1])
