"""generated_tests and test_outcomes through Dagster on a seeded DuckDB file, with their asset checks."""

import os

import pandas as pd
import pytest
from dagster import DagsterInstance, build_asset_check_context, materialize

from evalmislead_assets.assets import execution
from evalmislead_assets.partitions import partition_key
from evalmislead_assets.resources import StudySettingsResource, WarehouseIOManager, WarehouseResource
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.execution.test_scoring import WORKED_EXAMPLE as WORKED_TESTS
from evalmislead_tests.stored import with_stored

CHECKS = [execution.every_test_in_one_cell, execution.outcomes_for_every_answer, execution.truncation_counts_consistent]

# The worked example's seven tests, answered the way that broke the published study's first
# extractor: a python fence nested inside a markdown fence, with prose around it.
WORKED_EXAMPLE = (
    "Here are the tests.\n\n```markdown\n## Tests\n\n```python\nimport pytest"
    + WORKED_TESTS
    + "```\n```\n"
)

PARAMETRIZED = '''```python
import pytest
from my_solution_module import below_zero


@pytest.mark.parametrize("ops,expected", [([], False), ([1, -2], True), ([1, 2, -3], True)])
def test_cases(ops, expected):
    assert below_zero(ops) is expected


class TestBelowZero:
    def test_stays_positive(self):
        assert below_zero([1, 2]) is False
```'''

UNIMPORTABLE = '''```python
from solution import has_close_elements, helper_that_does_not_exist

def test_x():
    assert has_close_elements([1.0, 2.0], 0.5) is False
```'''


def _generations(rows: list[dict], condition: str = "buggy_code", thinking: str = "off") -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df["condition"], df["thinking"] = condition, thinking
    for col in ("error", "finish_reason"):
        if col not in df:
            df[col] = None
    return df


def _seed(wh: Warehouse, condition: str = "buggy_code", thinking: str = "off") -> None:
    rows = [
        {"task_id": "Python/30", "problem_idx": 30, "response_text": WORKED_EXAMPLE, "finish_reason": "stop"},
        {"task_id": "Python/3", "problem_idx": 3, "response_text": PARAMETRIZED, "finish_reason": "stop"},
        {"task_id": "Python/0", "problem_idx": 0, "response_text": UNIMPORTABLE, "finish_reason": "stop"},
        {"task_id": "Python/1", "problem_idx": 1, "response_text": "Let me think about", "finish_reason": "length"},
        {"task_id": "Python/2", "problem_idx": 2, "response_text": None, "finish_reason": None,
         "error": "HTTP 500 from server"},
    ]
    wh.replace_rows("test_generations", _generations(rows, condition, thinking),
                    where={"condition": condition, "thinking": thinking})


def _materialize(key, selection=None, raise_on_error: bool = True, run_config: dict | None = None):
    return materialize(
        with_stored([execution.generated_tests, execution.test_outcomes, *CHECKS]),
        selection=selection, partition_key=key, run_config=run_config,
        resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                   "study_settings": StudySettingsResource()},
        instance=DagsterInstance.ephemeral(), raise_on_error=raise_on_error,
    )


def _checks(result) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


@pytest.mark.slow
def test_partition_extracts_collects_runs_and_checks_pass(seeded_warehouse: Warehouse, monkeypatch) -> None:
    wh = seeded_warehouse
    _seed(wh)
    monkeypatch.setenv("EVALMISLEAD_MAX_TESTS_PER_ANSWER", "7")  # exactly the worked example's 7 tests
    # the launchpad settings of each asset (assets/sandbox_config.py: ExecutionConfig)
    sandbox_config = {"config": {"workers": 2, "timeout_s": 10.0}}
    result = _materialize(partition_key("buggy_code", "off"),
                          run_config={"ops": {"generated_tests": sandbox_config, "test_outcomes": sandbox_config}})
    assert result.success

    gt = wh.read_table("generated_tests", order_by="problem_idx").set_index("task_id")
    assert len(gt) == 5 and set(gt["condition"]) == {"buggy_code"} and set(gt["thinking"]) == {"off"}
    assert gt.loc["Python/30", "n_tests"] == 7 and gt.loc["Python/30", "extraction"] == "fence:markdown>python"
    assert (gt.loc["Python/30", "n_tests_over_cap"], gt.loc["Python/30", "max_tests"]) == (0, 7)  # the setting
    assert gt.loc["Python/3", "n_tests_over_cap"] == 0 and list(gt.loc["Python/3", "one_version_ids"]) == []
    assert gt.loc["Python/3", "n_tests"] == 4
    assert list(gt.loc["Python/3", "test_ids"]) == [
        "test_cases[ops0-False]", "test_cases[ops1-True]", "test_cases[ops2-True]", "TestBelowZero::test_stays_positive"]
    assert "import:my_solution_module->solution" in gt.loc["Python/3", "extraction"]
    assert gt.loc["Python/0", "n_tests"] == 0 and not gt.loc["Python/0", "import_ok"]
    assert "ImportError" in gt.loc["Python/0", "error"] and "helper_that_does_not_exist" in gt.loc["Python/0", "error"]
    assert gt.loc["Python/1", "n_tests"] == 0 and "truncated" in gt.loc["Python/1", "error"]
    assert gt.loc["Python/1", "finish_reason"] == "length"
    assert gt.loc["Python/2", "n_tests"] == 0 and "HTTP 500" in gt.loc["Python/2", "error"]

    out = wh.read_table("test_outcomes")
    assert len(out) == 11 and set(out["condition"]) == {"buggy_code"}
    example = out[out["task_id"] == "Python/30"]
    assert example["outcome"].value_counts().to_dict() == {"misleading": 6, "both_pass": 1}
    assert example.loc[example["outcome"] == "both_pass", "test_id"].tolist() == ["test_empty_list"]
    # below_zero's bug tests `balance == 0` instead of `< 0`
    p3 = out[out["task_id"] == "Python/3"].set_index("test_id")["outcome"].to_dict()
    assert p3 == {"test_cases[ops0-False]": "both_pass", "test_cases[ops1-True]": "effective",
                  "test_cases[ops2-True]": "misleading", "TestBelowZero::test_stays_positive": "both_pass"}
    assert all(_checks(result).values()) and len(_checks(result)) == 3

    meta = {k: v.value for k, v in result.asset_materializations_for_node("test_outcomes")[0].metadata.items()}
    assert meta["tests"] == 11 and meta["misleading"] == 7
    header, _, *rows = meta["statuses"].splitlines()  # a Markdown table (report.formatting.md_table)
    assert [c.strip() for c in header.strip("|").split("|")] == ["version:status", "tests"]
    statuses = {k.strip(): int(v) for k, v in (r.strip("|").split("|") for r in rows)}
    assert statuses["buggy:passed"] == int((out["buggy_status"] == "passed").sum())
    assert sum(v for k, v in statuses.items() if k.startswith("fixed:")) == 11
    # root: full OS isolation; without root the sandbox runs degraded (limits only) and the metadata says so,
    # while every status above is the same (test_sandbox skips only the corpus that asserts the isolation)
    assert meta["sandbox"].startswith("full" if os.geteuid() == 0 else "without")

    # a re-materialization replaces exactly this partition's rows and leaves the others alone
    other = out.head(3).assign(condition="fixed_code")
    wh.append_rows("test_outcomes", other)
    again = _materialize(partition_key("buggy_code", "off"), selection=[execution.test_outcomes])
    assert again.success
    assert len(wh.read_table("test_outcomes", where={"condition": "buggy_code"})) == 11
    assert len(wh.read_table("test_outcomes", where={"condition": "fixed_code"})) == 3


