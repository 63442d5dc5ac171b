"""The sandbox against a hostile corpus: every hazard gets its own status, the run survives,
nothing outside a test's temporary directory changes, and the other tests' statuses do not move."""

import hashlib
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from evalmislead_assets.sandbox import host as sandbox
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox

REPO = Path(__file__).resolve().parents[2]
BUGGY = "def get_positive(l):\n    return [e for e in l if e < 0]\n"
FIXED = "def get_positive(l):\n    return [e for e in l if e > 0]\n"
NORMAL = """
from solution import get_positive

def test_keeps_negatives():
    assert get_positive([1, -1]) == [-1]

def test_keeps_positives():
    assert get_positive([1, -1]) == [1]

def test_empty():
    assert get_positive([]) == []
"""
NORMAL_IDS = ["test_keeps_negatives", "test_keeps_positives", "test_empty"]

HOSTILE = """
import os, signal, socket, subprocess, sys, time
import pytest
from solution import get_positive

STATE = []

def test_first_normal():
    assert get_positive([1, -1]) == [-1]

def test_infinite_loop():
    while True:
        pass

def test_fork_bomb():
    while True:
        try:
            os.fork()
        except OSError:
            pass

def test_memory_hog():
    hog = []
    while True:
        hog.append(b"x" * (32 * 1024 * 1024))

def test_sys_exit_0():
    sys.exit(0)

def test_os_exit_0():
    os._exit(0)

def test_kill_parent():
    os.kill(os.getppid(), signal.SIGKILL)

def test_killpg_own_group():
    os.killpg(os.getpgid(0), signal.SIGKILL)

def test_kill_every_process():
    os.kill(-1, signal.SIGKILL)

def test_output_flood():
    while True:
        sys.stdout.write("x" * 65536)

def test_ignores_sigterm():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(0.05)

def test_daemon_left_behind():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # MARKER"],
                     start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def test_write_into_repo():
    open(REPO_FILE, "w").write("pwned")

def test_append_to_db():
    open(DB_FILE, "ab").write(b"pwned")

def test_write_tmp_outside_own_dir():
    open(TMP_FILE, "w").write("pwned")

def test_overwrite_code_under_test():
    open(os.path.join(os.path.dirname(__file__), "solution.py"), "w").write("def get_positive(l): return []")

def test_write_own_dir(tmp_path):
    (tmp_path / "a.txt").write_text("ok")
    open("b.txt", "w").write("ok")
    assert os.path.exists("b.txt") and os.getcwd() != os.path.dirname(__file__)

def test_network():
    socket.create_connection(("1.1.1.1", 80), timeout=2)

def test_environment_scrubbed():
    assert "EVALMISLEAD_SECRET_CANARY" not in os.environ and os.environ["HOME"] == os.getcwd()

def test_fork_child_returns_into_harness():
    if os.fork() == 0:
        return
    time.sleep(0.2)
    assert False

def test_pytest_exit():
    pytest.exit("bye")

def test_mutates_module_state():
    STATE.append(1)
    import solution
    solution.get_positive = lambda l: ["patched"]
    assert STATE == [1]

def test_sees_fresh_module_state():
    import solution
    assert STATE == [] and solution.get_positive([2, -2]) == [-2]

def test_last_normal():
    assert get_positive([3, -3]) == [-3]
"""

EXPECTED = {
    "test_first_normal": "passed",
    "test_infinite_loop": "timeout",
    "test_fork_bomb": "timeout",
    "test_memory_hog": "limit:memory",  # the memory cap, not an assertion, ended it
    "test_sys_exit_0": "failed",
    "test_os_exit_0": "crashed",
    "test_kill_parent": "passed",  # its parent is the namespace's init, which ignores it
    "test_killpg_own_group": "crashed",
    "test_kill_every_process": "failed",  # kill(-1) spares init and the caller: nothing to kill, ESRCH
    "test_output_flood": "limit:output",
    "test_ignores_sigterm": "timeout",
    "test_daemon_left_behind": "passed",
    "test_write_into_repo": "failed",
    "test_append_to_db": "failed",
    "test_write_tmp_outside_own_dir": "failed",
    "test_overwrite_code_under_test": "failed",
    "test_write_own_dir": "passed",
    "test_network": "failed",
    "test_environment_scrubbed": "passed",
    "test_fork_child_returns_into_harness": "failed",
    "test_pytest_exit": "error",
    "test_mutates_module_state": "passed",
    "test_sees_fresh_module_state": "passed",
    "test_last_normal": "passed",
}


