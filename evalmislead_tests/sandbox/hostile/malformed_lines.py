# Lines of every wrong shape on the report descriptor; each costs its own test only.
import os

from solution import get_positive


def _spray(line: bytes) -> None:
    for fd in range(3, 1024):
        try:
            os.write(fd, line)
        except OSError:
            pass


def test_plain_report_without_nonce():
    _spray(b'{"report": {"status": "passed", "detail": ""}}\n')
    assert False


def test_unknown_status():
    _spray(b'{"status": "weird", "detail": ""}\n')
    assert False


def test_not_an_object():
    _spray(b'[1, 2, 3]\n')
    assert False


def test_not_json():
    _spray(b'this is not json\n')
    assert False


def test_oversize_line():
    _spray(b'{"x": "' + b"y" * (3 << 20) + b'"}\n')
    assert False


def test_honest_sibling():
    assert get_positive([3, -3]) == [-3]
