# typing.sys is the sys module reached through another door: the allow list of `import sys` (no stdout) does
# not see it, and under -s sys.stdout's buffer is (or wraps) an io.FileIO whose type opens any path.
import typing


def test_forged():
    buffer = typing.sys.stdout.buffer
    raw = getattr(buffer, "raw", buffer)
    assert b"e < 0" in type(raw)("solution.py").read()
