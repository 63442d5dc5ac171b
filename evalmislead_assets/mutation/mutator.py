"""A small, deterministic AST mutator for the fixed version of each problem's function under test.

Why not a library: mutmut (3.x) and cosmic-ray are command-line tools built around a project
on disk, their own session database and their own test runner (mutmut rewrites the module
into "trampolines", cosmic-ray mutates parso trees and writes files per mutant); neither
exposes "source string in, list of mutants out", and both would bring a second test runner
next to the sandbox. This module only needs ``ast`` and ``tokenize``.

Only the body of the entry-point function is mutated (helper functions and imports of the
dataset's ``declaration`` are left alone). Each mutation is one textual edit of the fixed
code, so the mutant keeps the original formatting and its unified diff shows just the
changed line. Operators (the ``operator`` column):

| operator | what changes |
|---|---|
| ``arithmetic`` | one binary or augmented-assignment operator: ``+``↔``-``, ``*``↔``/``, ``//``→``/``, ``%``→``//``, ``**``→``*``, ``<<``↔``>>``, ``&``↔``|``, ``^``→``&`` |
| ``relational`` | one comparison operator: boundary (``<``↔``<=``, ``>``↔``>=``) and direction (``<``→``>``, ``<=``→``>=`` …), ``==``↔``!=``, ``is``↔``is not``, ``in``↔``not in`` |
| ``boolean`` | ``and``↔``or``; ``not x``→``x``; the condition of ``if``/``while``/``x if c else y``/a comprehension ``if`` negated |
| ``constant`` | a number ``n``→``n+1``, ``n-1``, ``0``; ``True``↔``False``; a non-empty string→``''``, ``''``→``'X'`` |
| ``return_value`` | ``return <expr>``→``return None`` |
| ``statement_deletion`` | an assignment, augmented assignment or expression statement→``pass`` |
| ``break_continue`` | ``break``↔``continue`` |
| ``slice_index`` | a slice bound or step removed (``s[1:n]``→``s[:n]``); a non-constant index or bound ``i``→``i + 1`` |

Candidates are listed in source order (position, then operator, then replacement); a
candidate whose code does not compile, equals the original or duplicates an earlier one is
dropped. ``mutant_id`` is the index in that list, so it stays the same whether or not the
list is sampled. More than ``MAX_MUTANTS_PER_PROBLEM`` candidates: a seeded sample
(``SAMPLE_SEED`` and the task id) of that many, kept in source order.
"""

from __future__ import annotations

import ast
import difflib
import io
import random
import tokenize
from dataclasses import dataclass

MAX_MUTANTS_PER_PROBLEM = 30
SAMPLE_SEED = 20260412
MUTATOR_VERSION = "ast-mutator-1"
OPERATORS = ("arithmetic", "relational", "boolean", "constant", "return_value", "statement_deletion",
             "break_continue", "slice_index")

_BINOP: dict[type, tuple[type, str]] = {
    ast.Add: (ast.Sub, "-"), ast.Sub: (ast.Add, "+"), ast.Mult: (ast.Div, "/"), ast.Div: (ast.Mult, "*"),
    ast.FloorDiv: (ast.Div, "/"), ast.Mod: (ast.FloorDiv, "//"), ast.Pow: (ast.Mult, "*"),
    ast.LShift: (ast.RShift, ">>"), ast.RShift: (ast.LShift, "<<"), ast.BitAnd: (ast.BitOr, "|"),
    ast.BitOr: (ast.BitAnd, "&"), ast.BitXor: (ast.BitAnd, "&"),
}
_CMP: dict[type, tuple[str, ...]] = {
    ast.Lt: ("<=", ">"), ast.LtE: ("<", ">="), ast.Gt: (">=", "<"), ast.GtE: (">", "<="),
    ast.Eq: ("!=",), ast.NotEq: ("==",), ast.Is: ("is not",), ast.IsNot: ("is",),
    ast.In: ("not in",), ast.NotIn: ("in",),
}
_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set)
_PARENS = {"(", ")"}


