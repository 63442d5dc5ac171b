# A file left by one test outside its own folder is gone for the next test of the same file.
import os

from solution import get_positive

AT_IMPORT = "made_at_import.txt"
with open(AT_IMPORT, "w") as fh:
    fh.write("import")


def test_leaves_files_behind():
    here = os.getcwd()
    with open(os.path.join(here, "..", "leftover.txt"), "w") as fh:
        fh.write("x")
    os.makedirs(os.path.join(here, "..", "leftdir"), exist_ok=True)
    assert get_positive([-1]) == [-1]


def test_sees_no_leftover():
    up = os.path.join(os.getcwd(), "..")
    assert not os.path.exists(os.path.join(up, "leftover.txt"))
    assert not os.path.exists(os.path.join(up, "leftdir"))
    assert os.path.exists(os.path.join(up, AT_IMPORT))  # the state right after import stays
