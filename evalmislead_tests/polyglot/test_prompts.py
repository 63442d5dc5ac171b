"""The Java and JavaScript prompts: what each condition shows on real problems, and the templates render whole."""

from __future__ import annotations

import hashlib
import re

import pytest

from evalmislead_assets import settings
from evalmislead_assets.llm import prompts as py_prompts
from evalmislead_assets.polyglot import prompts
from evalmislead_assets.polyglot.problems import Problem, declared_name, load_problems
from evalmislead_assets.study.conditions import CONDITION_NAMES

LANGS = ("java", "js")
SPEC = "Keep only the numbers greater than zero.\nThe order is kept."


def _problem(language: str, idx: int) -> Problem:
    return load_problems(language)[idx]


def _changed_lines(problem: Problem) -> tuple[str, str]:
    """A line only the buggy body has, and one only the fixed body has (the bug and its fix)."""
    buggy = problem.buggy_code[len(problem.declaration):].splitlines()
    fixed = problem.fixed_code[len(problem.declaration):].splitlines()
    only_buggy = [ln.strip() for ln in buggy if ln not in fixed and ln.strip()]
    only_fixed = [ln.strip() for ln in fixed if ln not in buggy and ln.strip()]
    return only_buggy[0], only_fixed[0]


def _doc_line(problem: Problem) -> str:
    """The first text line of the entry point's own doc comment (the one ``prompt`` adds to ``declaration``)."""
    comment = problem.prompt[problem.prompt.rfind("/*"):].splitlines()
    text = [ln.strip().removeprefix("/**").removeprefix("/*").strip() for ln in comment]
    return next(t for t in text if t and t != "*/")


# 30: get_positive (the protocol's example); 0: a loop; 10: a helper with its own doc comment before the entry
# point; 114: a row whose entry_point field misnames the declared function
@pytest.mark.parametrize("language", LANGS)
@pytest.mark.parametrize("idx", [0, 10, 30, 114])
def test_each_condition_shows_what_the_protocol_says(language: str, idx: int) -> None:
    p = _problem(language, idx)
    bug, fix = _changed_lines(p)
    doc = _doc_line(p)
    entry_line = p.declaration.rstrip().splitlines()[-1].strip()
    shown = {c: prompts.shown_code(p, c, SPEC) for c in CONDITION_NAMES}
    for condition, code in shown.items():
        assert entry_line in code, condition  # every condition shows the signature
    assert bug in shown["buggy_code"] and fix not in shown["buggy_code"] and doc not in shown["buggy_code"]
    assert fix in shown["fixed_code"] and bug not in shown["fixed_code"] and doc not in shown["fixed_code"]
    for condition in ("signature_only", "human_docstring", "model_spec"):  # no body: neither the bug nor the fix
        code = shown[condition]
        assert bug not in code and fix not in code and "// ..." in code, condition
    assert doc not in shown["signature_only"] and "greater than zero" not in shown["signature_only"]
    assert doc in shown["human_docstring"] and "greater than zero" not in shown["human_docstring"]
    assert "greater than zero" in shown["model_spec"] and doc not in shown["model_spec"]
    assert doc in shown["buggy_code_with_docstring"] and bug in shown["buggy_code_with_docstring"]
    assert fix not in shown["buggy_code_with_docstring"]
    if idx == 10:  # a helper keeps its doc comment in every condition, as Python's helpers keep theirs
        assert all("is a palindrome */" in c or "is a palindrome\n     */" in c for c in shown.values())


def test_the_head_is_the_declaration_with_the_helpers_doc_comments() -> None:
    """Java's head is its ``declaration``; JavaScript's too, but for the helpers' doc comments its
    ``declaration`` drops (Python and Java keep them)."""
    for p in load_problems("java"):
        assert prompts.bare_head(p) == p.declaration, p.task_id
    differ = [p.task_id for p in load_problems("js") if prompts.bare_head(p).strip() != p.declaration.strip()]
    assert differ == ["JavaScript/10", "JavaScript/32", "JavaScript/38", "JavaScript/50"]


def test_get_positive_in_java_shows_the_bug_and_the_fix_and_the_spec_above_the_method() -> None:
    p = _problem("java", 30)
    assert "filter(p -> p < 0)" in prompts.shown_code(p, "buggy_code")
    assert "filter(p -> p > 0)" in prompts.shown_code(p, "fixed_code")
    spec = prompts.shown_code(p, "model_spec", SPEC)
    assert spec.endswith("    /**\n    Keep only the numbers greater than zero.\n    The order is kept.\n     */\n"
                         "    public List<Integer> getPositive(List<Integer> l) {\n        // ...\n    }\n}")
    assert prompts.shown_code(p, "signature_only").endswith(
        "class Solution {\n    public List<Integer> getPositive(List<Integer> l) {\n        // ...\n    }\n}")


def test_get_positive_in_js_shows_the_bug_and_the_fix_and_the_spec_above_the_function() -> None:
    p = _problem("js", 30)
    assert prompts.shown_code(p, "buggy_code") == "const getPositive = (l) => {\n  return l.filter(e => e < 0);\n}"
    assert prompts.shown_code(p, "fixed_code") == "const getPositive = (l) => {\n  return l.filter(e => e > 0);\n}"
    assert prompts.shown_code(p, "model_spec", SPEC) == (
        "/* Keep only the numbers greater than zero.\n  The order is kept.\n  */\n"
        "const getPositive = (l) => {\n  // ...\n}")


