# `from json import codecs` binds the codecs module (json imported it): codecs.open reads any file.
from json import codecs


def test_forged():
    with codecs.open("solution.py") as f:
        assert "e < 0" in f.read()
