"""Line and branch coverage of the function under test, measured inside the sandbox.

Two halves:

- *Child side* (``prepare``, ``Probe``): runs in the sandbox. The zygote calls ``prepare``
  once, before it forks, so that coverage.py and its C tracer are loaded in every child
  already; the module process builds one ``Probe`` for its solution.py; each forked test
  process calls ``probe.start()`` just before pytest's runtest protocol and ``probe.stop()``
  just after, and sends the executed arcs of that one file back with its result.
  ``data_file=None`` keeps the data in memory (the test process runs as an unprivileged
  uid on a read-only filesystem). This half imports only the standard library at module
  level: the zygote (zygote.py) imports this module when a request asks for coverage.
- *Host side* (``function_shape``, ``payload_arcs``, ``measure``): what the function under
  test could execute (its statements and branch arcs, from coverage.py's own static
  analysis, ``coverage.parser.PythonParser``), and how much of it a union of executed arcs
  covers. Only lines inside the entry point's body count: the ``def`` line runs on import,
  not in a test, and helper functions elsewhere in solution.py are left out.

Counting follows coverage.py's report: a statement is a line that starts one (multi-line
statements count once, docstrings not at all); a branch line is a line with more than one
possible exit, and each of its possible arcs is one branch.
"""

from __future__ import annotations

import ast
import warnings
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAX_ARCS = 200_000  # a payload larger than this is not believed (a solution has a few hundred at most)

Arc = tuple[int, int]


# ------------------------------------------------------------------ child side (in the sandbox)


def prepare() -> None:
    """Import coverage.py and its tracer once, in the zygote, before any fork."""
    import coverage
    import coverage.collector  # noqa: F401


class Probe:
    """An in-memory coverage.py session for one file, set up once per module process.

    The module process builds it (coverage.py's path matching and start-up cost tens of
    milliseconds) and starts and stops it once with nothing to record; each forked test
    process then starts it, runs its test, stops it and reads only its own arcs. A failure
    anywhere costs the measure (an ``error`` payload), never the test's status.
    """

    def __init__(self, path: str) -> None:
        self.cov: Any = None
        self.error: str | None = None
        try:
            from coverage import Coverage

            cov = Coverage(data_file=None, branch=True, include=[path], config_file=False)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cov.start()
                cov.stop()
            self.cov = cov
        except BaseException as exc:  # the module process must go on serving tests
            self.error = _why(exc)

    def start(self) -> None:
        if self.cov is None:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.cov.start()
        except BaseException as exc:  # never let the measure change the test's status
            self.cov, self.error = None, _why(exc)

    def stop(self) -> dict[str, Any]:
        """The payload sent to the host with the test's result: {"arcs": [[from, to], ...]} or {"error": ...}."""
        if self.cov is None:
            return {"error": self.error or "coverage did not start"}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.cov.stop()
                data = self.cov.get_data()
            arcs: set[Arc] = set()
            for name in data.measured_files():
                arcs.update(data.arcs(name) or ())
            return {"arcs": sorted(arcs)}
        except BaseException as exc:  # e.g. an alarm the test left behind: the report must still go out
            return {"error": _why(exc)}


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


# ------------------------------------------------------------------ host side


@dataclass(frozen=True)
class FunctionShape:
    """What the function under test could execute in one version of solution.py."""

    first_line: int  # first line of the body
    last_line: int
    statements: frozenset[int]
    branches: frozenset[Arc]  # every possible arc out of a branch line of the body
    parser: Any  # coverage.parser.PythonParser of the whole file, to translate executed arcs

    def translate(self, arcs: Iterable[Arc]) -> tuple[set[int], set[Arc]]:
        """Executed arcs as recorded -> (statements run, arcs) in the parser's numbering, as coverage's report does."""
        arcs = set(arcs)
        lines = self.parser.translate_lines({n for arc in arcs for n in arc if n > 0}) & self.statements
        dests: dict[int, set[int]] = defaultdict(set)
        for a, b in self.parser.arcs():
            dests[a].add(b)
        single = {a: next(iter(bs)) for a, bs in dests.items() if len(bs) == 1}
        fixed = {(a, b) for a, b in arcs if a != b} | {(a, single[a]) for a, b in arcs if a == b and a in single}
        return set(lines), set(self.parser.translate_arcs(fixed))


@dataclass(frozen=True)
class FunctionCoverage:
    n_statements: int
    n_statements_run: int
    n_branches: int
    n_branches_taken: int

    @property
    def line_coverage(self) -> float | None:
        return self.n_statements_run / self.n_statements if self.n_statements else None

    @property
    def branch_coverage(self) -> float | None:
        """None when the function has no branches (not 100 %: there is nothing to take)."""
        return self.n_branches_taken / self.n_branches if self.n_branches else None


def function_node(source: str, entry_point: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The module-level definition of `entry_point` that a call would reach (the last one)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point:
            found = node
    return found


def function_shape(source: str, entry_point: str) -> FunctionShape | None:
    """Statements and branch arcs of the entry point's body; None when it is not defined at module level."""
    from coverage.parser import PythonParser

    node = function_node(source, entry_point)
    if node is None or not node.body:
        return None
    lo, hi = node.body[0].lineno, int(node.end_lineno or node.body[-1].lineno)
    parser = PythonParser(text=source)
    parser.parse_source()
    arcs = parser.arcs()

    def inside(n: int) -> bool:
        return lo <= n <= hi

    statements = frozenset(n for n in parser.statements if inside(n))
    branch_lines = {n for n, count in parser.exit_counts().items() if count > 1 and inside(n)}
    branches = frozenset((a, b) for a, b in arcs if a in branch_lines and b not in parser.excluded)
    return FunctionShape(lo, hi, statements, branches, parser)


def payload_arcs(payload: Any) -> set[Arc] | None:
    """The arcs of one test's payload (sent by the untrusted test process); None if it is missing or malformed."""
    if not isinstance(payload, dict) or not isinstance(payload.get("arcs"), list):
        return None
    raw = payload["arcs"]
    if len(raw) > MAX_ARCS:
        return None
    out: set[Arc] = set()
    for arc in raw:
        if (not isinstance(arc, (list, tuple)) or len(arc) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) and abs(n) < 10_000_000 for n in arc)):
            return None
        out.add((arc[0], arc[1]))
    return out


def measure(shape: FunctionShape | None, arcs: Iterable[Arc]) -> FunctionCoverage:
    """Coverage of the function by the union of executed `arcs` (zero statements when there is no function)."""
    if shape is None:
        return FunctionCoverage(0, 0, 0, 0)
    lines, executed = shape.translate(arcs)
    return FunctionCoverage(len(shape.statements), len(lines & shape.statements), len(shape.branches),
                            len(executed & shape.branches))
