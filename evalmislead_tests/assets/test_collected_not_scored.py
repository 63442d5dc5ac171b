"""Collected test ids that are not scored: ids collected on one version only and tests
past the per-answer cap, from extraction through the real sandbox to the report section."""

from __future__ import annotations

import pandas as pd
import pytest

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.execution.batch import build_generated_tests, build_test_outcomes
from evalmislead_assets.report.section_list import sections
from evalmislead_assets.report.sections import collected_not_scored as collection_report
from evalmislead_assets.sandbox.host import Sandbox
from evalmislead_assets.store.database import Warehouse

BUGGY = "def f(x):\n    return x + 1\n"
FIXED = "def f(x):\n    return x\n"

# the parametrize value is computed from the function under test: test_value_is_positive[2] on the buggy
# version, test_value_is_positive[1] on the fixed one; only test_zero is collected against both
COMPUTED_PARAM = '''```python
import pytest
from solution import f


@pytest.mark.parametrize("value", [f(1)])
def test_value_is_positive(value):
    assert value >= 1


def test_zero():
    assert f(0) == 0
```'''
ALL_COMPUTED = '''```python
import pytest
from solution import f


@pytest.mark.parametrize("value", [f(5)])
def test_only(value):
    assert value >= 5
```'''
MANY = "```python\nfrom solution import f\n\n" + "".join(
    f"\ndef test_{i}():\n    assert f({i}) == {i}\n" for i in range(5)) + "```"
CAP = 3


@pytest.fixture(scope="module")
def stored() -> tuple[pd.DataFrame, pd.DataFrame]:
    problems = pd.DataFrame({"task_id": ["Python/900"], "problem_idx": [900], "entry_point": ["f"],
                             "buggy_code": [BUGGY], "fixed_code": [FIXED]}).set_index("task_id")
    gens = pd.DataFrame({"task_id": ["Python/900"] * 3, "problem_idx": [900] * 3,
                         "response_text": [COMPUTED_PARAM, ALL_COMPUTED, MANY], "finish_reason": "stop", "error": None})
    sandbox = Sandbox(workers=2)
    generated = build_generated_tests(gens, problems, sandbox, max_tests=CAP)
    return generated, build_test_outcomes(generated, problems, sandbox)


def _one_version_ids() -> list[str]:
    """The ids only one version collects, computed from the function under test as pytest names them."""
    buggy, fixed = {}, {}
    exec(BUGGY, buggy)  # our own two-line function
    exec(FIXED, fixed)
    return [f"test_value_is_positive[{fixed['f'](1)}]", f"test_value_is_positive[{buggy['f'](1)}]"]


@pytest.mark.parametrize("one_version_id", _one_version_ids())
def test_an_id_collected_on_one_version_only_is_not_scored(stored, one_version_id: str) -> None:
    generated, outcomes = stored
    row = generated.iloc[0]
    assert list(row.test_ids) == ["test_zero"] and row.n_tests == 1 and row.import_ok
    assert one_version_id in list(row.one_version_ids)
    assert one_version_id not in set(outcomes["test_id"])
    # what is scored is what both versions hold: no cell drawn from a collection difference
    assert outcomes.set_index("test_id")["outcome"].to_dict()["test_zero"] == "effective"
    assert "misleading" not in set(outcomes.loc[outcomes["test_id"].str.startswith("test_value"), "outcome"])


def test_a_file_whose_ids_all_differ_has_zero_tests(stored) -> None:
    row = stored[0].iloc[1]
    assert row.n_tests == 0 and list(row.test_ids) == [] and list(row.one_version_ids) == ["test_only[5]",
                                                                                          "test_only[6]"]
    assert row.error == "no test id collected against both versions (2 against one version only)"


def test_tests_past_the_per_answer_cap_are_not_run(stored) -> None:
    generated, outcomes = stored
    row = generated.iloc[2]
    assert list(row.test_ids) == ["test_0", "test_1", "test_2"] and (row.n_tests, row.n_tests_over_cap) == (3, 2)
    assert row.max_tests == CAP and len(outcomes) == 1 + 3  # test_zero, then the capped file's three tests


def test_report_section_counts_both(stored, tmp_path) -> None:
    generated = stored[0].assign(condition="buggy_code", thinking="off")
    section = next(s for s in sections() if s.title == collection_report.TITLE)
    text = "\n".join(section.render({"generated_tests": generated}))
    table = collection_report.counts(generated).iloc[0].to_dict()
    assert table == {"condition": "buggy_code", "thinking": "off", "files_with_one_version_ids": 2,
                     "one_version_ids": 4, "files_over_cap": 1, "tests_over_cap": 2}
    line = next(ln for ln in text.splitlines() if ln.startswith("| buggy_code"))
    assert [c.strip() for c in line.strip("|").split("|")] == ["buggy_code", "off", "2", "4", "1", "2"]
    assert "Python/900 (+2)" in text and f"cap of {CAP} tests" in text
    wh = Warehouse(tmp_path / "g.duckdb")  # the printed SQL gives the same counts from the stored rows
    wh.replace_rows("generated_tests", generated)
    assert wh.query_df(collection_report.SQL).iloc[0].to_dict() == table
    empty = "\n".join(section.render({"generated_tests": pd.DataFrame()}))
    assert "No generated tests are stored yet" in empty


def test_caps_come_from_settings(monkeypatch) -> None:
    monkeypatch.delenv("EVALMISLEAD_MAX_TESTS_PER_ANSWER", raising=False)
    monkeypatch.delenv("EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE", raising=False)
    assert settings.max_tests_per_answer() == 100 and settings.max_mutation_runs_per_file() == 1000
    monkeypatch.setenv("EVALMISLEAD_MAX_TESTS_PER_ANSWER", "40")
    monkeypatch.setenv("EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE", "300")
    assert settings.max_tests_per_answer() == 40 and settings.max_mutation_runs_per_file() == 300
    monkeypatch.setenv("EVALMISLEAD_MAX_TESTS_PER_ANSWER", "lots")
    with pytest.raises(ConfigError, match="EVALMISLEAD_MAX_TESTS_PER_ANSWER='lots' is not an integer"):
        settings.max_tests_per_answer()
    monkeypatch.setenv("EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE", "0")
    with pytest.raises(ConfigError, match="at least 1"):
        settings.max_mutation_runs_per_file()
