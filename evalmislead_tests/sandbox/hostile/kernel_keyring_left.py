# A key left by one test (or by the buggy run) is not there for the next test (or the fixed run), nor on
# the host, whether left at import or by a test: the corpus runner looks for "evalmislead-left" in its own
# keyrings afterwards.
import json
import subprocess
import sys

PROBE = r"""
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(*args):
    rc = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return rc if rc >= 0 else -ctypes.get_errno()
rings = {"session": -3, "user": -4, "user_session": -5, "process": -2}
out = {}
if sys.argv[1] == "leave":
    for name, ring in rings.items():
        out[name] = call(248, b"user", b"evalmislead-left", b"buggy-was-here", 14, ring)
else:
    for name, ring in rings.items():
        out[name] = call(250, 10, ring, b"user", b"evalmislead-left", 0)
print(json.dumps(out))
"""


def _probe(mode):
    proc = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=30)
    return json.loads(proc.stdout)


_probe("leave")  # at import too: the module process is filtered before the module runs


def test_finds_no_key_then_leaves_one():
    assert all(rc < 0 for rc in _probe("find").values())
    _probe("leave")


def test_finds_no_key_left():
    found = _probe("find")
    assert all(rc < 0 for rc in found.values()), found
