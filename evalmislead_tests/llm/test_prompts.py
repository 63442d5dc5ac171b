import ast
import hashlib

import pytest

from evalmislead_assets import settings
from evalmislead_assets.llm import prompts
from evalmislead_assets.study.conditions import CONDITION_NAMES

SPEC = "Return the list sorted.\n\n>>> f([2, 1])\n[1, 2]"


def _body_lines(problem: dict, field: str) -> list[str]:
    """Distinctive lines of a solution body: long enough and not also in the helpers/declaration."""
    decl = problem["declaration"]
    return [ln.strip() for ln in problem[field].splitlines() if len(ln.strip()) > 8 and ln.strip() not in decl]


def _docstring_lines(problem: dict) -> list[str]:
    return [ln.strip() for ln in problem["docstring"].splitlines() if len(ln.strip()) > 12]


@pytest.fixture(scope="module")
def records(problems_df):
    return problems_df.to_dict("records")


def test_templates_are_files_hashed_by_their_bytes() -> None:
    for name in (prompts.TEST_TEMPLATE, prompts.SPEC_TEMPLATE):
        t = prompts.load_template(name, settings.prompts_dir())
        path = settings.prompts_dir() / f"{name}.md"
        assert t.path == path
        assert t.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert t.fields == {"code", "entry_point"}


def test_test_template_is_the_papers_request_in_python() -> None:
    text = prompts.load_template(prompts.TEST_TEMPLATE, settings.prompts_dir()).text.lower()
    assert "branch and line coverage" in text and "pytest" in text and "markdown" in text
    assert "from solution import {entry_point}" in text


def test_spec_template_warns_about_bugs() -> None:
    text = prompts.load_template(prompts.SPEC_TEMPLATE, settings.prompts_dir()).text.lower()
    assert "docstring" in text and "may contain bugs" in text and "do not transcribe" in text


def test_render_is_one_pass_and_strict() -> None:
    out = prompts.render_text("a {code} b {1,3} {}", {"code": "d = {'x': 1}; f'{code}'"})
    assert out == "a d = {'x': 1}; f'{code}' b {1,3} {}"
    with pytest.raises(KeyError, match="entry_point"):
        prompts.render_text("{code} {entry_point}", {"code": "x"})


def test_every_condition_renders_valid_python_for_all_problems(records) -> None:
    template = prompts.load_template(prompts.TEST_TEMPLATE, settings.prompts_dir())
    for p in records:
        for condition in CONDITION_NAMES:
            code = prompts.shown_code(p, condition, SPEC)
            ast.parse(code)  # what the model is shown is a well-formed module
            r = prompts.generation_prompt(p, condition, SPEC, template)
            assert f"```python\n{code}\n```" in r.text
            assert f"from solution import {p['entry_point']}" in r.text
            assert r.template_sha256 == template.sha256
            assert r.prompt_sha256 == hashlib.sha256(r.text.encode()).hexdigest()


def test_code_conditions_show_the_body_and_no_docstring(records) -> None:
    for p in records:
        buggy = prompts.shown_code(p, "buggy_code")
        fixed = prompts.shown_code(p, "fixed_code")
        assert p["buggy_solution"].strip() in buggy
        assert p["canonical_solution"].strip() in fixed
        for line in _docstring_lines(p):
            assert line not in buggy, (p["task_id"], line)
            assert line not in fixed, (p["task_id"], line)


def test_conditions_without_code_show_no_body(records) -> None:
    for p in records:
        shown = {c: prompts.shown_code(p, c, SPEC) for c in ("model_spec", "signature_only", "human_docstring")}
        for field in ("buggy_solution", "canonical_solution"):
            for line in _body_lines(p, field):
                for condition, code in shown.items():
                    shown_lines = {ln.strip() for ln in code.splitlines()}
                    assert line not in shown_lines, (p["task_id"], condition, line)
        assert "Return the list sorted." in shown["model_spec"]
        assert f"def {p['entry_point']}(" in shown["signature_only"]
        for line in _docstring_lines(p):
            assert line not in shown["model_spec"] and line not in shown["signature_only"]
            assert line in shown["human_docstring"]


def test_buggy_code_with_docstring_shows_both(records) -> None:
    p = next(r for r in records if r["task_id"] == "Python/30")
    code = prompts.shown_code(p, "buggy_code_with_docstring")
    assert "Return only positive numbers in the list." in code
    assert "return [e for e in l if e < 0]" in code


def test_get_positive_example(records) -> None:
    p = next(r for r in records if r["task_id"] == "Python/30")
    assert prompts.shown_code(p, "buggy_code") == "def get_positive(l: list):\n    return [e for e in l if e < 0]"
    assert prompts.shown_code(p, "signature_only") == "def get_positive(l: list):\n    ..."


def test_model_spec_needs_a_spec(records) -> None:
    with pytest.raises(ValueError, match="model_spec"):
        prompts.shown_code(records[0], "model_spec", None)


def test_spec_prompt_shows_the_buggy_code_without_docstring(records) -> None:
    p = next(r for r in records if r["task_id"] == "Python/30")
    text = prompts.spec_prompt(p, prompts.load_template(prompts.SPEC_TEMPLATE, settings.prompts_dir())).text
    assert "return [e for e in l if e < 0]" in text
    assert "Return only positive numbers" not in text
    assert "`get_positive`" in text


def test_remove_docstring_only_touches_the_entry_point() -> None:
    code = 'def helper():\n    """keep me"""\n    return 1\n\n\ndef f(x):\n    """drop me\n    twice"""\n    return x\n'
    out = prompts.remove_docstring(code, "f")
    assert "keep me" in out and "drop me" not in out and "return x" in out
    assert prompts.remove_docstring('def f():\n    """only"""\n', "f") == "def f():\n    ...\n"


@pytest.mark.parametrize(
    ("answer", "spec"),
    [
        ('"""\n    Return the sum.\n\n    >>> add(1, 2)\n    3\n    """', "Return the sum.\n\n>>> add(1, 2)\n3"),
        ("Here it is:\n```python\ndef add(a, b):\n    '''Add two numbers.'''\n```", "Add two numbers."),
        ("```\nAdd two numbers.\n```", "Add two numbers."),
        ("Add two numbers.", "Add two numbers."),
        ('"""Add two numbers and', "Add two numbers and"),  # truncated mid-docstring
    ],
)
def test_extract_spec(answer: str, spec: str) -> None:
    assert prompts.extract_spec(answer) == spec


def test_spec_with_triple_quotes_stays_valid_python(records) -> None:
    code = prompts.shown_code(records[0], "model_spec", 'Uses """quotes""" inside.')
    ast.parse(code)
