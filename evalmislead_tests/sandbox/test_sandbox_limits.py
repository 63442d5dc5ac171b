"""The runner's own limits never exceed what the host allows, and a runner failure is
never stored as the model's answer having zero tests.

The runner asks each module process for 256 open files (``Limits.open_files``); under a host whose hard
limit is lower (a container, a CI runner) that ``setrlimit`` failed, the module process died before
collecting, and every file read "the test module ended its process while importing", zero tests, in every
condition. Here the sandbox runs in a child interpreter whose hard RLIMIT_NOFILE was lowered before it
started (``preexec_fn``), as such a host would start it.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from evalmislead_assets.execution.batch import build_generated_tests
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox, SandboxUnavailable
from evalmislead_assets.sandbox.limits import MINIMUM, TooLow, fit_to_host

REPO = Path(__file__).resolve().parents[2]
BUGGY = "def get_positive(l):\n    return [e for e in l if e < 0]\n"
TESTS = ("from solution import get_positive\n\ndef test_keeps_negatives(tmp_path):\n"
         "    (tmp_path / 'a.txt').write_text('x')\n    assert get_positive([1, -1]) == [-1]\n\n"
         "def test_keeps_positives():\n    assert get_positive([1, -1]) == [1]\n")
CHILD = f"""
import json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox, SandboxUnavailable
module = Module({BUGGY!r}, {TESTS!r})
try:
    box = Sandbox(Limits(timeout_s=20.0), workers=2)
    [found] = box.collect([module])
    ran = box.run([(module, t) for t in found.test_ids])
    print(json.dumps({{"ids": found.test_ids, "error": found.error, "statuses": [r.status for r in ran]}}))
except SandboxUnavailable as exc:
    print(json.dumps({{"unavailable": str(exc)}}))
"""


def _hard_nofile(n: int) -> Callable[[], None]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return lower


def _run_under_nofile(n: int) -> tuple[dict, str]:
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, preexec_fn=_hard_nofile(n), capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, f"rc {proc.returncode}: {proc.stdout[-1000:]} {proc.stderr[-2000:]}"
    return json.loads(lines[-1]), proc.stderr


def test_under_a_lower_hard_open_file_limit_files_still_collect_and_score() -> None:
    result, log = _run_under_nofile(64)
    assert result == {"ids": ["test_keeps_negatives", "test_keeps_positives"], "error": None,
                      "statuses": ["passed", "failed"]}
    assert "sandbox: lowered to what this host allows: open_files 256 -> 64" in log


def test_a_hard_limit_too_low_to_work_is_one_line_before_anything_runs() -> None:
    result, _ = _run_under_nofile(MINIMUM["open_files"] - 1)
    message = result["unavailable"]
    assert "\n" not in message and "open_files >= 32" in message and "nothing was run" in message
    assert "ulimit -H -n" in message


def test_a_request_below_what_the_runner_needs_is_refused() -> None:
    with pytest.raises(TooLow, match="open_files >= 32, and 8 was asked for"):
        fit_to_host(Limits(open_files=8))
    assert fit_to_host(Limits(open_files=MINIMUM["open_files"]))[0].open_files == MINIMUM["open_files"]


def test_a_module_process_that_cannot_set_itself_up_fails_the_batch_instead_of_scoring_zero_tests() -> None:
    """A set-up failure (here a memory limit the kernel cannot take) happens before any test code runs: the
    module process says so on its first line, and the batch stops with one line; no answer gets zero tests."""
    problems = pd.DataFrame({"task_id": ["Python/30"], "problem_idx": [30], "entry_point": ["get_positive"],
                             "buggy_code": [BUGGY], "fixed_code": [BUGGY.replace("< 0", "> 0")]}).set_index("task_id")
    answer = pd.DataFrame({"task_id": ["Python/30"], "problem_idx": [30], "response_text": [f"```python\n{TESTS}```"],
                           "finish_reason": ["stop"], "error": [None]})
    box = Sandbox(Limits(memory_mb=1 << 60), workers=2)
    with pytest.raises(SandboxUnavailable) as info:
        build_generated_tests(answer, problems, box, max_tests=10)
    message = str(info.value)
    assert "\n" not in message and "could not set up a module process: OverflowError" in message
    assert "nothing was recorded" in message
    with pytest.raises(SandboxUnavailable, match="could not set up a module process"):
        box.run([(Module(BUGGY, TESTS), "test_keeps_positives")])
