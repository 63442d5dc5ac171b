"""Prompt templates from prompts/: load, render per condition, and hash (template and rendered text)."""

from __future__ import annotations

import ast
import hashlib
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalmislead_assets.store.hashing import sha256_text
from evalmislead_assets.study.conditions import CONDITIONS

TEST_TEMPLATE = "test_generation"
SPEC_TEMPLATE = "spec"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Rendered:
    text: str
    template_name: str
    template_sha256: str
    prompt_sha256: str


@dataclass(frozen=True)
class Template:
    name: str
    path: Path
    text: str
    sha256: str

    @property
    def fields(self) -> set[str]:
        return set(_PLACEHOLDER.findall(self.text))

    def render(self, **fields: Any) -> Rendered:
        text = render_text(self.text, fields, self.name)
        return Rendered(text, self.name, self.sha256, sha256_text(text))


def load_template(name: str, prompts_dir: Path) -> Template:
    """<prompts_dir>/<name>.md (or the file named exactly); the sha256 covers the file's bytes.

    The wiring passes settings.prompts_dir() (EVALMISLEAD_PROMPTS_DIR, else prompts/ in the project).
    """
    path = Path(prompts_dir) / name
    if not path.suffix:
        path = path.with_suffix(".md")
    if not path.is_file():
        raise FileNotFoundError(f"prompt template {path} is missing; restore it from the repository")
    raw = path.read_bytes()
    return Template(path.stem, path, raw.decode("utf-8"), hashlib.sha256(raw).hexdigest())


def render_text(template: str, fields: Mapping[str, Any], name: str = "template") -> str:
    """Replace each {field}; every placeholder must be given. Other braces ({1,20}, {}) stay as they are.

    One pass: braces inside the inserted values (Python code) are never read as placeholders.
    """
    missing = sorted(set(_PLACEHOLDER.findall(template)) - set(fields))
    if missing:
        raise KeyError(f"prompt {name} needs {missing}")
    return _PLACEHOLDER.sub(lambda m: str(fields[m.group(1)]), template)


# ---- what each condition shows (PROTOCOL.md, "Conditions") ----


def remove_docstring(code: str, entry_point: str) -> str:
    """The code without the docstring of `entry_point` (helpers keep theirs: they are not under test)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    lines = code.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                del lines[first.lineno - 1 : first.end_lineno]
                if len(node.body) == 1:  # a body that was only the docstring stays a valid stub
                    lines.insert(first.lineno - 1, " " * first.col_offset + "...\n")
            break
    return "".join(lines)


def _tidy(code: str) -> str:
    return code.strip("\n").rstrip()


def _as_docstring(text: str, indent: str = "    ") -> str:
    body = text.strip().replace('"""', "'''")
    lines = body.splitlines() or [""]
    inner = "\n".join((indent + ln) if ln.strip() else "" for ln in lines)
    return f'{indent}"""\n{inner}\n{indent}"""\n'


_SOLUTION = {"buggy": "buggy_solution", "fixed": "canonical_solution"}


def shown_code(problem: Mapping[str, Any], condition: str, spec_text: str | None = None) -> str:
    """The Python shown to the model for one problem under one condition (conditions.CONDITIONS)."""
    shows = CONDITIONS.get(condition)
    if shows is None:
        raise ValueError(f"unknown condition {condition!r}")
    # `declaration`: helpers + imports + the def line, no entry docstring; `prompt`: the same with it
    if shows.shows_docstring:
        head = problem["prompt"]
    elif shows.shows_model_spec:
        if spec_text is None:
            raise ValueError(f"condition {condition} needs the model-written spec for {problem['task_id']}")
        head = problem["declaration"] + _as_docstring(spec_text)
    else:
        head = problem["declaration"]
    if shows.shows_code:
        code = head + problem[_SOLUTION[shows.shows_code]]
        if not (shows.shows_docstring or shows.shows_model_spec):
            code = remove_docstring(code, problem["entry_point"])
    elif shows.shows_docstring or shows.shows_model_spec:
        code = head  # a docstring is a complete function body
    else:
        code = head + "    ...\n"
    return _tidy(code)


def generation_prompt(problem: Mapping[str, Any], condition: str, spec_text: str | None, template: Template) -> Rendered:
    return template.render(code=shown_code(problem, condition, spec_text), entry_point=problem["entry_point"])


def spec_prompt(problem: Mapping[str, Any], template: Template) -> Rendered:
    """The spec request: the buggy code, docstring removed."""
    return template.render(code=shown_code(problem, "buggy_code"), entry_point=problem["entry_point"])


_TRIPLE = re.compile(r'("""|\'\'\')(.*?)(?:\1|$)', re.S)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|$)", re.S)


def extract_spec(answer: str) -> str:
    """The docstring in a spec answer: the first triple-quoted string, else the first fence, else the text."""
    m = _TRIPLE.search(answer)
    if m and m.group(2).strip():
        text = m.group(2)
    else:
        f = _FENCE.search(answer)
        text = f.group(1) if f and f.group(1).strip() else answer
    return inspect.cleandoc(text).strip()
