"""Imports of the code under test in a generated test module, pointed at the module the prompt names.

Part of extraction (extraction.py finds the code in an answer; this module normalises it): an
import of the function under test from a module that does not exist here becomes
``from solution import NAME`` where that is unambiguous, a top-level copy of a solution
function in the test file is removed, and a solution name used but never imported gets its
import. Each change is returned as a note (``import:main->solution``,
``removed_local_def:NAME``, ``import:added``). Top-level code that only runs a test runner
(an ``if __name__ == "__main__":`` block, a bare ``pytest.main(...)`` or ``unittest.main()``
statement) is removed too (``removed_main_block``, ``removed_runner_call``): it is never a
test, and a nested test session inside the sandbox reads as reaching into the harness.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from functools import lru_cache

from evalmislead_assets.sandbox.host import MODULE_UNDER_TEST


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

    def kept(node: ast.stmt) -> bool:
        return not any(a <= node.lineno <= b for a, b in spans)

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
    for imp in plain:
        if not any((a.asname or a.name) in as_solution for a in imp.names):
            continue
        parts = []
        for a in imp.names:
            if (a.asname or a.name) in as_solution:
                parts.append(f"{module} as {a.asname or a.name}")
                notes.append(f"import:{a.name}->{module}")
            else:
                parts.append(a.name + (f" as {a.asname}" if a.asname else ""))
        edits.append((imp.lineno, imp.col_offset, imp.end_lineno or imp.lineno, imp.end_col_offset or 0,
                      "import " + ", ".join(parts)))
    for definition, (first, last) in zip(removed, spans):
        edits.append((first, 0, last, 10 ** 9, ""))
        notes.append(f"removed_local_def:{definition.name}")
    for statement, note in _runner_statements(tree):
        edits.append((statement.lineno, 0, statement.end_lineno or statement.lineno, 10 ** 9, ""))
        notes.append(note)
    source = _apply_edits(source, edits)
    missing = _free_solution_names(source, names, module)
    if missing:
        source = _insert_import(source, f"from {module} import {', '.join(sorted(missing))}")
        notes.append("import:added")
    return source, notes


def _runner_statements(tree: ast.Module) -> list[tuple[ast.stmt, str]]:
    """Top-level statements that only start a test runner: ``if __name__ == "__main__":`` blocks
    and bare ``pytest.main(...)`` / ``unittest.main(...)`` calls (never when ``__name__`` is assigned)."""
    if any(isinstance(n, ast.Name) and n.id == "__name__" and not isinstance(n.ctx, ast.Load)
           for n in ast.walk(tree)):
        return []
    out: list[tuple[ast.stmt, str]] = []
    for node in tree.body:
        if isinstance(node, ast.If) and not node.orelse and isinstance(node.test, ast.Compare) \
                and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__" \
                and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq) \
                and isinstance(node.test.comparators[0], ast.Constant) \
                and node.test.comparators[0].value == "__main__":
            out.append((node, "removed_main_block"))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "main" \
                and isinstance(node.value.func.value, ast.Name) \
                and node.value.func.value.id in ("pytest", "unittest"):
            out.append((node, "removed_runner_call"))
    return out


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
