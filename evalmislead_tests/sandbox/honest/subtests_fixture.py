# pytest's `subtests` fixture (built into pytest >= 9, pytest-subtests before): a failing block fails the test.
from solution import get_positive


def test_keeps_positives(subtests):
    for x in [3, 5]:
        with subtests.test(msg="positive", x=x):
            assert get_positive([x, -x]) == [x]


def test_keeps_negatives(subtests):
    for x in [3, 5]:
        with subtests.test(x=x):
            assert get_positive([-x, x]) == [-x]


def test_wrong_on_both(subtests):
    with subtests.test(msg="empty"):
        assert get_positive([]) == []
    with subtests.test(msg="zero"):
        assert get_positive([0]) == [0]


def test_all_blocks_pass(subtests):
    with subtests.test(msg="empty"):
        assert get_positive([]) == []
