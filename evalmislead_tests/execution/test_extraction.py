"""Extraction from real answer shapes: fences, nested fences, several fences, no fence, truncation, imports."""

import re

from evalmislead_assets.execution.extraction import code_blocks, defined_names, extract, normalise_imports, strip_reasoning

TESTS = '''import pytest
from solution import get_positive


def test_all_positive():
    assert get_positive([1, 2, 3]) == []


def test_empty():
    assert get_positive([]) == []
'''

NESTED = f'''Sure! Below is a complete test file.

```markdown
# Unit tests for `get_positive`

The tests below cover every branch.

```python
{TESTS}```

Run them with:

```bash
pytest -q test_get_positive.py
```
```

Let me know if you need more tests.
'''


def _compiles(source: str) -> bool:
    compile(source, "<t>", "exec")
    return True


def test_plain_python_fence() -> None:
    found = extract(f"Here are the tests:\n\n```python\n{TESTS}```\n\nThese cover all branches.", "get_positive")
    assert found.source == TESTS and found.extraction == "fence:python"


def test_fence_nested_in_markdown_fence() -> None:
    # A flat fence regex stops at the first bare ``` line and returns the markdown prose instead
    naive = re.findall(r"```(?:\w*)\n(.*?)```", NESTED, re.DOTALL)
    assert "def test_all_positive" not in naive[0]
    found = extract(NESTED, "get_positive")
    assert found.source == TESTS
    assert found.extraction == "fence:markdown>python"
    assert [b.lang for b in code_blocks(NESTED)] == ["python", "bash"]


def test_unlabelled_fence_inside_markdown_fence() -> None:
    answer = "```markdown\nTests:\n```\nfrom solution import f\n\ndef test_f():\n    assert f(1) == 2\n```\n```\n"
    found = extract(answer, "f")
    assert found.source == "from solution import f\n\ndef test_f():\n    assert f(1) == 2\n"
    assert found.how == "fence:markdown>plain"


def test_several_fences_are_joined_and_shell_and_code_copies_dropped() -> None:
    answer = """First the imports:

```python
import pytest
from solution import get_positive
```

The function under test, for reference:

```python
def get_positive(l: list):
    return [e for e in l if e < 0]
```

Then the tests:

```python
def test_negatives_kept():
    assert get_positive([-1, 2]) == [-1]
```

```py
@pytest.mark.parametrize("xs", [[], [0]])
def test_no_negatives(xs):
    assert get_positive(xs) == []
```

```bash
pytest -q
```
"""
    found = extract(answer, "get_positive")
    assert found.how == "fence:py,python x3"
    assert "dropped_blocks:1" in found.notes
    assert "return [e for e in l" not in found.source
    assert found.source.startswith("import pytest\nfrom solution import get_positive\n")
    assert "def test_negatives_kept" in found.source and "def test_no_negatives" in found.source
    assert _compiles(found.source)


def test_tilde_fence_and_indented_fence_in_a_list() -> None:
    answer = "1. Tests:\n\n   ~~~python\n   from solution import f\n\n   def test_f():\n       assert f() is None\n   ~~~\n"
    found = extract(answer, "f")
    assert found.source == "from solution import f\n\ndef test_f():\n    assert f() is None\n"


def test_no_fence_whole_answer_is_code() -> None:
    found = extract(TESTS, "get_positive")
    assert found.source == TESTS and found.how == "no_fence"


def test_no_fence_with_prose_around() -> None:
    answer = f"Here is a test module for the function.\n\n{TESTS}\nThese tests check both branches.\n"
    found = extract(answer, "get_positive")
    assert found.source.strip() == TESTS.strip()
    assert found.how == "no_fence:trimmed"


def test_no_code_at_all() -> None:
    assert extract("I cannot write tests without the code.", "f").how == "none"
    assert extract("", "f").source == "" and extract(None, "f").how == "none"


def test_truncated_answer_keeps_complete_tests() -> None:
    answer = "```python\nfrom solution import f\n\ndef test_a():\n    assert f(1) == 1\n\ndef test_b():\n    assert f([1, 2"
    found = extract(answer, "f")
    assert "truncated_fence:trimmed" in found.notes
    assert found.source == "from solution import f\n\ndef test_a():\n    assert f(1) == 1\n"


def test_reasoning_is_not_code() -> None:
    answer = ("<think>maybe ```python\ndef test_wrong(): pass\n```</think>\n"
              "```python\nfrom solution import f\n\ndef test_right():\n    assert f()\n```")
    found = extract(answer, "f")
    assert "test_right" in found.source and "test_wrong" not in found.source
    assert strip_reasoning("<think>never closed, ran out of tokens") == ""


def test_answer_with_only_code_copy_has_no_tests() -> None:
    found = extract("```python\ndef f(x):\n    return x\n```", "f")
    assert "no_test_functions" in found.notes


# --------------------------------------------------------------------------- imports


