"""Comments, docstrings and messages say what the code does and why, never which tracker issue asked for it:
no "issue <number>" in the package, the tests, the scripts, the benchmarks, the study files or the configuration.
(The plan's amendment log, prompts/analysis_plan_changes.md, records history by design and is not checked.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("evalmislead_assets", "evalmislead_tests", "scripts", "benchmarks", "studies", "pyproject.toml",
           "dagster.yaml", "workspace.yaml", "study.toml")
SUFFIXES = {".py", ".toml", ".yaml", ".yml", ".sh", ".cjs", ".mjs", ".java", ".cfg", ".ini"}
# the word, a space or hyphen, a digit (any case); an upstream project's "llama.cpp <word> #7052" names its own
# tracker and is allowed. The word is split here so that this file passes its own check.
WORD = "iss" "ue"
HISTORY = re.compile(rf"\b{WORD}[ -]?[0-9]", re.IGNORECASE)


def history_lines(root: Path, checked: tuple[str, ...] = CHECKED) -> list[str]:
    """``file:line: text`` for every line under ``checked`` (relative to ``root``) that cites an issue number."""
    found = []
    for name in checked:
        top = root / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.suffix in SUFFIXES)
        for path in paths:
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if HISTORY.search(line):
                    found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    return found


def test_no_comment_cites_an_issue_number():
    found = history_lines(ROOT)
    assert not found, "say what the code does and why, not which issue asked for it:\n" + "\n".join(found)


def test_the_check_finds_a_planted_issue_number(tmp_path):
    """Not vacuous: a comment and a docstring citing issues are found, named by file and line."""
    pkg = tmp_path / "evalmislead_assets"
    pkg.mkdir()
    cited, hyphened = WORD.capitalize() + " 12", WORD + "-3"
    (pkg / "m.py").write_text(f'"""Fine."""\nx = 1  # see {cited}\n\n\ndef f():\n    """As {hyphened} asked."""\n')
    (pkg / "ok.py").write_text(f"# llama.cpp {WORD} #7052 is upstream's tracker\n")
    assert history_lines(tmp_path, ("evalmislead_assets",)) == [
        f"evalmislead_assets/m.py:2: x = 1  # see {cited}",
        f'evalmislead_assets/m.py:6: """As {hyphened} asked."""',
    ]
