"""JavaScript tests with Node's built-in runner (node:test), one confined process per test id and version.

The work folder of each run holds the code under test as ``solution.js`` (CommonJS: the program and
``module.exports = { <entry point> }``), the test file (``solution.test.cjs``, or ``.mjs`` for ES-module
syntax) and the harness (harness.cjs), preloaded with ``--require`` and used as the ``--test-reporter``,
so it reads the run's nonce before any test code loads (process.py, confine.py).

- Collection: the file runs with a name pattern that matches nothing (``(?!)``); node:test then reports
  every test it registers as filtered out without running its body (describe bodies do run, as they
  declare tests). A test id is the path of names from the top-level test down, joined by `` > ``.
  Subtests created inside a running test (``t.test``) belong to their parent's id.
- A run: ``--test-name-pattern ^<leaf name>$`` and ``--test-force-exit`` (timers, sockets and promises a
  test leaves behind do not keep the process alive); the verdict is the harness's line for exactly that
  path. Same-named tests elsewhere in the file run too but are ignored; a name two tests share is
  one id only once (ids are unique by path).
- ``passed`` needs the nonce's ``pass`` line for the id *and* the ``end`` line (the whole run finished);
  ``process.exit(0)`` in a test leaves neither and reads ``crashed``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources

from evalmislead_assets.polyglot.process import ProcessLimits, ProcessRun, run_confined

NODE = shutil.which("node") or "/usr/bin/node"
HARNESS = "harness.cjs"
SOLUTION = "solution.js"
ID_SEP = " > "
_NOTHING = "(?!)"


@dataclass
class Verdict:
    status: str  # one of sandbox.host.STATUSES
    detail: str
    seconds: float


def harness_source() -> str:
    return resources.files("evalmislead_assets.polyglot").joinpath(HARNESS).read_text(encoding="utf-8")


def solution_module(program: str, entry_point: str) -> str:
    """The code under test as a CommonJS module exporting its entry point (by name, and as default)."""
    return (f"{program.rstrip()}\n\nmodule.exports = {{ {entry_point} }};\n"
            f"module.exports.default = {entry_point};\n")


def js_test_file_name(source: str) -> str:
    """``.mjs`` when the file uses ES-module syntax (import/export statements), else ``.cjs``."""
    esm = re.search(r"^\s*(import\s+[\w{*'\"]|export\s)", source, re.M)
    return "solution.test.mjs" if esm else "solution.test.cjs"


def node_command(test_file: str, pattern: str) -> list[str]:
    return [NODE, "--require", f"./{HARNESS}", "--test-reporter", f"./{HARNESS}", "--test-reporter-destination",
            "stdout", "--test-force-exit", "--test-name-pattern", pattern, "--max-old-space-size=512", test_file]


def _files(source: str, solution: str) -> tuple[str, dict[str, str]]:
    name = js_test_file_name(source)
    return name, {name: source, SOLUTION: solution, HARNESS: harness_source()}


def _path_id(field: str) -> str:
    return ID_SEP.join(json.loads(field))


def _ended(run: ProcessRun) -> str:
    code = run.exit_code
    return f"killed by signal {code - 128}" if code is not None and code > 128 else f"exit code {code}"


def _last_error(run: ProcessRun) -> str:
    lines = [ln.strip() for ln in run.stderr.splitlines()
             if ln.strip() and not ln.startswith(("confine:", "    at ", "Node.js v"))]
    errors = [ln for ln in lines if re.match(r"^\w*(Error|Exception)\b", ln)]
    text = (errors or lines or [_ended(run)])[-1]
    return text[:600]


def collect(source: str, solution: str, limits: ProcessLimits | None = None) -> tuple[list[str], str | None]:
    """The file's test ids against one version (declaration order, unique), or the reason there are none."""
    name, files = _files(source, solution)
    run = run_confined(node_command(name, _NOTHING), files, limits or ProcessLimits())
    if run.timed_out:
        return [], "timeout while loading the test file"
    if ["end"] not in run.results:
        return [], f"could not load the test file: {_last_error(run)}"
    ids: list[str] = []
    for fields in run.results:
        if fields[0] == "collected" and len(fields) == 2:
            test_id = _path_id(fields[1])
            if test_id not in ids:
                ids.append(test_id)
    return ids, None


def verdict_of(run: ProcessRun, test_id: str) -> Verdict:
    """The run's status for ``test_id``: positive evidence only (the nonce's lines), never the exit code."""
    mine = [f for f in run.results if len(f) >= 2 and f[0] in ("pass", "fail", "skip") and _path_id(f[1]) == test_id]
    ended = ["end"] in run.results
    if mine and mine[0][0] == "fail":
        kind, detail = (mine[0][2], json.loads(mine[0][3])) if len(mine[0]) >= 4 else ("failed", "failed")
        return Verdict(kind if kind in ("failed", "error") else "failed", detail, run.seconds)
    if run.timed_out:
        return Verdict("timeout", "no result within the time limit", run.seconds)
    if mine and mine[0][0] == "skip":
        return Verdict("error", "skipped", run.seconds)
    if mine and ended:
        return Verdict("passed", "", run.seconds)
    if mine:
        return Verdict("crashed", f"passed, but the run did not finish ({_ended(run)})", run.seconds)
    return Verdict("crashed", f"no result from the harness ({_ended(run)}): {_last_error(run)}",
                   run.seconds)


def run_test(source: str, solution: str, test_id: str, limits: ProcessLimits | None = None) -> Verdict:
    """One test id against one version, in a process of its own."""
    name, files = _files(source, solution)
    leaf = test_id.split(ID_SEP)[-1]
    run = run_confined(node_command(name, f"^{re.escape(leaf)}$"), files, limits or ProcessLimits())
    return verdict_of(run, test_id)


def run_tests(source: str, solution: str, test_ids: list[str], limits: ProcessLimits | None = None,
              workers: int | None = None) -> list[Verdict]:
    """Each id in its own process, ``workers`` at a time (default: the CPU count)."""
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2) as pool:
        return list(pool.map(lambda t: run_test(source, solution, t, limits), test_ids))
