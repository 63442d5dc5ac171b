"""The linter ([tool.ruff] in pyproject.toml: pyflakes, pycodestyle, import order, bugbear) has nothing to say
about the package, the tests, the scripts and the benchmarks. Fix a finding with `ruff check --fix` (import
order, unused imports) or by hand; a rule that fights the code's style is ignored in pyproject.toml with a reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`ruff` beside this interpreter (the venv's, pinned in the test extra), else ``python -m ruff``."""
    ruff = Path(sys.executable).parent / "ruff"
    cmd = [str(ruff)] if ruff.exists() else [sys.executable, "-m", "ruff"]
    return subprocess.run(cmd + list(args), cwd=cwd, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing():
    done = _ruff("check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_names_a_planted_defect(tmp_path):
    """Not vacuous: the project's configuration flags an unused import and a function defined twice."""
    bad = tmp_path / "planted.py"
    bad.write_text("import os\n\n\ndef f() -> int:\n    return 1\n\n\ndef f() -> int:\n    return 2\n")
    done = _ruff("check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), "--output-format", "concise",
                 str(bad))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "planted.py:1:8: F401" in done.stdout and "planted.py:8:5: F811" in done.stdout, done.stdout
