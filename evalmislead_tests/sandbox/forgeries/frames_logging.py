# Frames through logging.currentframe() (no audit event): walk up to the harness and rewrite its report.
import logging

from solution import get_positive


def test_forged():
    frame = logging.currentframe()
    while frame is not None and "report" not in frame.f_locals:
        frame = frame.f_back
    assert get_positive([1]) == [-1]
