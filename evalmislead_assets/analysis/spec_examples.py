"""The execution judge of spec labels: run the examples a spec states against both versions of its problem.

A model-written spec often ends with examples (``f([1, 2]) -> 3``, ``>>> f(1)`` followed by the expected
output, ``f(1) returns 2``). Each example the extractor can read safely becomes one pytest test, run in the
project's sandbox against the buggy and the fixed version like a generated test (``execution.cells``): an
example that passes on the buggy version only agrees with the bug, one that passes on the fixed version
only agrees with the correct behaviour.

Label of a spec: some examples agree with the buggy version only and none with the fixed only =>
``transcribes_bug``; the reverse => ``restores_correct``; otherwise (no example, every example agrees with
both or neither, examples on both sides, or one lone example among a majority that agrees with neither
version) no label, with the reason in ``note`` (``label_from_outcomes``).

Safety: the spec's text is never executed in this process. Arguments and expected values are read with
``ast.literal_eval`` (literals only: numbers, strings, bytes, tuples, lists, dicts, sets, booleans, None)
and written back with ``repr``; an example whose values are not literals, or whose ``repr`` does not read
back as the same value (a float too large for a literal), is refused. The test module is built from those
``repr`` strings alone and runs only inside the sandbox.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from evalmislead_assets.execution.cells import score_many
from evalmislead_assets.sandbox.host import Sandbox

MAX_EXAMPLES = 20  # per spec, in text order after removing repeats (runaway specs list hundreds)
MAX_LINE_CHARS = 2000  # longer lines are not read (a runaway answer's one endless line)
EXEC_CATEGORIES = ("transcribes_bug", "restores_correct")

NO_EXAMPLES = "no example the extractor can read"
NO_SIDE = "every example agrees with both versions or with neither"


@dataclass(frozen=True)
class Example:
    """One call with literal arguments and the value the spec says it returns."""

    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    expected: Any
    text: str  # the spec's line(s) the example was read from

    def call_source(self, name: str) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{name}({', '.join(parts)})"

    def key(self) -> str:
        return repr((self.args, self.kwargs, self.expected))


# ---------------------------------------------------------------- reading literals


def _literal(node_or_text: ast.AST | str) -> tuple[bool, Any]:
    """(ok, value): a literal whose repr reads back as the same value; anything else is refused."""
    try:
        value = ast.literal_eval(node_or_text)
        ok = ast.literal_eval(repr(value)) == value
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, AttributeError, KeyError):
        return False, None
    return ok, value


# what may follow the expected value on its line: nothing, or an explanation that cannot be part of it
_TRAILER = re.compile(
    r"^\s*(?:$|#|\(\s*[A-Za-z]|,\s*[A-Za-z]|[.;:!](?:\s|$)|[-–—]+\s+[A-Za-z]"
    r"|(?:because|since|as|which|where|if|when|for|and|but|i\.e\.|e\.g\.)(?:\s|$))",
)


def read_value(text: str) -> tuple[bool, Any]:
    """The literal at the start of ``text``, followed by nothing or by an explanation (``10 (since ...)``).

    The longest prefix that is a literal wins. A bare tuple (``1, 2``) is refused: it cannot be told
    from a value followed by a comma; a tuple is read only when written in parentheses.
    """
    text = text.strip()
    if len(text) > MAX_LINE_CHARS:
        return False, None
    for end in range(len(text), 0, -1):
        head, rest = text[:end].rstrip(), text[end:]
        if len(head) < end or not _TRAILER.match(rest):
            continue
        try:
            tree = ast.parse(head, mode="eval")
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        if isinstance(tree.body, ast.Tuple) and not head.startswith("("):
            continue
        ok, value = _literal(tree.body)
        if ok:
            return True, value
    return False, None


def read_call(text: str, name: str) -> tuple[ast.Call | None, str]:
    """(the call ``name(...)`` at the start of ``text``, the text after it), or (None, text)."""
    if not text.startswith(name + "("):
        return None, text
    for end in range(len(name) + 1, min(len(text), MAX_LINE_CHARS)):
        if text[end] != ")":
            continue
        try:
            tree = ast.parse(text[: end + 1], mode="eval")
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        body = tree.body
        if isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id == name:
            return body, text[end + 1:]
    return None, text


def _call_values(call: ast.Call) -> tuple[bool, tuple[Any, ...], tuple[tuple[str, Any], ...]]:
    args, kwargs = [], []
    for a in call.args:
        ok, v = _literal(a) if not isinstance(a, ast.Starred) else (False, None)
        if not ok:
            return False, (), ()
        args.append(v)
    for k in call.keywords:
        ok, v = _literal(k.value)
        if k.arg is None or not ok:  # **kwargs, or a value that is no literal
            return False, (), ()
        kwargs.append((k.arg, v))
    return True, tuple(args), tuple(kwargs)


# ---------------------------------------------------------------- the forms an example takes

# between the call and the value: "->", "=>", "==", "returns", "should return", "# Returns", "# ->", "# Output:"
_ARROW = re.compile(
    r"^\s*(?:\#\s*)?(?:->|=>|==|→|(?:output|result)\s*:|(?:it\s+)?(?:returns|should\s+return|will\s+return|"
    r"would\s+return|return|gives|outputs|is\s+expected\s+to\s+return)\b:?)\s*",
    re.I,
)
_BULLET = re.compile(r"^\s*(?:[-*+•]\s+|\d+[.)]\s+)?")


def _clean(line: str) -> str:
    """The line without its list bullet, its markdown backticks and a leading ``assert``."""
    line = _BULLET.sub("", line).replace("`", "").strip()
    if line.startswith("assert "):
        line = line[len("assert "):].strip()
    return line


def extract_examples(spec: str, name: str) -> list[Example]:
    """Every example of ``name`` the spec states in a form read safely, in text order, repeats removed."""
    if not isinstance(spec, str) or not name.isidentifier():
        return []
    lines = spec.splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        i += 1
        if len(raw) > MAX_LINE_CHARS:
            continue
        stripped = raw.strip()
        doctest = stripped.startswith(">>>")
        text = _clean(stripped[3:] if doctest else raw)
        call, rest = read_call(text, name)
        if call is None:
            continue
        ok, args, kwargs = _call_values(call)
        if not ok:
            continue
        m = _ARROW.match(rest)
        nxt = _clean(lines[i]) if i < len(lines) and not rest.strip() else ""
        m_next = _ARROW.match(nxt) if nxt else None
        if m:
            ok, expected = read_value(rest[m.end():])
        elif m_next:  # the value on the next line: "f(x)" then "# Output: y" (or "-> y", "Returns y")
            i += 1
            ok, expected = read_value(nxt[m_next.end():])
        elif doctest and not rest.strip():  # doctest: the expected output is on the following lines
            out: list[str] = []
            while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith((">>>", "```")):
                out.append(lines[i].strip())
                i += 1
            ok, expected = read_value(" ".join(out)) if out else (False, None)
        else:
            continue
        if ok:
            found.append(Example(args, kwargs, expected, stripped))
    unique: dict[str, Example] = {}
    for e in found:
        unique.setdefault(e.key(), e)
    return list(unique.values())


# ---------------------------------------------------------------- running them


def example_module(examples: Sequence[Example], name: str) -> tuple[str, list[str]]:
    """(pytest module source, its test ids): one test per example, built from the values' repr only."""
    lines = [f"from solution import {name} as _candidate", ""]
    ids = []
    for n, e in enumerate(examples):
        tid = f"test_example_{n}"
        ids.append(tid)
        call = e.call_source("_candidate")
        lines += ["", f"def {tid}():", f"    assert {call} == {e.expected!r}", ""]
    return "\n".join(lines), ids