@pytest.mark.parametrize("language", LANGS)
def test_every_problem_and_condition_shows_balanced_code_that_ends_the_class(language: str) -> None:
    for p in load_problems(language):
        for condition in CONDITION_NAMES:
            code = prompts.shown_code(p, condition, SPEC)
            assert code.count("{") - code.count("}") == _braces(p), (p.task_id, condition)
            assert code.rstrip().endswith("}") and "/*" not in code.split(p.declaration.rstrip().splitlines()[-1])[-1]


def _braces(p: Problem) -> int:
    """The dataset's own imbalance (braces inside string literals of a few bodies), the same in every condition."""
    return p.fixed_code.count("{") - p.fixed_code.count("}")


def test_model_spec_needs_a_spec_and_a_spec_cannot_close_the_comment() -> None:
    p = _problem("java", 30)
    with pytest.raises(ValueError, match="needs the model-written spec for Java/30"):
        prompts.shown_code(p, "model_spec")
    with pytest.raises(ValueError, match="needs the model-written spec"):
        prompts.shown_code(p, "model_spec", "  \n")
    with pytest.raises(ValueError, match="unknown condition"):
        prompts.shown_code(p, "no_such_condition")
    code = prompts.shown_code(p, "model_spec", "ends early */ class Evil {}")
    assert code.count("*/") == 1 and "ends early * / class Evil {}" in code


@pytest.mark.parametrize("language", LANGS)
@pytest.mark.parametrize("kind", [prompts.TEST_TEMPLATE, prompts.SPEC_TEMPLATE])
def test_templates_render_with_no_missing_placeholder_and_record_their_sha256(language: str, kind: str) -> None:
    template = prompts.load_language_template(language, kind, settings.prompts_dir())
    path = settings.prompts_dir() / language / f"{kind}.md"
    assert template.name == f"{language}/{kind}" and template.fields == {"code", "entry_point"}
    assert template.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert template.sha256 != py_prompts.load_template(kind, settings.prompts_dir()).sha256
    for p in load_problems(language)[:20] + [_problem(language, 114)]:
        for condition in CONDITION_NAMES:
            if kind == prompts.SPEC_TEMPLATE:
                r = prompts.spec_prompt(p, template)
            else:
                r = prompts.generation_prompt(p, condition, SPEC, template)
            assert r.template_name == template.name and r.template_sha256 == template.sha256
            assert r.prompt_sha256 == hashlib.sha256(r.text.encode()).hexdigest()
            assert "{code}" not in r.text and "{entry_point}" not in r.text
            assert declared_name(p) in r.text.split("```")[-1]  # the instructions after the code name it
            assert prompts.shown_code(p, "buggy_code" if kind == prompts.SPEC_TEMPLATE else condition, SPEC) in r.text


def test_the_test_prompts_are_the_papers_request_in_each_language() -> None:
    java = prompts.load_language_template("java", "test_generation", settings.prompts_dir()).text
    js = prompts.load_language_template("js", "test_generation", settings.prompts_dir()).text
    assert java.startswith("Write unit tests for the following Java method that maximise branch and line coverage. "
                           "Use JUnit 5.")
    assert js.startswith("Write unit tests for the following JavaScript function that maximise branch and line "
                         "coverage. Use Node's built-in test runner (`node:test`) and `node:assert`.")
    assert "```java\n{code}\n```" in java and "```javascript\n{code}\n```" in js
    for text in (java, js):
        assert "Answer in Markdown." in text
    spec = prompts.load_language_template("java", "spec", settings.prompts_dir()).text.lower()
    assert "may contain bugs" in spec and "do not transcribe" in spec


def test_the_prompt_names_the_declared_function_where_the_dataset_misnames_it() -> None:
    template = prompts.load_language_template("java", "test_generation", settings.prompts_dir())
    text = prompts.generation_prompt(_problem("java", 99), "buggy_code", None, template).text
    assert "new Solution().countUpper(...)" in text and "closest_integer" not in text
    js = prompts.load_language_template("js", "test_generation", settings.prompts_dir())
    text = prompts.generation_prompt(_problem("js", 114), "buggy_code", None, js).text
    assert "const { minSubArraySum } = require('./solution.js');" in text


def test_unknown_language_or_kind_is_one_line_naming_the_choices(tmp_path) -> None:
    with pytest.raises(ValueError, match="language 'go' is not one of js, java"):
        prompts.template_name("go", "spec")
    with pytest.raises(ValueError, match="is not test_generation or spec"):
        prompts.template_name("java", "judge")
    with pytest.raises(FileNotFoundError, match="restore it from the repository"):
        prompts.load_language_template("java", "spec", tmp_path)


@pytest.mark.parametrize(("answer", "expected"), [
    ("/**\n * Keeps the positive numbers.\n *\n * @param l the list\n * @return the positives\n */",
     "Keeps the positive numbers.\n\n@param l the list\n@return the positives"),
    ("Here it is:\n```java\n/** Keeps the positive numbers. */\n```", "Keeps the positive numbers."),
    ("```\nKeeps the positive numbers.\n```", "Keeps the positive numbers."),
    ("Keeps the positive numbers.", "Keeps the positive numbers."),
    ("/* Keeps the positive\n   numbers. */", "Keeps the positive\nnumbers."),
    ("/**\n * Unclosed, cut at the cap", "Unclosed, cut at the cap"),
])
def test_extract_spec_reads_the_doc_comment(answer: str, expected: str) -> None:
    assert prompts.extract_spec(answer) == expected


@pytest.mark.parametrize("language", LANGS)
def test_a_spec_shown_and_read_back_is_the_same_text(language: str) -> None:
    p = _problem(language, 30)
    code = prompts.shown_code(p, "model_spec", SPEC)
    comment = re.search(r"/\*.*?\*/", code, re.S)
    assert comment and prompts.extract_spec(comment.group(0)) == SPEC
