import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from evalmislead_assets.execution import oracle_validation as validation
from evalmislead_assets.study import problems


def test_oracle_pass_needs_the_mark_not_just_exit_zero() -> None:
    ok = validation.run_oracle("def f(x):\n    return x\n", "def check(f):\n    assert f(1) == 1\ncheck(f)", "f")
    assert ok.passed
    sneaky = validation.run_oracle("import sys\ndef f(x):\n    sys.exit(0)\n", "def check(f):\n    f(1)\ncheck(f)", "f")
    assert not sneaky.passed
    wrong = validation.run_oracle("def f(x):\n    return 2\n", "def check(f):\n    assert f(1) == 1\ncheck(f)", "f")
    assert not wrong.passed and "AssertionError" in wrong.detail


def test_oracle_times_out_an_endless_loop() -> None:
    res = validation.run_oracle("def f():\n    while True: pass\n", "f()", "f", timeout_s=1.0)
    assert not res.passed and res.detail.startswith("timeout")


def _pids_with(marker: str, *args: str) -> list[int]:
    """Processes whose command line holds ``marker`` and each of ``args`` as a whole argument."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                if marker.encode() in cmdline and all(a.encode() in cmdline.split(b"\0") for a in args):
                    pids.append(int(entry.name))
            except OSError:
                continue  # it ended while we looked
    return pids


def _cpu_limit(pid: int) -> list[str] | None:
    """The soft and hard CPU limit of a live process as /proc shows them (['7', '8'], or ['unlimited', ...]);
    None once it has ended."""
    try:
        limits = (Path("/proc") / str(pid) / "limits").read_text()
    except OSError:
        return None
    return next(ln for ln in limits.splitlines() if ln.startswith("Max cpu time")).split()[3:5]


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("body", ["while True: pass", "import time\ntime.sleep(10**6)"], ids=["spins", "sleeps"])
def test_a_version_that_never_ends_dies_on_its_own_when_its_parent_is_killed(body: str) -> None:
    """A parent (a run worker) killed with SIGKILL cannot kill the oracle's group. The oracle's own CPU limit
    (timeout + 2 s) and alarm (timeout + 5 s) end it, where before it spun as an orphan until the machine
    stopped (seen in CI: an endless buggy make_palindrome at 70 % of a core after the suite had ended)."""
    marker = f"EVALMISLEAD-ORPHAN-{uuid.uuid4().hex}"
    parent = subprocess.Popen([sys.executable, "-c", "import sys\nfrom evalmislead_assets.execution.oracle_validation "
                               "import run_oracle\nrun_oracle(sys.argv[1], 'pass', 'f', timeout_s=5.0)",
                               f"# {marker}\n{body}\n"])

    def oracle() -> list[int]:
        # The oracle runs `python -I -S -c <script>`. The parent's argv holds the marker too, and so does any
        # child the parent forks before that child execs (a short-lived helper of an import could be taken for
        # the oracle, the parent killed before the oracle started, and nothing left to test).
        return [pid for pid in _pids_with(marker, "-I", "-S", "-c") if pid != parent.pid]

    try:
        deadline = time.monotonic() + 600  # the parent imports the project first: minutes on a loaded machine
        while not oracle() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert oracle(), "the oracle never started"
    finally:
        parent.kill()
        parent.wait()
    orphans = oracle()
    assert orphans, "the oracle ended with its parent: nothing left to test"  # the parent had 5 s; it got < 1
    # The orphan sets its limits as the first lines it runs, which on a loaded machine may come well after
    # its process appeared (read at once, they may still be "unlimited"): wait for that state.
    deadline = time.monotonic() + 120  # a bound on waiting for an interpreter to start, not a speed figure
    cpu = _cpu_limit(orphans[0])
    while cpu not in (["7", "8"], None) and time.monotonic() < deadline:
        time.sleep(0.05)
        cpu = _cpu_limit(orphans[0])
    assert cpu == ["7", "8"], f"orphaned oracle {orphans[0]}: CPU limit {cpu} (None: it ended first)"
    deadline = time.monotonic() + 120  # a bound on waiting, not a speed figure: 10 s of alarm on an idle box
    while oracle() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not oracle(), f"orphaned oracle {orphans} still running"


@pytest.mark.slow
def test_all_164_pairs_validate(tmp_path) -> None:
    df = problems.load_problems(source="local", cache_dir=tmp_path / "hf-cache")
    result = validation.validate(df)
    assert len(result) == 164
    assert result["valid"].all(), result[~result["valid"]][["task_id", "buggy_detail", "fixed_detail"]]
    # the buggy versions that loop forever were stopped by the timeout, not waited for
    assert result["buggy_detail"].str.startswith("timeout").any()


# ---------------------------------------------------------------- the problem_validation asset checks

def _run_checks(db) -> dict[str, tuple[bool, dict]]:
    """all_buggy_fail / all_fixed_pass invoked directly on the DuckDB file at ``db``."""
    from dagster import build_asset_check_context

    from evalmislead_assets.assets.problems import all_buggy_fail, all_fixed_pass
    from evalmislead_assets.resources import WarehouseResource

    out = {}
    for check in (all_buggy_fail, all_fixed_pass):
        result = check(build_asset_check_context(resources={"warehouse": WarehouseResource(path=str(db))}))
        out[next(iter(check.check_specs)).name] = (result.passed, {k: v.value for k, v in result.metadata.items()})
    return out


@pytest.fixture
def validated(tmp_path, problems_df):
    """problem_validation rows from the real oracle on three real problems, stored in a fresh DuckDB file."""
    from evalmislead_assets.store.database import Warehouse

    result = validation.validate(problems_df[problems_df["problem_idx"].isin([0, 2, 30])])
    assert result["valid"].all()
    wh = Warehouse(tmp_path / "db.duckdb")
    wh.replace_rows("problem_validation", result)
    return wh, result


def test_validation_checks_pass_on_the_real_validation(validated) -> None:
    wh, _ = validated
    checks = _run_checks(wh.path)
    assert checks == {"all_buggy_fail": (True, {"buggy_passing": [], "checked": 3}),
                      "all_fixed_pass": (True, {"fixed_failing": [], "checked": 3})}


def test_all_buggy_fail_fails_when_a_buggy_version_passes(validated) -> None:
    wh, result = validated
    wh.replace_rows("problem_validation", result.assign(buggy_passed=result["problem_idx"] == 30))
    checks = _run_checks(wh.path)
    assert checks["all_buggy_fail"] == (False, {"buggy_passing": ["Python/30"], "checked": 3})
    assert checks["all_fixed_pass"][0] is True


def test_all_fixed_pass_fails_when_a_fixed_version_fails(validated) -> None:
    wh, result = validated
    wh.replace_rows("problem_validation", result.assign(fixed_passed=result["problem_idx"] != 2))
    checks = _run_checks(wh.path)
    assert checks["all_fixed_pass"] == (False, {"fixed_failing": ["Python/2"], "checked": 3})
    assert checks["all_buggy_fail"][0] is True
