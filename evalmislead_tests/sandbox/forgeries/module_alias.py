# A module with an allow list used as a value: its names are no longer read as "sys.<name>".
import sys


def test_forged():
    interpreter = sys
    assert interpreter.modules["solution"]
