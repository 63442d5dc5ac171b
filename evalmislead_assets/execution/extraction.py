"""Answer text -> test module source, and a record of how it was found and what was normalised.

Answers wrap code in a ```python fence, sometimes inside a ```markdown fence (whose bare
closing line a flat fence regex takes for the end of the code), sometimes split over
several fences, sometimes with no fence at all, and thinking-on answers may stop in the
middle of a fence. The import of the code under test is normalised to the module the
prompt names (``solution``) only where that is unambiguous, and every change is recorded
in ``how`` (the normalisation itself: import_normalisation.py; ``defined_names``,
``module_exists`` and ``normalise_imports`` are re-exported here).
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field

from evalmislead_assets.execution.import_normalisation import defined_names, module_exists, normalise_imports
from evalmislead_assets.llm.reasoning import strip_think
from evalmislead_assets.sandbox.host import MODULE_UNDER_TEST

__all__ = ["Block", "Extraction", "code_blocks", "defined_names", "extract", "module_exists", "normalise_imports",
           "strip_reasoning"]

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
_PYTHON_LANGS = {"python", "py", "python3", "py3", "pytest", "python-repl", "pycon", ""}
_CONTAINER_LANGS = {"markdown", "md", "mdx"}
_CODE_START = re.compile(r"^(import |from \S+ import |def |async def |class |@|#!|# ?-\*-)")


@dataclass
class Block:
    lang: str
    text: str
    inside: str = ""  # enclosing container fence, e.g. "markdown"
    closed: bool = True


@dataclass
class Extraction:
    source: str  # "" when no code was found
    how: str  # "fence:python", "fence:markdown>python x2", "no_fence", "none", ...
    notes: list[str] = field(default_factory=list)  # normalisations, in order

    @property
    def extraction(self) -> str:
        """The `extraction` column: how, then the notes."""
        return ";".join([self.how, *self.notes])

    @property
    def normalised(self) -> bool:
        prefixes = ("import:", "removed_local_def:", "removed_main_block", "removed_runner_call")
        return any(n.startswith(prefixes) for n in self.notes)


def strip_reasoning(text: str) -> str:
    """Drop inline <think>...</think> reasoning; an unclosed <think> leaves no answer."""
    return strip_think(text)


def code_blocks(text: str) -> list[Block]:
    """Fenced blocks in order, with nested fences inside a ```markdown fence opened as code."""
    blocks: list[Block] = []
    lines = text.splitlines()
    containers: list[str] = []  # open ```markdown fences
    current: Block | None = None
    fence_char = "`"
    body: list[str] = []

    def close(closed: bool) -> None:
        nonlocal current
        assert current is not None
        current.text = textwrap.dedent("\n".join(body)).strip("\n") + "\n"
        current.closed = closed
        blocks.append(current)
        current = None

    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if not m:
            if current is not None:
                body.append(line)
            continue
        char, info = m["fence"][0], m["info"].lower()
        if current is not None:
            if char != fence_char:
                body.append(line)
                continue
            close(True)
            if not info:
                continue
        if info in _CONTAINER_LANGS:
            containers.append(info)
            continue
        if not info and current is None and containers and not _next_looks_like_code(lines, i + 1):
            containers.pop()  # the bare line closes the ```markdown fence
            continue
        current, fence_char, body = Block(info, "", ">".join(containers)), char, []
    if current is not None:
        close(False)
    return blocks


def _next_looks_like_code(lines: list[str], start: int) -> bool:
    for line in lines[start:]:
        if line.strip():
            return bool(_CODE_START.match(line.strip())) or line.startswith((" ", "\t"))
    return False


def _compiles(source: str) -> bool:
    try:
        compile(source, "<test>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _has_tests(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return bool(re.search(r"^\s*(async\s+)?def test|^class Test", source, re.MULTILINE))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            return True
    return False


_SUPPORT_NODES = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                  ast.Assign, ast.AnnAssign)


