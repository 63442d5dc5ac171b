# A test class that keeps its own settings in self.config / self.session (nothing of pytest's).
import unittest

from solution import get_positive


class TestWithConfig:
    def setup_method(self):
        self.config = {"values": [4, -4, 0]}
        self.session = []

    def test_keeps_positives(self):
        self.session.append("run")
        assert get_positive(self.config["values"]) == [4]

    def test_keeps_negatives(self):
        assert get_positive(self.config["values"]) == [-4]


class TestCaseWithSession(unittest.TestCase):
    config = {"values": [9, -9]}

    def setUp(self):
        self.session = {"calls": 0}

    def test_keeps_positives(self):
        self.session["calls"] += 1
        self.assertEqual(get_positive(self.config["values"]), [9])
        self.assertEqual(self.session["calls"], 1)

    @classmethod
    def setUpClass(cls):
        cls.session_name = "unit"
        cls.config = dict(cls.config)

    def test_class_config_is_a_copy(self):
        self.assertEqual(self.config["values"], [9, -9])