@pytest.mark.slow
def test_checks_fail_on_missing_or_wrong_rows(seeded_warehouse: Warehouse) -> None:
    """The checks read only the tables, so seeded rows (no sandbox run) exercise them."""
    wh = seeded_warehouse
    key = {"condition": "buggy_code", "thinking": "off"}
    _seed(wh)
    gt = pd.DataFrame([
        {"task_id": t, "problem_idx": i, "source": "x", "extraction": "fence:python", "import_ok": True,
         "n_tests": n, "test_ids": [f"test_{k}" for k in range(n)], "error": None, "finish_reason": f}
        for t, i, n, f in [("Python/30", 30, 2, "stop"), ("Python/3", 3, 1, "stop"), ("Python/0", 0, 0, "stop"),
                           ("Python/1", 1, 0, "length"), ("Python/2", 2, 0, None)]
    ]).assign(**key)
    wh.replace_rows("generated_tests", gt, where=key)
    good = pd.DataFrame([
        {"task_id": "Python/30", "problem_idx": 30, "test_id": "test_0", "buggy_status": "passed",
         "fixed_status": "failed", "outcome": "misleading", "seconds": 0.1},
        {"task_id": "Python/30", "problem_idx": 30, "test_id": "test_1", "buggy_status": "passed",
         "fixed_status": "passed", "outcome": "both_pass", "seconds": 0.1},
        {"task_id": "Python/3", "problem_idx": 3, "test_id": "test_0", "buggy_status": "timeout",
         "fixed_status": "passed", "outcome": "effective", "seconds": 0.1},
    ]).assign(**key)
    wh.replace_rows("test_outcomes", good, where=key)
    assert _direct_checks() == {"every_test_in_one_cell": True, "outcomes_for_every_answer": True,
                        "truncation_counts_consistent": True}

    wrong = good.copy()
    wrong.loc[0, "outcome"] = "effective"  # passed/failed is misleading
    wh.replace_rows("test_outcomes", wrong, where=key)
    assert _direct_checks()["every_test_in_one_cell"] is False

    wh.replace_rows("test_outcomes", good.iloc[:2], where=key)  # Python/3 lost its rows
    assert _direct_checks()["outcomes_for_every_answer"] is False

    wh.replace_rows("test_outcomes", good.iloc[:0], where=key)  # answers with tests, no outcome rows at all
    assert _direct_checks()["outcomes_for_every_answer"] is False

    wh.replace_rows("test_outcomes", pd.concat([good, good.iloc[:1]]), where=key)  # a test in two rows
    assert _direct_checks()["every_test_in_one_cell"] is False

    wh.replace_rows("test_outcomes", good, where=key)
    wh.execute("UPDATE generated_tests SET finish_reason = 'stop' WHERE task_id = 'Python/1'")
    assert _direct_checks() == {"every_test_in_one_cell": True, "outcomes_for_every_answer": True,
                        "truncation_counts_consistent": False}


def _direct_checks() -> dict[str, bool]:
    """Each check invoked directly, unpartitioned: it then looks at every partition."""
    ctx = build_asset_check_context(resources={"warehouse": WarehouseResource()})
    return {next(iter(c.check_specs)).name: c(ctx).passed for c in CHECKS}
