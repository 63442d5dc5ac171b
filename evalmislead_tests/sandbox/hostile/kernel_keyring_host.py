# The host's keys are out of reach: a key the corpus runner planted in its own session and user keyrings
# cannot be found, requested or listed (nor its description read in /proc/keys), and no keyring can be
# joined by name (what siblings would share).
import json
import subprocess
import sys

HOST_KEY = __HOST_KEY__
PROBE = r"""
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(*args):
    rc = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return rc if rc >= 0 else -ctypes.get_errno()
desc = sys.argv[1].encode()
out = {}
for name, ring in (("session", -3), ("user", -4), ("user_session", -5), ("process", -2)):
    out["search_" + name] = call(250, 10, ring, b"user", desc, 0)
    out["list_" + name] = call(250, 11, ring, ctypes.create_string_buffer(64), 64)
out["request_key"] = call(249, b"user", desc, None, 0)
out["join_named"] = call(250, 1, b"evalmislead-shared")
for path in ("/proc/keys", "/proc/key-users"):
    try:
        with open(path) as fh:
            text = fh.read()
        out[path] = 1 if sys.argv[1] in text or "_uid" in text else -1  # the host key, the user's keyrings
    except OSError:
        out[path] = -2
print(json.dumps(out))
"""


def test_cannot_reach_the_hosts_keys():
    proc = subprocess.run([sys.executable, "-c", PROBE, HOST_KEY], capture_output=True, text=True, timeout=30)
    out = json.loads(proc.stdout)
    assert all(rc < 0 for rc in out.values()), out
