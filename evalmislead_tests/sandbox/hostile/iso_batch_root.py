# The batch folder's root (above the module and work folders) holds nothing a test leaves for the next test
# id: it is read-only, as root and as a normal user (who owns that tmpfs in its user namespace).
import os

from solution import get_positive

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # <batch>/m/test_generated.py


def test_leaves_a_file_in_the_batch_root():
    for name in ("left.txt", os.path.join("m", "left.txt")):
        try:
            with open(os.path.join(ROOT, name), "w") as fh:
                fh.write("x")
        except OSError:
            pass
    assert get_positive([]) == []


def test_finds_nothing_in_the_batch_root():
    assert sorted(os.listdir(ROOT)) == ["m", "w"]
    assert "left.txt" not in os.listdir(os.path.join(ROOT, "m"))
