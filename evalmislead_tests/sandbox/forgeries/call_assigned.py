# The same protocol method bound without a def: a class attribute assigned a function receives pytest's
# item when unittest calls it.
import unittest

from solution import get_positive


def forge(self, *args, **kwargs):
    return None


class TestForged(unittest.TestCase):
    __call__ = forge

    def test_forged(self):
        self.assertEqual(get_positive([1]), [-1])
