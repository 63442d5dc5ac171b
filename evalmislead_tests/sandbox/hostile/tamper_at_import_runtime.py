# Reaches frames at import, in the module process (audit hook armed before the import).
import sys

sys._getframe(0)


def test_never_runs():
    assert True
