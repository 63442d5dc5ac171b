"""The chain -> zygote protocol has fixed shapes; nothing else is acted on, no line carries a
PID, an oversize line is skipped whole, and the runs' caps are the file's error."""

from __future__ import annotations

import os
import time

import pytest

from evalmislead_assets.sandbox import protocol as sp
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox
from evalmislead_assets.sandbox.ipc import OVERSIZE, LineReader


def test_collection_message_has_one_shape() -> None:
    assert sp.parse_collected(b'{"ids": ["test_a"], "error": null}', 10, 20) == {"ids": ["test_a"], "error": None}
    assert sp.parse_collected(b'{"tampered": "x"}', 10, 20) == {"tampered": "x"}
    for bad in (b'{"init": 1}', b'{"init": -1}', b'[1]', b'"s"', b'nope', b'{"ids": "a", "error": null}',
                b'{"ids": [1], "error": null}', b'{"ids": [], "error": null, "init": 5}'):
        with pytest.raises(sp.Malformed):
            sp.parse_collected(bad, 10, 20)
    with pytest.raises(sp.Malformed, match="too many tests: 11 > 10"):
        sp.parse_collected(b'{"ids": [%s], "error": null}' % b",".join(b'"t%d"' % i for i in range(11)), 10, 20)


def test_the_set_up_line_has_two_shapes() -> None:
    """The module process's first line, written before the test module runs, says whether the
    runner could set it up; anything else there is malformed (and a runner failure, never the file's)."""
    assert sp.parse_setup(b'{"setup": "ok"}') is None
    assert sp.parse_setup(b'{"setup": "failed", "error": "OSError: x"}') == "OSError: x"
    for bad in (b'{"ids": [], "error": null}', b'{"setup": "ok", "error": "x"}', b'{"setup": "maybe", "error": "x"}',
                b'{"setup": "failed", "error": 1}', b'{"setup": "failed"}', b"[]", b"nope"):
        with pytest.raises(sp.Malformed):
            sp.parse_setup(bad)


def test_test_messages_need_the_nonce_and_a_known_status() -> None:
    assert sp.parse_prefixed('{"status": "passed", "detail": ""}', "t", 600) == {"report": {"status": "passed",
                                                                                          "detail": ""}}
    assert sp.parse_prefixed('{"done": "t", "code": 0}', "t", 600) == {"done": "t", "code": 0}
    for bad in ('{"status": "weird", "detail": ""}', '{"status": "tampered", "detail": ""}', '[1]',
                '{"done": "other", "code": 0}', '{"done": "t", "code": "0"}', '{"started": true, "pid": 1}'):
        with pytest.raises(sp.Malformed):
            sp.parse_prefixed(bad, "t", 600)
    assert sp.parse_unprefixed('{"tampered": "frames"}') == {"tampered": "frames"}
    for bad in ('{"report": {"status": "passed"}}', '{"done": "t", "code": 0}', '{"init": 1}', "x"):
        with pytest.raises(sp.Malformed):
            sp.parse_unprefixed(bad)


def test_an_oversize_line_is_skipped_whole_and_the_next_line_survives() -> None:
    """The old reader kept the last 1 MiB of a longer line and glued it to what followed."""
    r, w = os.pipe()
    reader = LineReader(r, cap=1000)
    payload = b"x" * 5000 + b"\n" + b'{"ok": 1}\n'
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, payload)
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + 10
    assert reader.line(deadline) is OVERSIZE
    assert reader.line(deadline) == b'{"ok": 1}'
    assert reader.line(deadline) is None and reader.eof
    os.waitpid(pid, 0)
    os.close(r)


CAPS = Limits(timeout_s=5.0, max_tests=50, max_id_chars=100)


def test_caps_on_tests_and_id_length_are_the_files_error() -> None:
    many = "import pytest\n@pytest.mark.parametrize('i', range(60))\ndef test_p(i):\n    pass\n"
    long_ids = ("import pytest\n@pytest.mark.parametrize('x', [pytest.param(1, id='a' * 150)])\n"
                "def test_p(x):\n    pass\n")
    ok = "def test_a():\n    pass\n"
    got = Sandbox(CAPS, workers=1).collect([Module("", many), Module("", long_ids), Module("", ok)])
    assert (got[0].test_ids, got[0].error) == ([], "too many tests: 60 > 50")
    assert (got[1].test_ids, got[1].error) == ([], "test id too long: 158 > 100 characters")
    assert (got[2].test_ids, got[2].error) == (["test_a"], None)


def test_a_shorter_time_limit_keeps_the_same_cpu_limit() -> None:
    """RLIMIT_CPU in the test process does not follow timeout_s, so a mutant run (shorter limit) cannot tell."""
    import dataclasses

    limits = Limits(timeout_s=10.0)
    assert dataclasses.replace(limits, timeout_s=2.0).cpu_s == limits.cpu_s == 12
    assert Limits(timeout_s=30.0).cpu_s == 32
