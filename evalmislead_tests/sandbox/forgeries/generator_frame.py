# A generator's frame: gi_frame.f_back is whoever resumed it.
from solution import get_positive


def gen():
    yield 1


def test_forged():
    g = gen()
    next(g)
    assert g.gi_frame is not None
    assert get_positive([1]) == [-1]
