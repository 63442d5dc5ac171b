"""WarmSandbox (host.py): zygotes that outlive their batch serve the next one with the statuses a fresh
sandbox gives, nothing a test writes reaches the next batch, and close() ends them and removes their folder."""

from __future__ import annotations

import os
from pathlib import Path

from evalmislead_assets.sandbox.host import Module, Sandbox, WarmSandbox

BUGGY = "def get_positive(l):\n    return [e for e in l if e < 0]\n"
FIXED = "def get_positive(l):\n    return [e for e in l if e > 0]\n"
TESTS = """
from solution import get_positive

def test_keeps_positives():
    assert get_positive([1, -1]) == [1]

def test_empty():
    assert get_positive([]) == []
"""
# writes beside its module and into the folder above: a later batch must not see either
LEAVES_FILES = """
import os
from solution import get_positive

def test_leaves_files():
    for folder in (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))):
        try:
            with open(os.path.join(folder, "conftest.py"), "w") as fh:
                fh.write("import pytest\\n@pytest.fixture(autouse=True)\\ndef _x():\\n    raise SystemExit(3)\\n")
        except OSError:
            pass
    assert get_positive([2]) == [2]
"""
IDS = ["test_keeps_positives", "test_empty"]


def _runs(tests: str, ids: list[str]) -> list[tuple[Module, str]]:
    return [(Module(code, tests), t) for t in ids for code in (BUGGY, FIXED)]


def test_the_next_batch_runs_in_the_same_zygotes_with_the_same_statuses() -> None:
    fresh = [r.status for r in Sandbox(workers=1).run(_runs(TESTS, IDS))]
    assert fresh == ["failed", "passed", "passed", "passed"]
    warm = WarmSandbox(workers=1)
    try:
        first = [r.status for r in warm.run(_runs(LEAVES_FILES, ["test_leaves_files"]))]
        assert first == ["failed", "passed"]
        started = warm.started
        home = warm.home
        assert started == 1 and home is not None and os.path.isdir(home)
        second = [r.status for r in warm.run(_runs(TESTS, IDS))]
        assert second == fresh  # no conftest.py the earlier batch wrote reached these tests
        kept = bool(warm.isolation and warm.isolation.chain_namespaces)
        assert warm.started == (started if kept else started + 1)  # kept only where each run has its own tmpfs
        assert not list(Path(home).glob("evalmislead-sandbox-*"))  # each batch's folder is gone after it
    finally:
        warm.close()
    assert not os.path.exists(home) and warm.home is None
