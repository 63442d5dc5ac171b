"""Collection in the sandbox: ids as pytest names them, one per parametrize case and class method;
unimportable or uncollectable files count zero tests with a stored reason."""

import pytest

from evalmislead_assets.execution.collection import CollectRequest, collect_modules, is_one_version_error, merge
from evalmislead_assets.sandbox.host import Collected, Limits, Sandbox

BUGGY = "def get_positive(l):\n    return [e for e in l if e < 0]\n"
FIXED = "def get_positive(l):\n    return [e for e in l if e > 0]\n"

PARAMETRIZED = '''
import unittest
import pytest
from solution import get_positive

@pytest.mark.parametrize("xs,expected", [([1], [1]), ([-1], []), ([], [])])
def test_cases(xs, expected):
    assert get_positive(xs) == expected

@pytest.mark.parametrize("a", [1, 2])
@pytest.mark.parametrize("b", ["x", "y"])
def test_grid(a, b):
    pass

@pytest.mark.parametrize("v", [pytest.param(3, id="three"), 4])
def test_named(v):
    pass

class TestGetPositive:
    def test_one(self):
        assert get_positive([1]) == [1]

    @pytest.mark.parametrize("n", [5, 6])
    def test_param_method(self, n):
        assert get_positive([n]) == [n]

class TestCaseStyle(unittest.TestCase):
    def test_unittest_method(self):
        self.assertEqual(get_positive([2]), [2])

def helper_not_a_test():
    pass

class NotATestClass:
    def test_ignored(self):
        pass
'''

EXPECTED_IDS = [
    "test_cases[xs0-expected0]", "test_cases[xs1-expected1]", "test_cases[xs2-expected2]",
    "test_grid[x-1]", "test_grid[x-2]", "test_grid[y-1]", "test_grid[y-2]",
    "test_named[three]", "test_named[4]",
    "TestGetPositive::test_one", "TestGetPositive::test_param_method[5]", "TestGetPositive::test_param_method[6]",
    "TestCaseStyle::test_unittest_method",
]

BAD_FILES = {
    "missing_name": "from solution import get_positive, not_defined_anywhere\n\ndef test_a():\n    pass\n",
    "missing_module": "from nowhere_module import get_positive\n\ndef test_a():\n    pass\n",
    "syntax": "from solution import get_positive\n\ndef test_a(:\n    pass\n",
    "raises_at_import": "raise RuntimeError('boom at import')\n\ndef test_a():\n    pass\n",
    "bad_decorator": "import pytest\n\n@pytest.mark.parametrize('x', 5)\ndef test_a(x):\n    pass\n",
    "exits_at_import": "import sys\nsys.exit(0)\n\ndef test_a():\n    pass\n",
}


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    """Every case in one sandbox batch (zygote start-up is paid once)."""
    cases = {"parametrized": PARAMETRIZED, **BAD_FILES,
             "no_tests": "from solution import get_positive\n\ndef helper():\n    pass\n",
             "buggy_only": "from solution import get_positive\nassert get_positive([-1]) == [-1]\n\ndef test_a():\n    pass\n",
             "empty": ""}
    got = collect_modules([CollectRequest(src, BUGGY, FIXED) for src in cases.values()],
                          Sandbox(Limits(timeout_s=5.0), workers=2))
    return dict(zip(cases, got))


def test_parametrize_and_class_cases_counted_one_each(results) -> None:
    found = results["parametrized"]
    assert found.test_ids == EXPECTED_IDS
    assert found.n_tests == 13 and found.import_ok and found.error is None


@pytest.mark.parametrize("case,reason", [
    ("missing_name", "ImportError: cannot import name 'not_defined_anywhere' from 'solution'"),
    ("missing_module", "ModuleNotFoundError: No module named 'nowhere_module'"),
    ("syntax", "SyntaxError"),
    ("raises_at_import", "RuntimeError: boom at import"),
    ("bad_decorator", "TypeError"),
    ("exits_at_import", "SystemExit"),
])
def test_unimportable_file_has_zero_tests_and_a_reason(results, case: str, reason: str) -> None:
    found = results[case]
    assert found.test_ids == [] and found.n_tests == 0 and not found.import_ok
    assert reason in found.error


def test_syntax_error_reason_names_the_line(results) -> None:
    assert "(line 3)" in results["syntax"].error


def test_file_without_tests(results) -> None:
    found = results["no_tests"]
    assert found.test_ids == [] and found.import_ok and "no tests" in found.error


def test_file_collecting_against_one_version_only(results) -> None:
    """PROTOCOL.md: a file that cannot be collected counts zero tests, whichever version it fails on."""
    found = results["buggy_only"]
    assert found.test_ids == [] and found.n_tests == 0 and not found.import_ok
    assert found.error == "collected against the buggy version only; fixed: assert [] == [-1]"
    assert is_one_version_error(found.error)


def test_empty_source_is_not_run(results) -> None:
    assert results["empty"].test_ids == [] and results["empty"].error == "no code found in the answer"


def test_merge_keeps_ids_of_both_versions_fixed_first() -> None:
    merged = merge(Collected(["c", "a"], None, 0.0), Collected(["a", "b", "c"], None, 0.0))
    assert merged.test_ids == ["a", "c"] and merged.error is None and merged.one_version_ids == ["b"]
    both = merge(Collected([], "E1", 0.0), Collected([], "E2", 0.0))
    assert both.test_ids == [] and not both.import_ok and both.error == "buggy: E1; fixed: E2"
    same = merge(Collected([], "E", 0.0), Collected([], "E", 0.0))
    assert same.error == "E" and not is_one_version_error(same.error)


def test_merge_one_version_only_counts_zero_tests() -> None:
    fixed_only = merge(Collected([], "NameError: x", 0.0), Collected(["a", "b"], None, 0.0))
    assert fixed_only.test_ids == [] and not fixed_only.import_ok
    assert fixed_only.error == "collected against the fixed version only; buggy: NameError: x"
    assert is_one_version_error(fixed_only.error)
    assert not is_one_version_error(None) and not is_one_version_error("no code found in the answer")
