"""The per-test runners (JS, Java) against the naive baselines (a fresh `node --test` / console launcher per run).

    .venv/bin/python benchmarks/polyglot_runner.py [--language js|java] [--problems 0-9] [--workers 2] [--timeout 10]

Corpus: for each HumanEvalPack problem in the range, each check of the dataset's own test becomes one test,
the shape of a generated test file: JavaScript's ``console.assert(e)`` calls become
``test('check_k', () => { assert.ok(e); })``; Java's ``Arrays.asList(e1, e2, ...)`` of booleans becomes
``@Test void check_k() { assertTrue(e_k); }`` (problems whose test has another shape are left out).
Every test id runs against the buggy and the fixed version (a "run").
The runners (polyglot.js_runner, polyglot.java_runner) confine each run (namespaces, read-only filesystem,
rlimits) and read the verdict from the harness's nonce line; the baselines run ``node --test
--test-name-pattern ^id$ FILE`` or ``java -jar junit-platform-console-standalone.jar --select-method
Class#id`` in a plain temporary folder and read the exit code. Java compiles once per version, shared by
both and not timed. Both use the same worker count and time limit. Printed: runs per second of each, the
ratio, and whether every run got the same verdict (passed or not) from both (asserted).
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

from evalmislead_assets.polyglot import java_runner, js_runner
from evalmislead_assets.polyglot.problems import load_problems
from evalmislead_assets.polyglot.process import ProcessLimits
from evalmislead_assets.sandbox.processes import signal_group


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


def top_level_split(text: str) -> list[str]:
    """``text`` split at commas outside brackets and string literals."""
    parts, depth, cur, quote, i = [], 0, "", "", 0
    while i < len(text):
        c = text[i]
        if quote:
            cur += c
            if c == "\\":
                cur += text[i + 1]
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote, cur = c, cur + c
        elif c in "([{":
            depth, cur = depth + 1, cur + c
        elif c in ")]}":
            depth, cur = depth - 1, cur + c
        elif c == "," and depth == 0:
            parts, cur = parts + [cur.strip()], ""
        else:
            cur += c
        i += 1
    return parts + ([cur.strip()] if cur.strip() else [])


_JAVA_MAIN = re.compile(r"Solution s = new Solution\(\);\s*List<Boolean> correct = Arrays\.asList\((.*)\);\s*"
                        r"if \(correct\.contains\(false\)\)", re.S)


def java_corpus(indices: list[int]) -> list[tuple[str, str, str, list[str]]]:
    cases = []
    for p in load_problems("java"):
        m = _JAVA_MAIN.search(p.test)
        if p.problem_idx not in indices or not m:
            continue
        exprs = top_level_split(m.group(1))
        body = "".join(f"    @Test void check_{k}() {{ Solution s = new Solution(); assertTrue({e}); }}\n"
                       for k, e in enumerate(exprs))
        source = ("import org.junit.jupiter.api.*;\nimport static org.junit.jupiter.api.Assertions.*;\n"
                  f"import java.util.*;\n\npublic class SolutionTest {{\n{body}}}\n")
        cases.append((source, p.buggy_code, p.fixed_code, [f"check_{k}" for k in range(len(exprs))]))
    return cases


def run_naive_java(classes: dict[str, bytes], test_id: str, timeout_s: float) -> str:
    with tempfile.TemporaryDirectory(prefix="evalmislead-naive-") as tmp:
        for name, data in classes.items():
            Path(tmp, "classes", name).parent.mkdir(parents=True, exist_ok=True)
            Path(tmp, "classes", name).write_bytes(data)
        proc = subprocess.Popen([java_runner.JAVA, "-jar", java_runner.JUNIT_JAR, "--class-path", "classes",
                                 "--select-method", f"SolutionTest#{test_id}", "--disable-banner",
                                 "--fail-if-no-tests"], cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
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


def java_main(args: argparse.Namespace, indices: list[int]) -> None:
    cases = java_corpus(indices)
    runs, uid = [], "[engine:junit-jupiter]/[class:SolutionTest]/[method:{}()]"
    for src, buggy, fixed, ids in cases:
        for module in (buggy, fixed):
            classes, error = java_runner.compile_version(src, module)
            assert error is None, error
            runs += [(src, classes, t) for t in ids]
    print(f"{len(cases)} problems, {len(runs) // 2} tests, {len(runs)} runs, {args.workers} workers, "
          f"{os.path.basename(java_runner.JAVA_HOME)}, {os.cpu_count()} CPUs")
    limits = ProcessLimits(timeout_s=args.timeout)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        start = time.monotonic()
        ours = list(pool.map(lambda r: java_runner.run_tests(r[0], r[1], [uid.format(r[2])], limits, 1)[0].status,
                             runs))
        ours_s = time.monotonic() - start
        start = time.monotonic()
        naive = list(pool.map(lambda r: run_naive_java(r[1], r[2], args.timeout), runs))
        naive_s = time.monotonic() - start
    report(runs, ours, ours_s, naive, naive_s)


def report(runs: list, ours: list[str], ours_s: float, naive: list[str], naive_s: float) -> None:
    same = sum((a == "passed") == (b == "passed") for a, b in zip(ours, naive))
    print(f"per-test runner: {ours_s:.1f} s, {len(runs) / ours_s:.2f} runs/s")
    print(f"naive baseline:  {naive_s:.1f} s, {len(runs) / naive_s:.2f} runs/s")
    print(f"ratio (naive time / runner time): {naive_s / ours_s:.2f}")
    print(f"same verdict (passed or not): {same}/{len(runs)}")
    assert same == len(runs), [(r[2], a, b) for r, a, b in zip(runs, ours, naive) if (a == "passed") != (b == "passed")]


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
    ap.add_argument("--language", choices=("js", "java"), default="js")
    ap.add_argument("--problems", default="0-9")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0)
    args = ap.parse_args()
    lo, _, hi = args.problems.partition("-")
    indices = list(range(int(lo), int(hi or lo) + 1))
    if args.language == "java":
        java_main(args, indices)
        return
    cases = corpus(indices)
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
    report(runs, ours, ours_s, naive, naive_s)


if __name__ == "__main__":
    main()