@dataclass
class ExecLabel:
    category: str | None  # transcribes_bug | restores_correct | None (no evidence)
    note: str | None  # why there is no label
    n_examples: int = 0
    n_buggy_only: int = 0
    n_fixed_only: int = 0
    n_both_pass: int = 0
    n_neither: int = 0  # fails (or errs, times out, hits a cap) on both versions
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def transcribes_bug(self) -> bool | None:
        return {"transcribes_bug": True, "restores_correct": False}.get(self.category or "")

    @property
    def states_correct(self) -> bool | None:
        """True where the examples show the correct behaviour; not judged where they show the bug's."""
        return True if self.category == "restores_correct" else None


def label_from_outcomes(outcomes: Sequence[str]) -> tuple[str | None, str | None]:
    """(category, note) from the examples' cells (``execution.cells.outcome``).

    One version's examples only => its category. A lone such example is no evidence when most of the
    spec's examples agree with neither version: such a spec describes another function, and one of its
    examples can agree with a version by coincidence (an empty input, a zero).
    """
    buggy_only = sum(o == "misleading" for o in outcomes)
    fixed_only = sum(o == "effective" for o in outcomes)
    both_pass = sum(o == "both_pass" for o in outcomes)
    neither = len(outcomes) - buggy_only - fixed_only - both_pass
    if not outcomes:
        return None, NO_EXAMPLES
    if buggy_only and fixed_only:
        return None, (f"examples on both sides: {buggy_only} agree with the buggy version only, "
                      f"{fixed_only} with the fixed version only")
    side = buggy_only + fixed_only
    if not side:
        return None, NO_SIDE
    if side == 1 and neither > side + both_pass:
        return None, (f"one example agrees with the {'buggy' if buggy_only else 'fixed'} version only and "
                      f"{neither} of {len(outcomes)} with neither version: the spec describes another function")
    return ("transcribes_bug" if buggy_only else "restores_correct"), None


