"""Answer text -> test module source, and a record of how it was found and what was normalised.

Answers wrap code in a ```python fence, sometimes inside a ```markdown fence (whose bare
closing line a flat fence regex takes for the end of the code), sometimes split over
several fences, sometimes with no fence at all, and thinking-on answers may stop in the
middle of a fence. The import of the code under test is normalised to the module the
prompt names (``solution``) only where that is unambiguous, and every change is recorded
in ``how``.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import textwrap
from dataclasses import dataclass, field
from functools import lru_cache

from evalmislead_assets.reasoning import strip_think
from evalmislead_assets.sandbox import MODULE_UNDER_TEST

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
        return any(n.startswith(("import:", "removed_local_def:")) for n in self.notes)


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


# --------------------------------------------------------------------------- imports


@lru_cache(maxsize=4096)
def module_exists(name: str) -> bool:
    """A top-level module importable here: stdlib or installed (no code is executed to find out)."""
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def defined_names(code: str) -> set[str]:
    """Top-level functions, classes and assigned names of the code under test."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


def normalise_imports(source: str, entry_point: str, solution_names: set[str],
                      module: str = MODULE_UNDER_TEST) -> tuple[str, list[str]]:
    """Point imports of the code under test at ``module`` where unambiguous; return (source, notes).

    Unambiguous means: the imported module does not exist here (neither stdlib nor installed,
    or a relative import) and everything taken from it is a name the code under test defines
    (a star import only when it is the file's one unknown module). A top-level copy of a
    solution function in the test file is removed so that the tests exercise the real code,
    and a solution name used but never imported gets its import.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source, []
    names = set(solution_names) | {entry_point}
    edits: list[tuple[int, int, int, int, str]] = []  # (line, col, end_line, end_col, new text)
    notes: list[str] = []
    removed = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
               and n.name in names]
    spans = [(min([n.lineno] + [d.lineno for d in n.decorator_list]), n.end_lineno or n.lineno) for n in removed]

    def kept(node: ast.AST) -> bool:
        return not any(a <= node.lineno <= b for a, b in spans)  # type: ignore[attr-defined]

    unknown_from = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and kept(n)
                    and ("." * n.level + (n.module or "")) != module
                    and (n.level > 0 or not module_exists(n.module or ""))]
    plain = [n for n in ast.walk(tree) if isinstance(n, ast.Import) and kept(n)]
    unknown_plain = {a.asname or a.name: a.name for n in plain for a in n.names
                     if a.name != module and "." not in a.name and not module_exists(a.name)}
    n_unknown = len({"." * n.level + (n.module or "") for n in unknown_from} | set(unknown_plain.values()))
    for node in unknown_from:
        imported = {a.name for a in node.names}
        if imported <= names or (imported == {"*"} and n_unknown == 1):
            new = ast.unparse(ast.ImportFrom(module=module, names=node.names, level=0))
            edits.append((node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0, new))
            notes.append(f"import:{'.' * node.level + (node.module or '')}->{module}")
    uses = _attribute_uses(tree, set(unknown_plain))
    as_solution = {b for b in unknown_plain if uses[b] and uses[b] <= names}
    for node in plain:
        if not any((a.asname or a.name) in as_solution for a in node.names):
            continue
        parts = []
        for a in node.names:
            if (a.asname or a.name) in as_solution:
                parts.append(f"{module} as {a.asname or a.name}")
                notes.append(f"import:{a.name}->{module}")
            else:
                parts.append(a.name + (f" as {a.asname}" if a.asname else ""))
        edits.append((node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0,
                      "import " + ", ".join(parts)))
    for node, (first, last) in zip(removed, spans):
        edits.append((first, 0, last, 10 ** 9, ""))
        notes.append(f"removed_local_def:{node.name}")
    source = _apply_edits(source, edits)
    missing = _free_solution_names(source, names, module)
    if missing:
        source = _insert_import(source, f"from {module} import {', '.join(sorted(missing))}")
        notes.append("import:added")
    return source, notes


def _attribute_uses(tree: ast.AST, bound: set[str]) -> dict[str, set[str]]:
    """For each bound module alias, the attribute names used on it; a bare use adds '?'."""
    uses: dict[str, set[str]] = {b: set() for b in bound}
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in bound:
            parent = parents.get(id(node))
            if isinstance(parent, ast.Attribute) and parent.value is node:
                uses[node.id].add(parent.attr)
            else:
                uses[node.id].add("?")
    return uses


def _free_solution_names(source: str, names: set[str], module: str) -> set[str]:
    """Solution names the module uses but never binds (no import, def or assignment anywhere)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    bound: set[str] = set()
    used: set[str] = set()
    star = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name == "*":
                    star = True
                bound.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    if star:
        return set()
    return (used & names) - bound


def _apply_edits(source: str, edits: list[tuple[int, int, int, int, str]]) -> str:
    if not edits:
        return source
    lines = source.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def offset(line: int, col_bytes: int) -> int:
        text = lines[line - 1] if line - 1 < len(lines) else ""
        if col_bytes >= 10 ** 9:
            return starts[line]  # whole line, with its newline
        return starts[line - 1] + len(text.encode()[:col_bytes].decode("utf-8", "ignore"))

    for line, col, end_line, end_col, new in sorted(edits, reverse=True):
        a, b = offset(line, col), offset(end_line, end_col)
        source = source[:a] + new + source[b:]
    return source


def _insert_import(source: str, line: str) -> str:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return line + "\n" + source
    after = 0
    for node in tree.body:
        is_doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is tree.body[0]
        if is_doc or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            after = node.end_lineno or node.lineno
        else:
            break
    lines = source.splitlines(keepends=True)
    return "".join(lines[:after]) + line + "\n" + "".join(lines[after:])
