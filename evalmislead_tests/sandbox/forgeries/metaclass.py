# A metaclass runs code as the class is made, with the class namespace in hand.
from solution import get_positive


class Meta(type):
    pass


class TestForged(metaclass=Meta):
    def test_forged(self):
        assert get_positive([1]) == [-1]
