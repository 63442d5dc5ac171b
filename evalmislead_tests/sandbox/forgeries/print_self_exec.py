# exec reached through print.__self__ (the builtins module), run in a thread with no test frame.
import threading

from solution import get_positive


def test_forged():
    run = print.__self__.exec
    threading.Thread(target=run, args=("pass",)).start()
    assert get_positive([1]) == [-1]
