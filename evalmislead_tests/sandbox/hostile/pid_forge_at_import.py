# The module writes {"init": PID} lines at import, before its ids: the old zygote took them as the
# namespace's init. Now the collection message has one shape: the file cannot be used (crashed).
import os

CANARY = __CANARY__
for fd in range(3, 1024):
    try:
        os.write(fd, b'{"init": %d}\n' % CANARY)
    except OSError:
        pass


def test_never_runs():
    assert True
