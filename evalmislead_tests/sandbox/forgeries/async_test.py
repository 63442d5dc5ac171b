# async code: the event loop's frames and callbacks run outside the test.
from solution import get_positive


async def helper():
    return get_positive([1])


def test_forged():
    assert helper() is not None
