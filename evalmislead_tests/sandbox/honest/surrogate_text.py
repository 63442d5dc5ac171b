# Lone surrogates (half of a UTF-16 pair, as a server that split a character sends) in a test's
# output and failure message: plain pytest's capture writes the output escaped, so the print passes.
import sys

from solution import get_positive


def test_prints_a_lone_surrogate():
    print("kept \ud800 half")
    sys.stderr.write("err \udfff\n")
    assert get_positive([-3, 3]) == [-3]


def test_fails_with_a_lone_surrogate_in_its_message():
    assert get_positive([3, -3]) == [3], "expected \ud800 positives"
