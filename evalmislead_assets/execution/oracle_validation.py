"""Run the dataset's own check(...) oracle on the buggy and fixed version of each problem.

Each version runs in its own interpreter (isolated mode, own session, temporary
directory, 10 s limit that kills the process group); many run at once because
most of the wall time is spent waiting on the few buggy versions that never end.
The interpreter also limits itself (CPU time and an alarm, set before the dataset's
code runs), so a version that never ends dies on its own when the process that
started it is killed (a run worker ended with SIGKILL) and cannot kill its group.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pandas as pd

from evalmislead_assets.sandbox.processes import signal_group

ORACLE_TIMEOUT_S = 10.0
_OK_MARK = "EVALMISLEAD-ORACLE-PASSED"


@dataclass
class OracleResult:
    passed: bool
    detail: str
    seconds: float


def _self_limits(timeout_s: float) -> str:
    """The script's first lines: CPU seconds and a wall-clock alarm a little past the parent's timeout, no core."""
    cpu, wall = math.ceil(timeout_s) + 2, math.ceil(timeout_s) + 5
    return (f"import resource as _r, signal as _s\n_r.setrlimit(_r.RLIMIT_CORE, (0, 0))\n"
            f"_r.setrlimit(_r.RLIMIT_CPU, ({cpu}, {cpu + 1}))\n_s.alarm({wall})\ndel _r, _s\n")


def oracle_script(code: str, test: str, entry_point: str, timeout_s: float = ORACLE_TIMEOUT_S) -> str:
    # The dataset's `test` ends with check(<entry_point>); the mark printed after it is
    # the positive evidence of a pass (an early sys.exit(0) would not print it).
    return f"{_self_limits(timeout_s)}{code}\n\n{test}\n\nprint({_OK_MARK!r})\n"


def run_oracle(code: str, test: str, entry_point: str, timeout_s: float = ORACLE_TIMEOUT_S) -> OracleResult:
    script = oracle_script(code, test, entry_point, timeout_s)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="evalmislead-oracle-") as tmp:
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"}
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", script], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            signal_group(proc)
            proc.communicate()
            return OracleResult(False, f"timeout after {timeout_s:.0f} s", time.monotonic() - start)
        finally:
            signal_group(proc)
    seconds = time.monotonic() - start
    text_out = out.decode("utf-8", "replace")
    if proc.returncode == 0 and _OK_MARK in text_out:
        return OracleResult(True, "passed", seconds)
    last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
    return OracleResult(False, last[0][:500], seconds)


def validate(problems: pd.DataFrame, workers: int | None = None) -> pd.DataFrame:
    """One row per problem: did the buggy version fail and the fixed version pass the oracle?"""
    workers = workers or max(8, 4 * (os.cpu_count() or 2))
    jobs = []
    for row in problems.itertuples():
        jobs.append((row.task_id, "buggy", row.buggy_code, row.test, row.entry_point))
        jobs.append((row.task_id, "fixed", row.fixed_code, row.test, row.entry_point))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda j: run_oracle(j[2], j[3], j[4]), jobs))
    by_key = {(j[0], j[1]): r for j, r in zip(jobs, results)}
    rows = []
    for row in problems.itertuples():
        b, f = by_key[(row.task_id, "buggy")], by_key[(row.task_id, "fixed")]
        rows.append({
            "task_id": row.task_id, "problem_idx": int(row.problem_idx),
            "buggy_passed": b.passed, "fixed_passed": f.passed,
            "buggy_detail": b.detail, "fixed_detail": f.detail,
            "seconds": b.seconds + f.seconds, "valid": (not b.passed) and f.passed,
        })
    return pd.DataFrame(rows)