def _own_processes(*marks: str) -> list[str]:
    """Live processes whose command line holds one of ``marks``: a test's own. Every process a zygote forks
    keeps the zygote's argv, which names the batch's folder (under the box's own base_dir), and the daemon the
    corpus starts carries its marker. A sandbox uid alone does not say whose a process is: other tests run
    their sandboxes beside this one under xdist (another test's JavaScript oracles must not be taken for
    leftovers of this one)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        uid = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("Uid:")))
        if any(mark in cmdline for mark in marks):
            found.append(f"{pid} uid={uid} {cmdline[:120]}")
    return found


@pytest.fixture(scope="module")
def baseline() -> dict[str, str]:
    ran = Sandbox(workers=1).run([(Module(v, NORMAL), t) for v in (BUGGY, FIXED) for t in NORMAL_IDS])
    return {f"{v}:{t}": r.status for (v, t), r in zip([(v, t) for v in ("b", "f") for t in NORMAL_IDS], ran)}


def test_baseline_statuses(baseline: dict[str, str]) -> None:
    assert baseline == {"b:test_keeps_negatives": "passed", "b:test_keeps_positives": "failed", "b:test_empty": "passed",
                        "f:test_keeps_negatives": "failed", "f:test_keeps_positives": "passed", "f:test_empty": "passed"}


@pytest.mark.slow
def test_hostile_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, baseline: dict[str, str]) -> None:
    monkeypatch.setenv("EVALMISLEAD_SECRET_CANARY", "do-not-leak")
    db = tmp_path / "study.duckdb"
    db.write_bytes(b"DUCK" * 1000)
    db_hash = hashlib.sha256(db.read_bytes()).hexdigest()
    repo_file = REPO / f"pwned-{uuid.uuid4().hex}.txt"
    tmp_file = Path("/tmp") / f"evalmislead-escape-{uuid.uuid4().hex}"
    marker = f"EVALMISLEAD-DAEMON-{uuid.uuid4().hex}"
    source = HOSTILE.replace("MARKER", marker) + (f"\nREPO_FILE = {str(repo_file)!r}\nDB_FILE = {str(db)!r}"
                                                  f"\nTMP_FILE = {str(tmp_file)!r}\n")
    # A base folder of this test's own (every user can traverse /tmp) names its processes; see _own_processes
    base = Path(tempfile.mkdtemp(prefix="evalmislead-hostile-"))
    base.chmod(0o755)
    try:
        _run_hostile_corpus(base, marker, source, db, db_hash, repo_file, tmp_file, baseline)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_hostile_corpus(base: Path, marker: str, source: str, db: Path, db_hash: str, repo_file: Path,
                        tmp_file: Path, baseline: dict[str, str]) -> None:
    box = Sandbox(Limits(timeout_s=2.0, memory_mb=256), workers=2, base_dir=str(base))
    ids = box.collect([Module(BUGGY, source)])[0].test_ids
    assert ids == list(EXPECTED)
    # The hostile module runs while a normal module runs beside it (two workers).
    requests = [(Module(BUGGY, source), t) for t in ids] + [(Module(v, NORMAL), t) for v in (BUGGY, FIXED)
                                                           for t in NORMAL_IDS]
    ran = box.run(requests)
    got = {t: r.status for t, r in zip(ids, ran)}
    details = {t: r.detail for t, r in zip(ids, ran)}
    assert got == EXPECTED, details
    beside = {f"{v}:{t}": r.status for (v, t), r in zip([(v, t) for v in ("b", "f") for t in NORMAL_IDS], ran[len(ids):])}
    assert beside == baseline

    assert box.isolation is not None and box.isolation.missing() == []
    assert "MemoryError" in details["test_memory_hog"]
    assert "SystemExit" in details["test_sys_exit_0"]
    assert "exited with code 0" in details["test_os_exit_0"]
    assert "Read-only file system" in details["test_write_tmp_outside_own_dir"]  # /tmp itself is world-writable
    assert any(e in details["test_append_to_db"] for e in ("Read-only file system", "Permission denied"))
    assert any(e in details["test_write_into_repo"] for e in ("Read-only file system", "Permission denied"))
    assert "Errno" in details["test_network"]
    assert all(len(r.detail) <= Limits().detail_chars for r in ran)
    # nothing escaped: no file outside the test's directory, no process left behind
    assert not repo_file.exists() and not tmp_file.exists()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == db_hash
    assert _own_processes(str(base), marker) == []


def test_os_exit_and_sys_exit_are_never_a_pass() -> None:
    source = """
import os, sys
def test_os_exit_0():
    os._exit(0)
def test_sys_exit_0():
    sys.exit(0)
def test_exit_in_fixture_teardown(request):
    request.addfinalizer(lambda: os._exit(0))
def test_passes():
    pass