def _is_support(source: str, solution_names: set[str]) -> bool:
    """Imports, fixtures, helpers and constants that a split-up test file needs; not a copy of the code."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstring
        if not isinstance(node, _SUPPORT_NODES):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in solution_names:
            return False
    return True


def _trim_to_compile(source: str) -> tuple[str, bool]:
    """Drop trailing top-level statements until the text compiles (a truncated answer)."""
    if _compiles(source):
        return source, False
    lines = source.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln and not ln[0].isspace() and not ln.startswith((")", "]", "}"))]
    for cut in reversed(starts):
        candidate = "\n".join(lines[:cut]).rstrip() + "\n"
        if candidate.strip() and _compiles(candidate):
            return candidate, True
    return source, False


def extract(answer: str | None, entry_point: str, solution_names: set[str] | frozenset[str] = frozenset(),
            module: str = MODULE_UNDER_TEST) -> Extraction:
    """The test module in ``answer``; ``solution_names`` are the top-level names the code under test defines."""
    names = set(solution_names) | {entry_point}
    text = strip_reasoning(answer or "")
    if not text.strip():
        return Extraction("", "none")
    found = _from_fences(text, names)
    if found is None:
        found = _without_fence(text)
    if not found.source.strip():
        return Extraction("", "none", found.notes)
    source, notes = normalise_imports(found.source, entry_point, names, module)
    return Extraction(source, found.how, found.notes + notes)


def _from_fences(text: str, names: set[str]) -> Extraction | None:
    blocks = [b for b in code_blocks(text) if b.lang in _PYTHON_LANGS and b.text.strip()]
    if not blocks:
        return None
    notes: list[str] = []
    if not blocks[-1].closed:
        trimmed, changed = _trim_to_compile(blocks[-1].text)
        if changed:
            blocks[-1].text = trimmed
        notes.append("truncated_fence" + (":trimmed" if changed else ""))
    tests = [b for b in blocks if _has_tests(b.text)]
    if tests:
        kept = [b for b in blocks if b in tests or _is_support(b.text, names)]
    else:
        kept = blocks
    if len(kept) < len(blocks):
        notes.append(f"dropped_blocks:{len(blocks) - len(kept)}")
    source = "\n\n".join(b.text.rstrip() for b in kept) + "\n"
    if len(kept) > 1 and not _compiles(source) and tests:
        best = max(tests, key=lambda b: (_compiles(b.text), len(b.text)))
        notes.append(f"only_block:{blocks.index(best) + 1}")
        kept, source = [best], best.text
    kinds = sorted({(b.inside + ">" if b.inside else "") + (b.lang or "plain") for b in kept})
    how = "fence:" + ",".join(kinds) + (f" x{len(kept)}" if len(kept) > 1 else "")
    if not tests:
        notes.append("no_test_functions")
    return Extraction(source, how, notes)


def _without_fence(text: str) -> Extraction:
    lines = [ln for ln in text.splitlines() if not _FENCE.match(ln)]
    whole = "\n".join(lines).strip("\n") + "\n"
    if _compiles(whole) and _has_tests(whole):
        return Extraction(whole, "no_fence")
    start = next((i for i, ln in enumerate(lines) if _CODE_START.match(ln)), None)
    if start is None:
        return Extraction("", "none")
    tail = "\n".join(lines[start:]).strip("\n") + "\n"
    code, _ = _trim_to_compile(_drop_trailing_prose(tail))
    if not _compiles(code):
        return Extraction(tail, "no_fence:uncompilable")
    return Extraction(code, "no_fence:trimmed" if code.strip() != whole.strip() else "no_fence")


def _drop_trailing_prose(code: str) -> str:
    lines = code.splitlines()
    while lines and lines[-1].strip() and not lines[-1][0].isspace() and not _looks_like_code_line(lines[-1]):
        lines.pop()
        while lines and not lines[-1].strip():
            lines.pop()
    return "\n".join(lines) + "\n"


def _looks_like_code_line(line: str) -> bool:
    s = line.strip()
    return bool(_CODE_START.match(s)) or s.startswith(("assert ", "return ", "print(", "if ", "for ", "#")) or \
        bool(re.match(r"^[\w.\[\]]+\s*(=|\()", s))
