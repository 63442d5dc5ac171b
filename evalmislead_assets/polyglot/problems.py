"""HumanEvalPack's JavaScript and Java splits, shipped in the package beside the Python one.

Each problem's two programs are built as for Python: the dataset's ``declaration`` (imports, helper code,
the entry point's first line; for Java the ``class Solution {`` opening too) followed by the
``buggy_solution`` or the ``canonical_solution`` (which close the function, and for Java the class).
The dataset's own test (``test``) is the oracle: JavaScript's calls ``console.assert``, Java's is a
``Main`` class whose ``main`` throws ``AssertionError``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DATA_DIR = Path(__file__).resolve().parents[1] / "data"
LANGUAGES = ("js", "java")
# sha256 of the shipped files (the rows of bigcode/humanevalpack, configs "js" and "java"); the same sums
# as the HUMANEVALPACK_SHA256SUMS file the splits came with (checked by a test).
DATA_SHA256 = {
    "js": "04c86c1fac5f33818d9187cba278ed1dfc66cc259372dd8342126aa580fb7569",
    "java": "a8d077d300bbdc2eda91e1a733deb2944678bce8fcc7eb272214626516768cc1",
}
N_PROBLEMS = 164
REQUIRED_FIELDS = ("task_id", "declaration", "prompt", "buggy_solution", "canonical_solution", "test",
                   "entry_point", "bug_type")


class DatasetError(RuntimeError):
    """The dataset file is missing, changed or malformed; one line naming the file and the fix."""


@dataclass(frozen=True)
class Problem:
    language: str
    task_id: str  # "JavaScript/0", "Java/0"
    problem_idx: int
    entry_point: str
    declaration: str
    prompt: str  # the docstring (Javadoc/JSDoc comment) and the declaration
    buggy_code: str
    fixed_code: str
    test: str  # the dataset's oracle
    bug_type: str


def data_file(language: str) -> Path:
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} is not one of {', '.join(LANGUAGES)}")
    return PACKAGE_DATA_DIR / f"humanevalpack_{language}.jsonl"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_problems(language: str, path: Path | None = None) -> list[Problem]:
    """All 164 problems of ``language`` in problem order; the file's sha256 and fields are checked first."""
    path = Path(path or data_file(language))
    if not path.is_file():
        raise DatasetError(f"dataset file {path} is missing; reinstall the package (it ships the data)")
    digest = sha256_file(path)
    if digest != DATA_SHA256[language]:
        raise DatasetError(f"dataset file {path} is corrupted or changed (sha256 {digest[:12]}..., expected "
                           f"{DATA_SHA256[language][:12]}...); restore it from the package")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"dataset file {path} line {n} is not JSON ({exc.msg})") from exc
        missing = [f for f in REQUIRED_FIELDS if f not in row]
        if missing:
            raise DatasetError(f"dataset file {path} line {n} lacks fields {missing}")
        rows.append(row)
    if len(rows) != N_PROBLEMS:
        raise DatasetError(f"dataset file {path} has {len(rows)} rows, expected {N_PROBLEMS}")
    problems = [Problem(
        language=language, task_id=r["task_id"], problem_idx=int(r["task_id"].split("/")[1]),
        entry_point=r["entry_point"], declaration=r["declaration"], prompt=r["prompt"],
        buggy_code=r["declaration"] + r["buggy_solution"], fixed_code=r["declaration"] + r["canonical_solution"],
        test=r["test"], bug_type=r["bug_type"]) for r in rows]
    return sorted(problems, key=lambda p: p.problem_idx)


_DECLARED = {"java": re.compile(r"(\w+)\s*\("), "js": re.compile(r"(?:function\s*\*?\s*|(?:const|let|var)\s+)(\w+)")}


def declared_name(problem: Problem) -> str:
    """The name the entry point is declared with (the last line of ``declaration``).

    Mostly ``entry_point``; in four rows the dataset's ``entry_point`` names another function (Java/99
    declares ``countUpper`` under ``closest_integer``; Java/101, Java/114 and JavaScript/114 differ in
    case or spelling), and the code, the dataset's test and the prompt all use the declared name.
    """
    last = problem.declaration.rstrip().splitlines()[-1]
    m = _DECLARED[problem.language].search(last)
    return m.group(1) if m else problem.entry_point
