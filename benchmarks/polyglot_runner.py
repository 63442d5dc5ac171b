"""The JS per-test runner against the naive baseline (a fresh `node --test` per test id and version).

    .venv/bin/python benchmarks/polyglot_runner.py [--problems 0-19] [--workers 2] [--timeout 10]

Corpus: for each HumanEvalPack JavaScript problem in the range, each of the dataset's own
``console.assert(...)`` calls becomes one node:test test (``test('check_k', () => assert.ok(...))``), the
shape of a generated test file. Every test id runs against the buggy and the fixed version (a "run").
The runner (polyglot.js_runner) confines each run (namespaces, read-only filesystem, rlimits) and
reads its verdict from the harness's nonce line; the baseline runs ``node --test --test-name-pattern
^id$ FILE`` in a plain temporary folder and reads the exit code. Both use the same worker count and
time limit. Printed: runs per second of each, the ratio, and whether every run got the same verdict
(passed or not) from both (asserted).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalmislead_assets.polyglot import js_runner  # noqa: E402
from evalmislead_assets.polyglot.problems import load_problems  # noqa: E402
from evalmislead_assets.polyglot.process import ProcessLimits  # noqa: E402
from evalmislead_assets.sandbox.processes import signal_group  # noqa: E402


def asserts(test: str) -> list[str]:
    """The expressions of the dataset's console.assert(...) calls."""
    out, i = [], 0
    while (i := test.find("console.assert(", i)) >= 0:
        start = depth = i + len("console.assert(")
        depth, j = 1, start
        while j < len(test) and depth:
            depth += {"(": 1, ")": -1}.get(test[j], 0)
            j += 1
        out.append(test[start:j - 1].strip())
        i = j
    return out


def corpus(indices: list[int]) -> list[tuple[str, str, str, list[str]]]:
    """(test file, buggy module, fixed module, test ids) per problem."""
    cases = []
    for p in load_problems("js"):
        if p.problem_idx not in indices or p.problem_idx == 162:  # 162's test needs an npm package
            continue
        exprs = asserts(p.test)
        body = "".join(f"test('check_{k}', () => {{ assert.ok({e}); }});\n" for k, e in enumerate(exprs))
        source = (f"const {{ test }} = require('node:test');\nconst assert = require('node:assert');\n"
                  f"const {{ {p.entry_point} }} = require('./solution.js');\n\n{body}")
        ids = [f"check_{k}" for k in range(len(exprs))]
        cases.append((source, js_runner.solution_module(p.buggy_code, p.entry_point),
                      js_runner.solution_module(p.fixed_code, p.entry_point), ids))
    return cases


def run_naive(source: str, solution: str, test_id: str, timeout_s: float) -> str:
    with tempfile.TemporaryDirectory(prefix="evalmislead-naive-") as tmp:
        Path(tmp, "solution.test.cjs").write_text(source)
        Path(tmp, "solution.js").write_text(solution)
        proc = subprocess.Popen([js_runner.NODE, "--test", "--test-name-pattern", f"^{re.escape(test_id)}$",
                                 "solution.test.cjs"], cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={"PATH": "/usr/bin:/bin", "HOME": tmp})
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return "timeout"
        finally:
            signal_group(proc)
            proc.wait()
    return "passed" if code == 0 else "failed"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="0-19")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0)
    args = ap.parse_args()
    lo, _, hi = args.problems.partition("-")
    cases = corpus(list(range(int(lo), int(hi or lo) + 1)))
    runs = [(src, module, t) for src, buggy, fixed, ids in cases for module in (buggy, fixed) for t in ids]
    print(f"{len(cases)} problems, {len(runs) // 2} tests, {len(runs)} runs, {args.workers} workers, "
          f"node {subprocess.run([js_runner.NODE, '--version'], capture_output=True, text=True).stdout.strip()}, "
          f"{os.cpu_count()} CPUs")
    limits = ProcessLimits(timeout_s=args.timeout)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        start = time.monotonic()
        ours = list(pool.map(lambda r: js_runner.run_test(r[0], r[1], r[2], limits).status, runs))
        ours_s = time.monotonic() - start
        start = time.monotonic()
        naive = list(pool.map(lambda r: run_naive(r[0], r[1], r[2], args.timeout), runs))
        naive_s = time.monotonic() - start
    same = sum((a == "passed") == (b == "passed") for a, b in zip(ours, naive))
    print(f"per-test runner: {ours_s:.1f} s, {len(runs) / ours_s:.2f} runs/s")
    print(f"naive baseline:  {naive_s:.1f} s, {len(runs) / naive_s:.2f} runs/s")
    print(f"ratio (naive time / runner time): {naive_s / ours_s:.2f}")
    print(f"same verdict (passed or not): {same}/{len(runs)}")
    assert same == len(runs), [(r[2], a, b) for r, a, b in zip(runs, ours, naive) if (a == "passed") != (b == "passed")]


if __name__ == "__main__":
    main()