def judge_by_execution(jobs: Sequence[tuple[str, str, str, str]], sandbox: Sandbox,
                       max_examples: int = MAX_EXAMPLES) -> list[ExecLabel]:
    """One label per job (spec text, entry point, buggy code, fixed code); all examples in one sandbox batch."""
    prepared = []
    for spec, name, buggy, fixed in jobs:
        examples = extract_examples(spec, name)[:max_examples]
        source, ids = example_module(examples, name)
        prepared.append((examples, source, ids, buggy, fixed))
    runs = [(source, ids, buggy, fixed) for _, source, ids, buggy, fixed in prepared if ids]
    scored = iter(score_many(runs, sandbox) if runs else [])
    out = []
    for examples, _source, ids, _b, _f in prepared:
        tests = next(scored) if ids else []
        outcomes = [t.outcome for t in tests]
        cat, note = label_from_outcomes(outcomes)
        out.append(ExecLabel(
            cat, note, n_examples=len(examples),
            n_buggy_only=outcomes.count("misleading"), n_fixed_only=outcomes.count("effective"),
            n_both_pass=outcomes.count("both_pass"),
            n_neither=sum(o not in ("misleading", "effective", "both_pass") for o in outcomes),
            examples=[{"example": e.text[:300], "buggy": t.buggy_status, "fixed": t.fixed_status}
                      for e, t in zip(examples, tests)],
        ))
    return out


def examples_json(label: ExecLabel) -> str:
    return json.dumps(label.examples)  # ASCII: a lone surrogate in a spec stays an escape, never a write error


EXEC_COLUMNS = ["exec_category", "exec_note", "exec_n_examples", "exec_n_buggy_only", "exec_n_fixed_only",
                "exec_n_both_pass", "exec_n_neither", "exec_examples"]


def execution_labels(specs: pd.DataFrame, problems: pd.DataFrame, sandbox: Sandbox,
                     max_examples: int = MAX_EXAMPLES) -> pd.DataFrame:
    """One row per spec (thinking, task_id and ``EXEC_COLUMNS``); ``specs``: thinking, task_id, spec_text;
    ``problems``: task_id, entry_point, buggy_code, fixed_code. Every spec's examples run in one sandbox batch."""
    probs = problems.drop_duplicates("task_id").set_index("task_id")
    rows: list[dict[str, Any]] = []
    jobs, pending = [], []
    for s in specs.itertuples(index=False):
        row: dict[str, Any] = {"thinking": s.thinking, "task_id": s.task_id, **dict.fromkeys(EXEC_COLUMNS)}
        rows.append(row)
        text = s.spec_text if isinstance(s.spec_text, str) else ""
        if s.task_id not in probs.index:
            row["exec_note"] = "problem not stored; materialize problems"
        elif not text.strip():
            row["exec_note"] = "no spec text"
        else:
            p = probs.loc[s.task_id]
            jobs.append((text, str(p["entry_point"]), str(p["buggy_code"]), str(p["fixed_code"])))
            pending.append(row)
    for row, lab in zip(pending, judge_by_execution(jobs, sandbox, max_examples)):
        row.update({
            "exec_category": lab.category, "exec_note": lab.note, "exec_n_examples": lab.n_examples,
            "exec_n_buggy_only": lab.n_buggy_only, "exec_n_fixed_only": lab.n_fixed_only,
            "exec_n_both_pass": lab.n_both_pass, "exec_n_neither": lab.n_neither, "exec_examples": examples_json(lab),
        })
    df = pd.DataFrame(rows, columns=["thinking", "task_id", *EXEC_COLUMNS])
    for c in EXEC_COLUMNS:
        if c.startswith("exec_n_"):
            df[c] = df[c].astype("Int32")
    return df