@dataclass(frozen=True)
class Mutant:
    mutant_id: int
    operator: str
    line: int  # 1-based line of the edit in the fixed code
    description: str  # e.g. "> -> >="
    code: str
    diff: str  # unified diff, fixed -> mutant


@dataclass(frozen=True)
class _Edit:
    start: int  # character offsets into the source
    end: int
    text: str
    operator: str
    description: str
    line: int


class MutationError(ValueError):
    """The code has no function of that name, or does not parse."""


def mutants(code: str, entry_point: str, cap: int = MAX_MUTANTS_PER_PROBLEM, seed: int = SAMPLE_SEED,
            key: str = "") -> tuple[list[Mutant], int]:
    """(the mutants kept, the number of candidates): all candidates, or a seeded sample of ``cap``."""
    every = candidates(code, entry_point)
    if cap <= 0 or len(every) <= cap:
        return every, len(every)
    rng = random.Random(f"{seed}:{key}")
    keep = sorted(rng.sample(range(len(every)), cap))
    return [every[i] for i in keep], len(every)


def candidates(code: str, entry_point: str) -> list[Mutant]:
    """Every mutant of the body of ``entry_point``, in source order, deduplicated, compiling."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise MutationError(f"code does not parse: {exc}") from exc
    funcs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry_point]
    if not funcs:
        raise MutationError(f"no top-level function {entry_point!r} in the code")
    finder = _Finder(code)
    for stmt in funcs[-1].body:
        finder.visit(stmt)
    order = {op: i for i, op in enumerate(OPERATORS)}
    edits = sorted(finder.edits, key=lambda e: (e.start, e.end, order[e.operator], e.description))
    out: list[Mutant] = []
    seen = {code}
    for e in edits:
        new = code[:e.start] + e.text + code[e.end:]
        if new in seen:
            continue
        try:
            compile(new, "<mutant>", "exec")
        except (SyntaxError, ValueError):
            continue
        seen.add(new)
        out.append(Mutant(len(out), e.operator, e.line, e.description, new, unified_diff(code, new)))
    return out


def unified_diff(before: str, after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 "fixed", "mutant", n=1)
    return "".join(ln if ln.endswith("\n") else ln + "\n" for ln in lines)


class _Finder(ast.NodeVisitor):
    """Collects the candidate edits of one function body."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.edits: list[_Edit] = []
        lines = code.split("\n")
        self._starts = [0]
        for ln in lines:
            self._starts.append(self._starts[-1] + len(ln) + 1)
        self._bytes = [ln.encode("utf-8") for ln in lines]
        self._tokens = _tokens(code, self._starts)

    # ------------------------------------------------------------ positions

    def _off(self, lineno: int, col_bytes: int) -> int:
        return self._starts[lineno - 1] + len(self._bytes[lineno - 1][:col_bytes].decode("utf-8", "replace"))

    def _span(self, node: ast.AST) -> tuple[int, int]:
        return (self._off(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self._off(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def _seg(self, node: ast.AST) -> str:
        a, b = self._span(node)
        return self.code[a:b]

    def _add(self, start: int, end: int, text: str, operator: str, description: str) -> None:
        line = self.code.count("\n", 0, start) + 1
        self.edits.append(_Edit(start, end, text, operator, description, line))

    def _replace(self, node: ast.AST, text: str, operator: str, description: str) -> None:
        a, b = self._span(node)
        self._add(a, b, text, operator, description)

    def _between(self, left: ast.AST, right: ast.AST) -> tuple[int, int] | None:
        """The span of the operator token(s) between two operands (parentheses skipped)."""
        lo, hi = self._span(left)[1], self._span(right)[0]
        inside = [(a, b) for a, b, s in self._tokens if a >= lo and b <= hi and s not in _PARENS]
        return (inside[0][0], inside[-1][1]) if inside else None

    def _wrapped(self, node: ast.AST) -> str:
        seg = self._seg(node)
        return seg if isinstance(node, _ATOMS) else f"({seg})"

    # ------------------------------------------------------------ operators

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:  # positions inside f-strings are unreliable
        return

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._replace(node, "pass", "statement_deletion", "delete statement")
            self.visit(node.value)
        self.visit(node.target)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._replace(node, "pass", "statement_deletion", "delete statement")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._replace(node, "pass", "statement_deletion", "delete statement")
        swap = _BINOP.get(type(node.op))
        span = self._between(node.target, node.value)
        if swap and span:
            old = self.code[span[0]:span[1]]
            self._add(*span, swap[1] + "=", "arithmetic", f"{old} -> {swap[1]}=")
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):  # not a docstring
            self._replace(node, "pass", "statement_deletion", "delete statement")
            self.generic_visit(node)

    def visit_Break(self, node: ast.Break) -> None:
        self._replace(node, "continue", "break_continue", "break -> continue")

    def visit_Continue(self, node: ast.Continue) -> None:
        self._replace(node, "break", "break_continue", "continue -> break")

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            self._replace(node.value, "None", "return_value", "return value -> None")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        swap = _BINOP.get(type(node.op))
        span = self._between(node.left, node.right)
        if swap and span:
            self._add(*span, swap[1], "arithmetic", f"{self.code[span[0]:span[1]]} -> {swap[1]}")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            span = self._between(operands[i], operands[i + 1])
            if span is None:
                continue
            old = self.code[span[0]:span[1]]
            for new in _CMP.get(type(op), ()):
                self._add(*span, new, "relational", f"{old} -> {new}")
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        new = "or" if isinstance(node.op, ast.And) else "and"
        for left, right in zip(node.values, node.values[1:]):
            span = self._between(left, right)
            if span:
                self._add(*span, new, "boolean", f"{self.code[span[0]:span[1]]} -> {new}")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self._replace(node, self._wrapped(node.operand), "boolean", "not x -> x")
        self.generic_visit(node)

    def _negate(self, test: ast.expr) -> None:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return  # removing the `not` is already a candidate
        self._replace(test, f"not {self._wrapped(test)}", "boolean", "condition negated")

    def visit_If(self, node: ast.If) -> None:
        self._negate(node.test)
        self.generic_visit(node)

    def visit_While(self, node: ast.While) -> None:
        self._negate(node.test)
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._negate(node.test)
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        for cond in node.ifs:
            self._negate(cond)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, bool):
            self._replace(node, repr(not v), "constant", f"{v!r} -> {not v!r}")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            for new in (v + 1, v - 1, type(v)(0)):
                if new != v:
                    text = repr(new)
                    self._replace(node, f"({text})" if new < 0 else text, "constant", f"{v!r} -> {text}")
        elif isinstance(v, str):
            new_s = "" if v else "X"
            self._replace(node, repr(new_s), "constant", f"{_short(repr(v))} -> {new_s!r}")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        sl = node.slice
        if isinstance(sl, ast.Slice):
            for name in ("lower", "upper", "step"):
                bound = getattr(sl, name)
                if bound is None:
                    continue
                a, b = self._span(bound)
                self._add(a, b, "", "slice_index", f"remove slice {name} {_short(self._seg(bound))}")
                self._plus_one(bound)
        else:
            self._plus_one(sl)
        self.generic_visit(node)

    def _plus_one(self, index: ast.expr) -> None:
        if isinstance(index, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            seg = self._seg(index)
            self._replace(index, f"{seg} + 1", "slice_index", f"{_short(seg)} -> {_short(seg)} + 1")


def _tokens(code: str, starts: list[int]) -> list[tuple[int, int, str]]:
    """(start, end, text) of every operator and keyword token, as character offsets."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type in (tokenize.OP, tokenize.NAME):
                (r0, c0), (r1, c1) = tok.start, tok.end
                out.append((starts[r0 - 1] + c0, starts[r1 - 1] + c1, tok.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def _short(text: str, n: int = 30) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
