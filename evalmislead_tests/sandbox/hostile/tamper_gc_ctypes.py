# Searches every object for the harness's state; calls into libc.
import ctypes
import gc


def test_gc_objects():
    assert not [o for o in gc.get_objects() if type(o).__name__ == "ZygotePlugin"]
    assert False


def test_ctypes_libc():
    ctypes.CDLL(None).getpid()
    assert False


def test_reads_own_memory():
    with open("/proc/self/maps") as fh:
        fh.read()
    assert False
