# {"started": true, "pid": PID} was how the old zygote learnt the test's pid (signalled without a
# PID namespace); and a test that signals the canary itself must not reach it either.
import os
import signal
import time

CANARY = __CANARY__


def test_forges_started_pid():
    for fd in range(3, 1024):
        try:
            os.write(fd, b'{"started": true, "pid": %d}\n' % CANARY)
        except OSError:
            pass
    time.sleep(30)


def test_signals_the_canary_itself():
    os.kill(CANARY, signal.SIGKILL)  # not in this PID namespace: ProcessLookupError


def test_kill_minus_one():
    os.kill(-1, signal.SIGKILL)
