# The harness function's __code__ swapped from a thread.
import threading

from solution import get_positive


def passing():
    return None


def swap(target):
    target.__code__ = passing.__code__


def test_forged():
    threading.Thread(target=swap, args=(get_positive,)).start()
    assert get_positive([1]) == [-1]
