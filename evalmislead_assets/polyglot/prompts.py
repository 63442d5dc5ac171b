"""The test and spec prompts for JavaScript and Java, and what each of the six conditions shows.

The templates are files under ``prompts/<language>/`` (``prompts/java/test_generation.md``, ...), loaded
and rendered by the Python chain's machinery (``llm/prompts.py``: same ``{code}``/``{entry_point}``
placeholders, sha256 of the template file and of the rendered text). A template's name carries its
language (``java/test_generation``), so a stored row never confuses it with Python's.

What a condition shows mirrors ``llm.prompts.shown_code`` (PROTOCOL.md, "Conditions"), built from the
dataset's fields: ``prompt`` (imports, helpers with their own doc comments, the entry point's Javadoc/JSDoc
comment and its first line), the same without the entry point's comment (``bare_head``; Java's
``declaration``), and the buggy or fixed body (which closes the function, and in Java the class).

| condition | shows |
| --- | --- |
| ``buggy_code`` / ``fixed_code`` | the head + buggy / fixed body, no doc comment |
| ``model_spec`` | the head with the model's spec as the doc comment, a stub body |
| ``signature_only`` | the head, a stub body |
| ``human_docstring`` | the head with the dataset's doc comment, a stub body |
| ``buggy_code_with_docstring`` | the head with the dataset's doc comment + buggy body |

The stub body is ``// ...`` and the closing braces: a Java or JS function has no docstring to stand for
its body, as Python's does.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

from evalmislead_assets.llm.prompts import Rendered, Template, load_template
from evalmislead_assets.polyglot.problems import LANGUAGES, Problem, declared_name
from evalmislead_assets.study.conditions import CONDITIONS

TEST_TEMPLATE = "test_generation"
SPEC_TEMPLATE = "spec"


def template_name(language: str, kind: str) -> str:
    """``java/test_generation``: the file ``prompts/java/test_generation.md`` and the name stored with a row."""
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} is not one of {', '.join(LANGUAGES)}")
    if kind not in (TEST_TEMPLATE, SPEC_TEMPLATE):
        raise ValueError(f"prompt kind {kind!r} is not {TEST_TEMPLATE} or {SPEC_TEMPLATE}")
    return f"{language}/{kind}"


def load_language_template(language: str, kind: str, prompts_dir: Path) -> Template:
    """The template of one language, named with its language; sha256 of the file's bytes as for Python."""
    name = template_name(language, kind)
    return dataclasses.replace(load_template(name, prompts_dir), name=name)


# ---- what each condition shows ----


def _tidy(code: str) -> str:
    return code.strip("\n").rstrip()


def _split_entry_line(head: str) -> tuple[str, str]:
    """(everything before the entry point's first line, that line): the line the doc comment goes above."""
    lines = head.rstrip().splitlines(keepends=True)
    return "".join(lines[:-1]), lines[-1].rstrip() + "\n"


def bare_head(problem: Problem) -> str:
    """``prompt`` without the entry point's own doc comment (the last comment, just above its first line).

    For Java this is ``declaration``; JavaScript's ``declaration`` also drops the doc comments of helper
    functions (JavaScript/10, 32, 38, 50), which Python's and Java's keep, so the head is cut from ``prompt``.
    """
    start = problem.prompt.rfind("/*")
    end = problem.prompt.find("*/", start)
    if start < 0 or end < 0:
        return problem.declaration
    before = problem.prompt[:start].rstrip(" \t")
    after = re.sub(r"^[ \t]*\n", "", problem.prompt[end + 2:])
    return before + after


def as_doc_comment(text: str, language: str, indent: str = "") -> str:
    """A spec as the entry point's doc comment, laid out as the dataset's own (Java ``/**``, JS ``/*``)."""
    body = text.strip().replace("*/", "* /")
    lines = [ln.rstrip() for ln in body.splitlines()] or [""]
    if language == "java":
        inner = "".join(f"{indent}{ln}\n" if ln.strip() else "\n" for ln in lines)
        return f"{indent}/**\n{inner}{indent} */\n"
    rest = "".join(f"{indent}  {ln}\n" if ln.strip() else "\n" for ln in lines[1:])
    return f"{indent}/* {lines[0]}\n{rest}{indent}  */\n"


def _stub(problem: Problem) -> str:
    """A body that stands for no code: ``// ...`` and the braces the dataset's body would have closed."""
    _, entry_line = _split_entry_line(bare_head(problem))
    indent = entry_line[: len(entry_line) - len(entry_line.lstrip())]
    closing = f"{indent}}}\n" + ("}\n" if problem.language == "java" else "")
    return f"{indent}    // ...\n{closing}" if problem.language == "java" else f"{indent}  // ...\n{closing}"


def _with_doc(problem: Problem, spec_text: str) -> str:
    head, entry_line = _split_entry_line(bare_head(problem))
    indent = entry_line[: len(entry_line) - len(entry_line.lstrip())]
    return head + as_doc_comment(spec_text, problem.language, indent) + entry_line


def shown_code(problem: Problem, condition: str, spec_text: str | None = None) -> str:
    """The JavaScript or Java shown to the model for one problem under one condition (conditions.CONDITIONS)."""
    shows = CONDITIONS.get(condition)
    if shows is None:
        raise ValueError(f"unknown condition {condition!r}")
    if shows.shows_docstring:
        head = problem.prompt
    elif shows.shows_model_spec:
        if spec_text is None or not spec_text.strip():
            raise ValueError(f"condition {condition} needs the model-written spec for {problem.task_id}")
        head = _with_doc(problem, spec_text)
    else:
        head = bare_head(problem)
    if shows.shows_code:
        program = problem.buggy_code if shows.shows_code == "buggy" else problem.fixed_code
        code = head + program[len(problem.declaration):]
    else:
        code = head + _stub(problem)
    return _tidy(code)


def generation_prompt(problem: Problem, condition: str, spec_text: str | None, template: Template) -> Rendered:
    return template.render(code=shown_code(problem, condition, spec_text), entry_point=declared_name(problem))


def spec_prompt(problem: Problem, template: Template) -> Rendered:
    """The spec request: the buggy code, no doc comment (as Python's)."""
    return template.render(code=shown_code(problem, "buggy_code"), entry_point=declared_name(problem))


# ---- the spec in an answer ----

_COMMENT = re.compile(r"/\*\*?(.*?)(?:\*/|$)", re.S)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|$)", re.S)


def _comment_text(raw: str) -> str:
    lines = [re.sub(r"^\s*\*(?!/) ?", "", ln) for ln in raw.splitlines()]
    return inspect.cleandoc("\n".join(lines)).strip()


def extract_spec(answer: str) -> str:
    """The doc comment in a spec answer: the first ``/** */`` (or ``/* */``) comment's text with its ``*``
    margins removed, else the first fence, else the text."""
    m = _COMMENT.search(answer or "")
    if m and _comment_text(m.group(1)):
        return _comment_text(m.group(1))
    f = _FENCE.search(answer or "")
    text = f.group(1) if f and f.group(1).strip() else (answer or "")
    return inspect.cleandoc(text).strip()
