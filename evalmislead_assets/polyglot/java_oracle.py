"""The Java oracle of many problems in one JVM (OracleBatch.java): one javac, one java, instead of a JVM
per version (about 2 s each, most of it compiling).

Each version's program goes into a package of its own (``package p<idx>_<version>;`` before the dataset's
imports, ``Main``, ``Solution``), so all compile in one ``javac`` run; ``OracleBatch`` then runs each
``Main`` in a thread with the 10 s limit. Both runs are confined (process.py). The caller (oracle.validate)
re-runs on its own every version the batch did not settle as expected, so a batch that dies, a thread
that cannot be stopped or a shared-JVM effect can cost time, never a wrong exclusion.
"""

from __future__ import annotations

import tempfile
from importlib import resources
from pathlib import Path

from evalmislead_assets.polyglot.java_runner import JAVA, JAVA_ENV, JAVAC, compiled_classes
from evalmislead_assets.polyglot.problems import Problem
from evalmislead_assets.polyglot.process import ProcessLimits, run_confined

BATCH = "OracleBatch.java"


def package_of(problem: Problem, version: str) -> str:
    return f"p{problem.problem_idx}_{version}"


def batch_sources(problems: list[Problem]) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {
        BATCH: resources.files("evalmislead_assets.polyglot").joinpath(BATCH).read_text(encoding="utf-8")}
    for p in problems:
        for version, code in (("buggy", p.buggy_code), ("fixed", p.fixed_code)):
            pkg = package_of(p, version)
            files[f"{pkg}/Main.java"] = f"package {pkg};\n{code}\n\n{p.test}\n"
    return files


def run_batch(problems: list[Problem], timeout_s: float = 10.0) -> dict[tuple[str, str], tuple[bool, str]]:
    """(task_id, version) -> (passed, detail) for every version the batch reported; {} when it could not run."""
    files = batch_sources(problems)
    with tempfile.TemporaryDirectory(prefix="evalmislead-oracle-batch-") as out:
        compiled = run_confined([JAVAC, "-J-Xmx1g", "-proc:none", "-nowarn", "-encoding", "UTF-8", "-d", "classes",
                                 *sorted(files)], files, ProcessLimits(timeout_s=600.0, data_mb=2048), env=JAVA_ENV,
                                copy_back=("classes", out))
        if compiled.exit_code != 0:
            return {}
        classes = compiled_classes(Path(out))
    packages = {package_of(p, v): (p.task_id, v) for p in problems for v in ("buggy", "fixed")}
    run = run_confined([JAVA, "-Xmx1g", "-Xss8m", "-XX:+UseSerialGC", "-XX:+UseCountedLoopSafepoints", "-cp",
                        "classes", "OracleBatch", str(timeout_s), *packages],
                       {f"classes/{k}": v for k, v in classes.items()},
                       ProcessLimits(timeout_s=120.0 + len(packages) * 0.5 + timeout_s * len(packages) / 4,
                                     data_mb=2048), env=JAVA_ENV, channel="stdio")
    results: dict[tuple[str, str], tuple[bool, str]] = {}
    for fields in run.results:
        if len(fields) == 3 and fields[0] in packages:
            status, detail = fields[1], fields[2]
            results[packages[fields[0]]] = (status == "passed", detail)
    return results
