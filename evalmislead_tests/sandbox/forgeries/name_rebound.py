# __name__ rebound: the "__main__" block runs at import.
from solution import get_positive

__name__ = "__main__"

if __name__ == "__main__":
    open("/tmp/x", "w").write("forged")


def test_forged():
    assert get_positive([1]) == [-1]
