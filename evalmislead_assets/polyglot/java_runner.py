"""Java tests with JUnit 5, one confined JVM per test id and version.

- Compile once per file and version: ``javac -proc:none`` of ``Solution.java`` (the version) and the test
  class against Debian's ``junit-platform-console-standalone.jar`` (scripts/bootstrap.sh installs
  ``junit5``), with the harness (EvalHarness.java), in a confined run; the classes come back to the host.
- Collection: ``EvalHarness collect`` lists JUnit's tests by unique id: each ``@Test`` method, and each
  invocation of a ``@ParameterizedTest`` (or other template), found by running the class with every test
  body disabled (``EvalHarness.SkipBodies``, an execution condition loaded by extension autodetection in
  that run only): the templates expand, their arguments are computed, no test body runs.
- A run: ``EvalHarness run`` selects one unique id in a fresh JVM; ``passed`` needs the nonce's ``result``
  line saying so and the ``end`` line; ``System.exit(0)`` in a test leaves neither and reads ``crashed``.
  The JVM runs with /proc hidden (its launcher finds libjli through LD_LIBRARY_PATH instead).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

from evalmislead_assets.polyglot.js_runner import Verdict
from evalmislead_assets.polyglot.process import ProcessLimits, ProcessRun, run_confined

JAVA = os.path.realpath(shutil.which("java") or "/usr/bin/java")
JAVAC = os.path.realpath(shutil.which("javac") or "/usr/bin/javac")
JAVA_HOME = os.path.dirname(os.path.dirname(JAVA))
JUNIT_JAR = "/usr/share/java/junit-platform-console-standalone.jar"
HARNESS = "EvalHarness.java"
JAVA_ENV = {"LD_LIBRARY_PATH": os.path.join(JAVA_HOME, "lib"), "JAVA_HOME": JAVA_HOME}
_JVM = ["-Xmx256m", "-Xss4m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


class JavaSetupError(RuntimeError):
    """JUnit or the JDK is missing; one line naming the fix."""


def check_toolchain() -> None:
    if not os.path.isfile(JUNIT_JAR) or not os.access(JAVAC, os.X_OK):
        raise JavaSetupError(f"the Java runner needs a JDK 17 and {JUNIT_JAR}; run `bash scripts/bootstrap.sh`"
                             " (it installs Debian's openjdk-17-jdk-headless and junit5)")


def junit_class_name(source: str) -> str:
    m = re.search(r"^\s*public\s+(?:final\s+)?class\s+(\w+)", source, re.M) or re.search(r"\bclass\s+(\w+)", source)
    return m.group(1) if m else "SolutionTest"


def compiled_classes(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*.class")}


def compile_version(source: str, solution: str, limits: ProcessLimits | None = None) -> tuple[dict[str, bytes], str | None]:
    """The compiled classes (relative path -> bytes) of the test file against one version, or the error."""
    check_toolchain()
    name = junit_class_name(source)
    harness = resources.files("evalmislead_assets.polyglot").joinpath(HARNESS).read_text(encoding="utf-8")
    files: dict[str, str | bytes] = {"Solution.java": solution, f"{name}.java": source, HARNESS: harness}
    limits = limits or ProcessLimits(timeout_s=60.0)
    with tempfile.TemporaryDirectory(prefix="evalmislead-javac-") as out:
        run = run_confined([JAVAC, "-J-Xmx512m", "-proc:none", "-nowarn", "-encoding", "UTF-8", "-cp", JUNIT_JAR,
                            "-d", "classes", "Solution.java", f"{name}.java", HARNESS], files, limits, env=JAVA_ENV,
                           copy_back=("classes", out))
        if run.timed_out:
            return {}, "timeout while compiling"
        if run.exit_code != 0:
            errors = [ln for ln in run.stderr.splitlines() if ": error:" in ln] or run.stderr.splitlines()[-1:]
            return {}, "does not compile: " + (errors[0].split(": error:", 1)[-1].strip() if errors else
                                                f"javac exit code {run.exit_code}")[:600]
        return compiled_classes(Path(out)), None


_SERVICES = "classes/META-INF/services/org.junit.jupiter.api.extension.Extension"


def _harness(classes: dict[str, bytes], args: list[str], limits: ProcessLimits) -> ProcessRun:
    files: dict[str, str | bytes] = {f"classes/{k}": v for k, v in classes.items()}
    if args[0] == "collect":  # EvalHarness.SkipBodies, found by extension autodetection while collecting only
        files[_SERVICES] = "EvalHarness$SkipBodies\n"
    return run_confined([JAVA, *_JVM, "-cp", f"{JUNIT_JAR}:classes", "EvalHarness", *args], files, limits,
                        env=JAVA_ENV, channel="stdio")


def collect(source: str, solution: str, limits: ProcessLimits | None = None) -> tuple[list[str], str | None]:
    """The file's test ids (JUnit unique ids) against one version, or the reason there are none."""
    classes, error = compile_version(source, solution)
    if error:
        return [], error
    run = _harness(classes, ["collect", junit_class_name(source)], limits or ProcessLimits())
    if ["end"] not in run.results:
        return [], f"could not load the test class: {_last_error(run)}"
    return list(dict.fromkeys(f[1] for f in run.results if f[0] == "collected" and len(f) == 2)), None


def _last_error(run: ProcessRun) -> str:
    if run.timed_out:
        return "timeout"
    lines = [ln.strip() for ln in run.stderr.splitlines() if ln.strip() and not ln.startswith(("confine:", "at "))]
    return (lines[-1] if lines else f"exit code {run.exit_code}")[:600]


def verdict_of(run: ProcessRun, test_id: str) -> Verdict:
    mine = [f for f in run.results if len(f) >= 4 and f[0] == "result" and f[1] == test_id]
    ended = ["end"] in run.results
    if mine and mine[0][2] in ("failed", "error"):
        return Verdict(mine[0][2], mine[0][3] if len(mine[0]) > 3 else "", run.seconds)
    if run.timed_out:
        return Verdict("timeout", "no result within the time limit", run.seconds)
    if mine and mine[0][2] == "passed" and ended:
        return Verdict("passed", "", run.seconds)
    return Verdict("crashed", f"no result from the harness (exit code {run.exit_code}): {_last_error(run)}",
                   run.seconds)


def run_tests(source: str, classes: dict[str, bytes], test_ids: list[str], limits: ProcessLimits | None = None,
              workers: int | None = None) -> list[Verdict]:
    """Each id of one compiled version in its own JVM, ``workers`` at a time."""
    limits = limits or ProcessLimits()
    name = junit_class_name(source)
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2) as pool:
        return list(pool.map(lambda t: verdict_of(_harness(classes, ["run", name, t], limits), t), test_ids))
