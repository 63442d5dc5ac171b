# Under pytest -s a test's stdout was a real file: sys.stdout.buffer.raw an io.FileIO, whose type opens any
# path (the code under test: a misleading test without calling it).
import io
import sys

from solution import get_positive


def test_stdout_opens_nothing():
    raw = sys.stdout.buffer.raw
    assert not isinstance(raw, io.FileIO)
    try:
        data = type(raw)("solution.py").read()
    except Exception:
        data = b""
    assert b"e < 0" not in (data or b"")
    print("still prints")
    assert get_positive([]) == []
