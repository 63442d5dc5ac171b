# Files the module made at import are as the import left them for every test: one test rewrites a file,
# deletes another and closes a folder; the next test finds them as they were.
import os
import stat

with open("made_at_import.txt", "w") as fh:
    fh.write("import")
os.makedirs("import_dir", exist_ok=True)
with open(os.path.join("import_dir", "inner.txt"), "w") as fh:
    fh.write("inner")
DIR_MODE = stat.S_IMODE(os.stat("import_dir").st_mode)


def _up(*parts):
    return os.path.join(os.getcwd(), "..", *parts)


def test_changes_the_import_files():
    with open(_up("made_at_import.txt"), "w") as fh:
        fh.write("changed by a test")
    os.unlink(_up("import_dir", "inner.txt"))
    os.chmod(_up("import_dir"), 0o500)


def test_finds_them_as_the_import_left_them():
    with open(_up("made_at_import.txt")) as fh:
        assert fh.read() == "import"
    with open(_up("import_dir", "inner.txt")) as fh:
        assert fh.read() == "inner"
    assert stat.S_IMODE(os.stat(_up("import_dir")).st_mode) == DIR_MODE
