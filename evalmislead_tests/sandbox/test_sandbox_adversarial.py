"""The adversarial corpus (evalmislead_tests/sandbox/hostile/) through the real sandbox, as root and
as an unprivileged user; every class of the issue: PID forging, malformed lines, forged verdicts and
harness tampering, IPC / sibling folder / /proc / leftover files / disk size, the caps, mutant runs.

The expectations are in sandbox_corpus.py (one per test of each file). The static scan is off
there, so these measure the runtime defences; test_sandbox_tamper.py checks that the static scan
flags the same files before they run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from evalmislead_tests import sandbox_corpus
from evalmislead_tests.sandbox_as_user import can_drop_privileges, json_result, run_python_as_user


@pytest.fixture
def open_base():
    """A batch folder every user can traverse (the tests' own uid must reach it; pytest's tmp_path is
    below a 0700 folder): removed afterwards."""
    base = tempfile.mkdtemp(prefix="evalmislead-corpus-")
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_corpus_holds_in_this_process(open_base: str) -> None:
    """As root (CI): full isolation with a uid of its own; as a normal user: the user-namespace path."""
    result = sandbox_corpus.run_corpus(open_base)
    assert sandbox_corpus.check(result) == []
    iso = result["isolation"]
    assert iso["chain_namespaces"] and iso["pid_namespace"] and iso["network"] and iso["readonly_fs"]
    assert iso["test_namespaces"]  # each test process in its own user, IPC and network namespace
    assert iso["user_namespace"] == (os.geteuid() != 0)


@pytest.mark.slow
@pytest.mark.skipif(not can_drop_privileges(), reason="already unprivileged: test_corpus_holds_in_this_process "
                    "is the unprivileged run")
def test_corpus_holds_as_an_unprivileged_user() -> None:
    home = Path(tempfile.mkdtemp(prefix="evalmislead-user-"))
    try:
        code = ("import json, os\nfrom evalmislead_tests.sandbox_corpus import run_corpus\n"
                "base = os.path.join(os.environ['HOME'], 'base')\nos.mkdir(base)\n"
                "print(json.dumps(run_corpus(base)))\n")
        result = json_result(run_python_as_user(code, home))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert result["uid"] == 65534
    assert sandbox_corpus.check(result) == []
    assert result["isolation"]["user_namespace"] and result["isolation"]["chain_namespaces"]
    assert result["isolation"]["readonly_fs"] and result["isolation"]["pid_namespace"]
    assert result["isolation"]["test_namespaces"]


@pytest.mark.parametrize("os_isolation", [True, False], ids=["isolated", "degraded"])
def test_no_pid_from_the_test_side_is_ever_signalled(os_isolation: bool) -> None:
    """The old zygote SIGKILLed the {"init": PID} / {"started": PID} a test wrote (without a PID
    namespace, the "started" pid's whole group): a host process of the test's choosing died."""
    import signal
    import subprocess
    import sys

    from evalmislead_assets.sandbox.host import Limits, Module, Sandbox

    canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        box = Sandbox(Limits(timeout_s=1.5), workers=1, os_isolation=os_isolation, static_scan=False)
        src_a = sandbox_corpus.source("pid_forge_while_running.py", canary.pid)
        src_b = sandbox_corpus.source("pid_forge_started.py", canary.pid)
        ran = box.run([(Module(sandbox_corpus.BUGGY, src_a), "test_forges_init_then_hangs"),
                       (Module(sandbox_corpus.BUGGY, src_a), "test_honest_after"),
                       (Module(sandbox_corpus.BUGGY, src_b), "test_forges_started_pid")])
        assert [r.status for r in ran] == ["crashed", "passed", "crashed"], [r.detail for r in ran]
        assert all("malformed message" in r.detail for r in (ran[0], ran[2]))
        assert canary.poll() is None
    finally:
        canary.send_signal(signal.SIGKILL)
        canary.wait()
