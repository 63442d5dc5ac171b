"""The dataset's own oracle per problem and version, for JavaScript and Java: buggy must fail, fixed pass.

Each version runs in one confined process (process.py: own namespaces, read-only filesystem, rlimits, a
10 s limit that kills all it started). A pass needs positive evidence: a mark that the harness line after
the dataset's test prints to stdout (the oracle is the dataset's code, trusted, so stdout is enough here);
an early exit, an exception or a timeout is a fail.

- JavaScript: ``console.assert`` only logs, so the script first replaces it with one that throws.
- Java: one source file run in source-file mode (``java File.java``, compiled in memory): the declaration's
  imports, then an entry class whose ``main`` calls the dataset's ``Main.main`` and prints the mark, then the
  dataset's ``Main`` and the ``Solution`` class.
"""

from __future__ import annotations

import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from evalmislead_assets.polyglot.java_oracle import run_batch
from evalmislead_assets.polyglot.java_runner import JAVA, JAVA_ENV
from evalmislead_assets.polyglot.problems import Problem
from evalmislead_assets.polyglot.process import ProcessLimits, run_confined

ORACLE_TIMEOUT_S = 10.0
MARK = "EVALMISLEAD-ORACLE-PASSED"
NODE = shutil.which("node") or "/usr/bin/node"
_JS_PRELUDE = ("console.assert = (cond, ...msg) => { if (!cond) throw new Error("
               "'Assertion failed' + (msg.length ? ': ' + msg.join(' ') : '')); };\n")


@dataclass
class OracleResult:
    passed: bool
    detail: str
    seconds: float


def split_imports(java: str) -> tuple[list[str], str]:
    """A Java source's import lines and the rest."""
    lines = java.splitlines()
    imports = [ln for ln in lines if ln.strip().startswith("import ")]
    return imports, "\n".join(ln for ln in lines if not ln.strip().startswith("import "))


def js_oracle_files(code: str, test: str) -> tuple[list[str], dict[str, str]]:
    script = f"{_JS_PRELUDE}{code}\n\n{test}\n\nprocess.stdout.write({MARK!r} + '\\n');\n"
    return [NODE, "--max-old-space-size=512", "oracle.js"], {"oracle.js": script}


def java_oracle_files(code: str, test: str) -> tuple[list[str], dict[str, str]]:
    imports, rest = split_imports(code)
    test_imports, test_rest = split_imports(test)
    entry = (f"public class OracleEntry {{ public static void main(String[] a) throws Exception "
             f"{{ Main.main(a); System.out.println(\"{MARK}\"); }} }}\n")
    source = "\n".join(dict.fromkeys(imports + test_imports)) + "\n" + entry + test_rest + "\n" + rest + "\n"
    return [JAVA, "-Xmx256m", "-Xss8m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "Oracle.java"], \
        {"Oracle.java": source}


def run_oracle(language: str, code: str, test: str, timeout_s: float = ORACLE_TIMEOUT_S) -> OracleResult:
    cmd, files = (js_oracle_files if language == "js" else java_oracle_files)(code, test)
    run = run_confined(cmd, files, ProcessLimits(timeout_s=timeout_s), env=JAVA_ENV if language == "java" else None)
    if run.timed_out:
        return OracleResult(False, f"timeout after {timeout_s:.0f} s", run.seconds)
    if run.exit_code == 0 and MARK in run.stdout.splitlines():
        return OracleResult(True, "passed", run.seconds)
    lines = [ln.strip() for ln in run.stderr.splitlines() if ln.strip() and not ln.startswith("confine:")]
    errors = [ln for ln in lines if re.match(r"^(\w+\.)*\w*(Error|Exception)\b|.*\berror:|Exception in thread", ln)]
    return OracleResult(False, ((errors or lines or [f"exit code {run.exit_code}"])[0])[:500], run.seconds)


@dataclass
class Validation:
    task_id: str
    problem_idx: int
    buggy: OracleResult
    fixed: OracleResult

    @property
    def valid(self) -> bool:
        return self.fixed.passed and not self.buggy.passed

    @property
    def reason(self) -> str:
        """Why the problem is excluded ("" when valid)."""
        if self.valid:
            return ""
        parts = []
        if not self.fixed.passed:
            parts.append(f"fixed version fails the dataset's test: {self.fixed.detail}")
        if self.buggy.passed:
            parts.append("buggy version passes the dataset's test")
        return "; ".join(parts)


def validate(problems: list[Problem], workers: int | None = None, java_batch: bool = True) -> list[Validation]:
    """Both versions of every problem through the oracle, ``workers`` at a time (default: the CPU count).

    Java first goes through one batch JVM (java_oracle.py); every version the batch did not settle as
    expected (no line, fixed not passing, buggy passing, or a failure another program in the same JVM could
    have caused: a timeout, running out of memory) runs again in a process of its own, whose result counts,
    so the batch only saves time and never decides an exclusion."""
    jobs = [(p, v) for p in problems for v in ("buggy", "fixed")]
    settled: dict[tuple[str, str], OracleResult] = {}
    if java_batch and any(p.language == "java" for p in problems):
        batch = run_batch([p for p in problems if p.language == "java"], ORACLE_TIMEOUT_S)
        for (task_id, version), (passed, detail) in batch.items():
            shared_jvm_effect = detail.startswith(("timeout", "java.lang.OutOfMemoryError", "no result"))
            if passed == (version == "fixed") and not shared_jvm_effect:
                settled[(task_id, version)] = OracleResult(passed, detail, 0.0)

    def one(job: tuple[Problem, str]) -> OracleResult:
        p, version = job
        if (p.task_id, version) in settled:
            return settled[(p.task_id, version)]
        return run_oracle(p.language, p.buggy_code if version == "buggy" else p.fixed_code, p.test)

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2) as pool:
        results = list(pool.map(one, jobs))
    by = {(p.task_id, v): r for (p, v), r in zip(jobs, results)}
    return [Validation(p.task_id, p.problem_idx, by[(p.task_id, "buggy")], by[(p.task_id, "fixed")])
            for p in problems]
