# A forged {"started": true, "pid": PID} line must not make the zygote signal that pid (the protocol has no
# such line); and a test that signals the canary itself must not reach it either.
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
