# At import: fcntl + F_DUPFD to swap the control pipe, and a thread that answers every request.
import fcntl
import threading

from solution import get_positive

saved = fcntl.fcntl(3, fcntl.F_DUPFD, 100)
threading.Thread(target=lambda: None, daemon=True).start()


def test_forged():
    assert get_positive([1]) == [-1]