"""
    ids = ["test_os_exit_0", "test_sys_exit_0", "test_exit_in_fixture_teardown", "test_passes"]
    ran = Sandbox(workers=1).run([(Module(BUGGY, source), t) for t in ids])
    assert [r.status for r in ran] == ["crashed", "failed", "crashed", "passed"]


def test_statuses_for_pytest_outcomes() -> None:
    source = """
import pytest
from solution import get_positive

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_setup_error(broken):
    pass

def test_skip():
    pytest.skip("not today")

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert get_positive([1]) == [1]

@pytest.mark.parametrize("x", [1, -1])
def test_param(x):
    assert get_positive([x]) == ([x] if x < 0 else [])

class TestGroup:
    def test_method(self):
        assert get_positive([-5]) == [-5]
"""
    box = Sandbox(workers=1)
    ids = box.collect([Module(BUGGY, source)])[0].test_ids
    assert ids == ["test_setup_error", "test_skip", "test_xfail", "test_param[1]", "test_param[-1]",
                   "TestGroup::test_method"]
    ran = box.run([(Module(BUGGY, source), t) for t in ids + ["test_not_there"]])
    assert [r.status for r in ran] == ["error", "error", "failed", "passed", "passed", "passed", "error"]
    assert "fixture broke" in ran[0].detail and "skipped" in ran[1].detail and "xfailed" in ran[2].detail
    assert "not found" in ran[-1].detail


def test_module_that_loops_or_dies_on_import() -> None:
    loops = "while True:\n    pass\ndef test_x():\n    pass\n"
    dies = "import os\nos._exit(3)\ndef test_x():\n    pass\n"
    box = Sandbox(Limits(timeout_s=1.5), workers=2)
    loop_c, die_c = box.collect([Module(BUGGY, loops), Module(BUGGY, dies)])
    assert loop_c.test_ids == [] and "timeout" in loop_c.error
    assert die_c.test_ids == [] and "crashed" in die_c.error
    ran = box.run([(Module(BUGGY, loops), "test_x"), (Module(BUGGY, loops), "test_y"), (Module(BUGGY, dies), "test_x")])
    assert [r.status for r in ran] == ["timeout", "timeout", "crashed"]


def test_without_os_isolation_warns_once_and_enforces_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    sandbox._warned.clear()
    source = """
import os, sys
from solution import get_positive
def test_pass():
    assert get_positive([-1]) == [-1]
def test_fail():
    assert get_positive([1]) == [1]
def test_loop():
    while True:
        pass
def test_os_exit():
    os._exit(0)
def test_sys_exit():
    sys.exit(0)
def test_memory():
    bytearray(8 * 1024 ** 3)
"""
    ids = ["test_pass", "test_fail", "test_loop", "test_os_exit", "test_sys_exit", "test_memory"]
    with caplog.at_level(logging.WARNING, logger="evalmislead_assets.sandbox.host"):
        box = Sandbox(Limits(timeout_s=1.5), workers=2, os_isolation=False)
        ran = box.run([(Module(BUGGY, source), t) for t in ids])
        Sandbox(Limits(timeout_s=1.5), workers=1, os_isolation=False).run([(Module(BUGGY, source), "test_pass")])
    assert [r.status for r in ran] == ["passed", "failed", "timeout", "crashed", "failed", "limit:memory"]
    assert box.isolation is not None and set(box.isolation.missing()) == {
        "no-network namespace", "read-only filesystem", "PID namespace", "separate user id",
        "per-run mount/IPC namespaces", "per-test IPC/network namespaces"}
    warnings = [r.message for r in caplog.records if "running without" in r.message]
    assert len(warnings) == 1 and "limits still apply" in warnings[0]


def test_a_runner_that_cannot_start_fails_the_batch_instead_of_scoring_zero_tests(monkeypatch) -> None:
    """No test code runs before a zygote is ready: a start failure is the machine's, never the tests'."""
    import evalmislead_assets.sandbox.host as sandbox_mod

    def broken(*args, **kwargs):
        raise RuntimeError("sandbox zygote failed to start: exit code 1")

    monkeypatch.setattr(sandbox_mod, "start_zygote", broken)
    sb = sandbox_mod.Sandbox(workers=2)
    module = sandbox_mod.Module("def f():\n    return 1\n", "from solution import f\n\ndef test_f():\n    assert f() == 1\n")
    with pytest.raises(sandbox_mod.SandboxUnavailable) as info:
        sb.collect([module])
    assert "\n" not in str(info.value) and "re-run" in str(info.value) and "exit code 1" in str(info.value)
    with pytest.raises(sandbox_mod.SandboxUnavailable):
        sb.run([(module, "test_f")])
