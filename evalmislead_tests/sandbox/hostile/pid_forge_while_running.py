# A test that writes the old protocol's {"init": PID} line (and kill(-1)'s -1) on every descriptor,
# then hangs: the old zygote SIGKILLed that PID on the timeout. The canary must live.
import os
import time

from solution import get_positive

CANARY = __CANARY__


def _spray(line: bytes) -> None:
    for fd in range(3, 1024):
        try:
            os.write(fd, line)
        except OSError:
            pass


def test_honest_before():
    assert get_positive([1, -1]) == [-1]


def test_forges_init_then_hangs():
    _spray(b'{"init": %d}\n{"init": -1}\n' % CANARY)
    time.sleep(30)


def test_honest_after():
    assert get_positive([2, -2]) == [-2]
