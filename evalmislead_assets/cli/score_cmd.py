"""`evalmislead score`: run your own test file against a buggy and a fixed version, four cells per test.

The tests import the code under test as `from solution import NAME` (the module name the
study's prompts use). Each test id runs against each version in its own hardened process,
exactly as in the study (see evalmislead_assets/sandbox/host.py). A Markdown answer (.md/.txt,
or --extract) goes through the study's extraction first.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evalmislead_assets.errors import ConfigError
from evalmislead_assets.execution import cells as execution_cells
from evalmislead_assets.execution.collection import collect_module
from evalmislead_assets.execution.extraction import defined_names, extract
from evalmislead_assets.report.formatting import pct
from evalmislead_assets.sandbox import verified_subset
from evalmislead_assets.sandbox.host import MODULE_UNDER_TEST, TEST_TIMEOUT_S, Limits, Sandbox, SandboxUnavailable

HELP = ("score a pytest file against buggy and fixed code: each test misleading / effective / both_pass / "
        "both_fail (tests import `from solution import NAME`)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--function", required=True, metavar="NAME", help="the function under test")
    parser.add_argument("--buggy", required=True, metavar="BUGGY.py", help="buggy version (defines NAME)")
    parser.add_argument("--fixed", required=True, metavar="FIXED.py", help="fixed version (defines NAME)")
    parser.add_argument("--tests", required=True, metavar="TESTS.py", help="pytest file, or a Markdown answer")
    parser.add_argument("--json", action="store_true",
                        help='print {"tests": [...], "counts": {...}, "verified": ..., "unverified_reason": ..., ...}')
    parser.add_argument("--extract", action="store_true", help="treat --tests as a model answer and extract the code")
    parser.add_argument("--timeout", type=float, default=TEST_TIMEOUT_S, metavar="S",
                        help=f"seconds per test and version (default {TEST_TIMEOUT_S:g})")
    parser.add_argument("--workers", type=int, default=None, metavar="N", help="parallel sandboxes (default: CPUs)")


def _read(path: str, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what} file {path} does not exist")
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} file {path} cannot be read as UTF-8 text ({exc})") from None


def run(args: argparse.Namespace) -> int:
    name = args.function
    buggy, fixed, tests = _read(args.buggy, "--buggy"), _read(args.fixed, "--fixed"), _read(args.tests, "--tests")
    for code, flag in ((buggy, "--buggy"), (fixed, "--fixed")):
        if name not in defined_names(code):
            raise ConfigError(f"{flag} {getattr(args, flag[2:])} does not define {name!r} at top level "
                              "(or is not valid Python)")
    if args.timeout <= 0 or (args.workers is not None and args.workers < 1):
        raise ConfigError("--timeout must be positive and --workers at least 1")
    extraction = None
    if args.extract or Path(args.tests).suffix.lower() in (".md", ".markdown", ".txt"):
        found = extract(tests, name, defined_names(buggy) | defined_names(fixed))
        tests, extraction = found.source, found.extraction
    sandbox = Sandbox(Limits(timeout_s=args.timeout), workers=args.workers)
    try:
        collected = collect_module(tests, buggy, fixed, sandbox)
        scored = execution_cells.score_tests(tests, collected.test_ids, buggy, fixed, sandbox) if collected.test_ids else []
    except SandboxUnavailable as exc:  # the machine, not the tests (e.g. a hard open-file limit too low): one line
        raise ConfigError(str(exc)) from None
    counts = execution_cells.cell_counts(s.outcome for s in scored)
    # the study's check on the same text it stores (execution/batch.py): inside the verified subset or not
    verified, unverified_reason = verified_subset.check(tests, (buggy, fixed))
    result = {
        "function": name, "module": MODULE_UNDER_TEST, "n_tests": len(scored),
        "import_ok": collected.import_ok, "error": collected.error, "extraction": extraction,
        "verified": verified, "unverified_reason": unverified_reason,
        "counts": counts, "rates": execution_cells.cell_rates(counts),
        "tests": [s.__dict__ for s in scored],
        "isolation": _isolation(sandbox),
    }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_table(result)
    return 0 if scored else 1


def _isolation(sandbox: Sandbox) -> str:
    iso = sandbox.isolation
    if iso is None:
        return "unknown"
    missing = iso.missing()
    return "full" if not missing else "without " + ", ".join(missing)


def _print_table(result: dict) -> None:
    out = sys.stdout
    tests = result["tests"]
    if result["extraction"]:
        out.write(f"extraction: {result['extraction']}\n")
    if result["error"]:
        out.write(f"note: {result['error']}\n")
    out.write("verified: yes\n" if result["verified"] else f"verified: no ({result['unverified_reason']})\n")
    if tests:
        width = min(max(len(t["test_id"]) for t in tests), 60)
        out.write(f"{'test':<{width}}  {'buggy':<8} {'fixed':<8} outcome\n")
        for t in tests:
            tid = t["test_id"] if len(t["test_id"]) <= width else t["test_id"][: width - 1] + "…"
            out.write(f"{tid:<{width}}  {t['buggy_status']:<8} {t['fixed_status']:<8} {t['outcome']}\n")
        out.write("\n")
    n = result["n_tests"]
    out.write(f"{n} tests")
    if n:
        cells = ", ".join(f"{k} {v} ({pct(result['rates'][k])})" for k, v in result["counts"].items())
        out.write(f": {cells}")
    out.write("\n")
    if result["isolation"] != "full":
        out.write(f"sandbox: {result['isolation']}\n")
