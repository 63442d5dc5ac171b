# A format method bound to a name and called by a library (json's object_hook) reads attributes named in
# the string: the code of the function under test, without calling it. The audit event comes from json's
# frame, not the test's.
import functools
import json

from solution import get_positive

READ = "{0.__code__.co_code}".format


def test_forged():
    code = json.loads("{}", object_hook=functools.partial(READ, get_positive))
    assert b"<" in code.encode()