def test_made_up_module_is_normalised_and_recorded() -> None:
    found = extract("```python\nfrom get_positive import get_positive\n\ndef test_a():\n    assert get_positive([]) == []\n```",
                    "get_positive")
    assert found.source.startswith("from solution import get_positive\n")
    assert "import:get_positive->solution" in found.notes and found.normalised


def test_relative_and_aliased_imports() -> None:
    src = "from .main import f as g, helper\n\ndef test_a():\n    assert g(helper()) == 1\n"
    out, notes = normalise_imports(src, "f", {"f", "helper"})
    assert out.startswith("from solution import f as g, helper\n") and notes == ["import:.main->solution"]


def test_import_module_used_by_attribute() -> None:
    src = "import my_module\n\ndef test_a():\n    assert my_module.f(1) == 2\n"
    out, notes = normalise_imports(src, "f", {"f"})
    assert out.startswith("import solution as my_module\n") and notes == ["import:my_module->solution"]


def test_ambiguous_imports_are_left_alone() -> None:
    # a name the code under test does not define: not unambiguous, collection will report it
    src = "from utils import f, make_data\n\ndef test_a():\n    assert f(make_data())\n"
    assert normalise_imports(src, "f", {"f"}) == (src, [])
    # an installed or stdlib module is never rewritten, even when it exports the same name
    src = "from statistics import median\nfrom solution import median as m\n\ndef test_a():\n    assert m([1]) == median([1])\n"
    assert normalise_imports(src, "median", {"median"}) == (src, [])
    # two unknown modules with star imports: which one is meant?
    src = "from a_mod import *\nfrom b_mod import *\n\ndef test_a():\n    assert f()\n"
    assert normalise_imports(src, "f", {"f"})[1] == []


def test_single_unknown_star_import_is_normalised() -> None:
    out, notes = normalise_imports("from main import *\n\ndef test_a():\n    assert f()\n", "f", {"f"})
    assert out.startswith("from solution import *\n") and notes == ["import:main->solution"]


def test_missing_import_is_added_after_docstring_and_future() -> None:
    src = '"""Tests."""\nfrom __future__ import annotations\nimport pytest\n\ndef test_a():\n    assert f(2) == 4\n'
    out, notes = normalise_imports(src, "f", {"f"})
    assert notes == ["import:added"]
    assert out.splitlines()[:4] == ['"""Tests."""', "from __future__ import annotations", "from solution import f",
                                    "import pytest"]


def test_local_copy_of_the_function_is_replaced_by_the_import() -> None:
    src = ("import pytest\n\n@some_decorator\ndef get_positive(l):\n    return [e for e in l if e < 0]\n\n"
           "def test_a():\n    assert get_positive([1]) == []\n")
    out, notes = normalise_imports(src, "get_positive", {"get_positive"})
    assert notes == ["removed_local_def:get_positive", "import:added"]
    assert "def get_positive" not in out and "@some_decorator" not in out
    assert "from solution import get_positive" in out and "def test_a" in out


def test_helpers_of_the_solution_count_as_its_names() -> None:
    code = "import math\n\ndef poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 0.0\n"
    assert defined_names(code) == {"poly", "find_zero"}
    found = extract("```python\nfrom find_zero import find_zero, poly\n\n"
                    "def test_root():\n    assert poly([1], find_zero([1])) == 0\n```",
                    "find_zero", defined_names(code))
    assert found.source.startswith("from solution import find_zero, poly\n")


def test_import_inside_a_test_function_is_normalised_in_place() -> None:
    src = "def test_a():\n    from mymodule import f\n    assert f() == 1\n"
    out, notes = normalise_imports(src, "f", {"f"})
    assert out == "def test_a():\n    from solution import f\n    assert f() == 1\n" and notes


def test_runner_calls_and_main_blocks_are_removed_and_recorded_so_the_file_is_not_tampered() -> None:
    from evalmislead_assets.sandbox.tamper_scan import scan

    body = ("import pytest\nfrom solution import get_positive\n\n"
            "def test_a():\n    assert get_positive([1]) == [1]\n\n"
            "pytest.main()\n\nif __name__ == \"__main__\":\n    pytest.main([__file__])\n")
    assert scan(body) is not None  # as the model wrote it, the scan flags pytest.main
    found = extract(f"```python\n{body}```", "get_positive", {"get_positive"})
    assert "pytest.main" not in found.source and "def test_a" in found.source
    assert "removed_runner_call" in found.notes and "removed_main_block" in found.notes
    assert scan(found.source) is None


def test_a_main_block_stays_when_the_module_assigns_its_name() -> None:
    body = ("from solution import get_positive\n__name__ = \"__main__\"\n"
            "def test_a():\n    assert get_positive([1]) == [1]\n"
            "if __name__ == \"__main__\":\n    print('x')\n")
    found = extract(f"```python\n{body}```", "get_positive", {"get_positive"})
    assert "removed_main_block" not in found.notes and "print('x')" in found.source
