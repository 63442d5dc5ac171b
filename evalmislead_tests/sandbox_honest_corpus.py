"""The honest corpus (evalmislead_tests/sandbox/honest/*.py): each file scored by the runner and by plain pytest.

``plain_pytest_statuses`` runs ``python -m pytest FILE::ID ...`` in a subprocess, in a folder holding
only the test file and ``solution.py``, and reads each id's outcome from pytest's own short summary
(``-rA``), mapped to the runner's statuses as the runner maps pytest's reports (verdicts.status_of): a
pass is PASSED or XPASS with no failing subtest; FAILED, SUBFAILED or XFAIL is ``failed``; an ERROR
alone (setup or teardown) or SKIPPED is ``error``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from evalmislead_assets.sandbox.host import MODULE_UNDER_TEST, TEST_FILE

HONEST = Path(__file__).resolve().parent / "sandbox" / "honest"
FILES = sorted(p.name for p in HONEST.glob("*.py") if p.name != "conftest.py")
_SUMMARY = re.compile(r"^(?P<word>[A-Z]+)\S* (?:.* )?" + re.escape(TEST_FILE) + r"::(?P<id>\S+)")


def write_version(folder: Path, solution: str, tests: str) -> Path:
    """A folder with ``solution.py``, the test file and an empty ``pytest.ini`` (pytest's rootdir and config)."""
    folder.mkdir(parents=True)
    (folder / f"{MODULE_UNDER_TEST}.py").write_text(solution)
    (folder / TEST_FILE).write_text(tests)
    (folder / "pytest.ini").write_text("[pytest]\n")
    return folder


def plain_pytest_statuses(folder: Path, test_ids: list[str], timeout_s: float = 300.0) -> dict[str, str]:
    """Each id's status as plain pytest reports it (see the module doc); raises if pytest names an id twice
    with contradicting words it cannot map."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "--tb=no", "--color=no",
         *[f"{TEST_FILE}::{t}" for t in test_ids]],
        cwd=folder, env=env, capture_output=True, text=True, timeout=timeout_s)
    words: dict[str, set[str]] = {t: set() for t in test_ids}
    for line in proc.stdout.splitlines():
        m = _SUMMARY.match(line)
        if m and m.group("id") in words:
            words[m.group("id")].add(m.group("word"))
    out = {t: _status(w) for t, w in words.items()}
    missing = [t for t, s in out.items() if s is None]
    if missing:
        raise AssertionError(f"plain pytest reported nothing for {missing}: {proc.stdout[-2000:]}{proc.stderr[-1000:]}")
    if (proc.returncode == 0) != all(s == "passed" or w & {"SKIPPED", "XFAIL"} for s, w in zip(out.values(), words.values())):
        raise AssertionError(f"pytest exit code {proc.returncode} disagrees with {out}: {proc.stdout[-2000:]}")
    return out  # type: ignore[return-value]


def _status(words: set[str]) -> str | None:
    if words & {"FAILED", "SUBFAILED", "XFAIL"}:
        return "failed"
    if words & {"ERROR", "SKIPPED"}:
        return "error"
    if words & {"PASSED", "XPASS"}:
        return "passed"
    return None
