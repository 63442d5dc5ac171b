"""The type checker ([tool.mypy] in pyproject.toml) finds nothing in the package: every annotation holds, and
every `type: ignore` left silences a finding (warn_unused_ignores)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """mypy of this interpreter (pinned in the test extra; `bash scripts/bootstrap.sh` installs it), with the
    project's configuration; its cache in .mypy_cache makes a re-run take seconds."""
    done = subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert "No module named mypy" not in done.stderr, "mypy is not installed: run `bash scripts/bootstrap.sh`"
    return done


def test_mypy_finds_nothing():
    done = _mypy("--config-file", str(ROOT / "pyproject.toml"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_names_a_planted_error(tmp_path):
    """Not vacuous: the project's configuration flags a wrong argument type and an unused ignore."""
    bad = tmp_path / "planted.py"
    bad.write_text("def f(x: int) -> int:\n    return x\n\n\nf('a')\ny: int = 1  # type: ignore[assignment]\n")
    done = _mypy("--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), str(bad))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "planted.py:5: error" in done.stdout and "planted.py:6: error: Unused" in done.stdout, done.stdout
