"""execution/batch.py: a partition's answers -> generated_tests rows -> test_outcomes rows.

The real sandbox runs in evalmislead_tests/assets/test_collected_not_scored.py and test_execution_assets.py;
here, answers that never reach it, the per-answer cap, the frames' columns and types, and (with the real
sandbox) lone surrogates in what a test's run produces.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import pytest

from evalmislead_assets.execution.batch import build_generated_tests, build_test_outcomes, cap_tests
from evalmislead_assets.sandbox.host import Collected, Module, Ran

PROBLEMS = pd.DataFrame({"task_id": ["Python/1"], "problem_idx": [1], "entry_point": ["f"],
                         "buggy_code": ["def f(x):\n    return x + 1\n"],
                         "fixed_code": ["def f(x):\n    return x\n"]}).set_index("task_id")


class NothingToRun:
    """A sandbox that records what it is asked to run: these answers must not reach it."""

    def __init__(self) -> None:
        self.asked: list[int] = []
        self.isolation = None

    def collect(self, modules: Sequence[Module]) -> list[Collected]:
        self.asked.append(len(modules))
        return []

    def run(self, requests: Sequence[tuple[Module, str]], coverage: bool = False) -> list[Ran]:
        self.asked.append(len(requests))
        return []


def _generations() -> pd.DataFrame:
    return pd.DataFrame([
        {"task_id": "Python/1", "problem_idx": 1, "response_text": None, "finish_reason": None,
         "error": "HTTP 500 from server"},
        {"task_id": "Python/404", "problem_idx": 404, "response_text": "```python\ndef test_a():\n    pass\n```",
         "finish_reason": "stop", "error": None},
        {"task_id": "Python/1", "problem_idx": 1, "response_text": "Let me think about", "finish_reason": "length",
         "error": None},
        {"task_id": "Python/1", "problem_idx": None, "response_text": "No tests today.", "finish_reason": "stop",
         "error": float("nan")},
    ])


def test_answers_without_code_get_a_reason_and_run_nothing() -> None:
    sandbox = NothingToRun()
    df = build_generated_tests(_generations(), PROBLEMS, sandbox, max_tests=5)  # type: ignore[arg-type]
    assert df["error"].tolist() == [
        "generation failed: HTTP 500 from server",
        "problem Python/404 is not in the problems table",
        "no code found in the answer (answer truncated at the token cap)",
        "no code found in the answer",
    ]
    assert df["source"].isna().all() and df["extraction"].tolist() == ["none", "none", "none", "none"]
    assert df["n_tests"].tolist() == [0, 0, 0, 0] and not df["import_ok"].any()
    assert df["finish_reason"].tolist() == ["", "stop", "length", "stop"]
    assert df["max_tests"].tolist() == [5] * 4 and df["n_tests_over_cap"].tolist() == [0] * 4
    assert df["problem_idx"].tolist()[:3] == [1, 404, 1] and pd.isna(df["problem_idx"].iloc[3])
    assert str(df["problem_idx"].dtype) == "Int32" and str(df["n_tests"].dtype) == "int32"
    assert sandbox.asked == [0]  # one (empty) collection batch, nothing scored

    outcomes = build_test_outcomes(df, PROBLEMS, sandbox)  # type: ignore[arg-type]
    assert outcomes.empty and outcomes.columns.tolist() == [
        "task_id", "problem_idx", "test_id", "buggy_status", "fixed_status", "outcome", "buggy_detail",
        "fixed_detail", "seconds"]
    assert str(outcomes["problem_idx"].dtype) == "Int32" and outcomes["seconds"].dtype == float
    assert sandbox.asked == [0, 0]


def test_generated_tests_columns_in_order() -> None:
    df = build_generated_tests(_generations().iloc[:0], PROBLEMS, NothingToRun(), max_tests=100)  # type: ignore[arg-type]
    assert df.empty and df.columns.tolist() == [
        "task_id", "problem_idx", "source", "extraction", "import_ok", "n_tests", "test_ids", "error",
        "finish_reason", "one_version_ids", "n_tests_over_cap", "max_tests", "verified", "unverified_reason"]


def test_cap_keeps_the_first_ids_in_file_order() -> None:
    assert cap_tests(["a", "b"], 5) == (["a", "b"], 0)
    assert cap_tests(["c", "a", "b"], 2) == (["c", "a"], 1)
    with pytest.raises(ValueError, match="EVALMISLEAD_MAX_TESTS_PER_ANSWER"):
        cap_tests(["a"], 0)


SURROGATE_ANSWERS = [  # the answer text as the model wrote it: escapes that make lone surrogates at run time
    "```python\nimport sys\nfrom solution import f\n\n"
    "def test_message():\n    assert f(1) == 1, 'half \\ud800 a pair'\n\n"
    "def test_output():\n    print('out \\ud800')\n    sys.stderr.write('err \\udfff')\n    assert f(1) == 2\n\n"
    "def test_raises():\n    raise ValueError('raised \\udc80')\n```",
    "```python\nfrom solution import f\nraise ValueError('at import \\ud800')\n\ndef test_x():\n    pass\n```",
    # a raw lone surrogate in the answer itself (an answer used before the warehouse escaped it)
    "```python\nfrom solution import f\n\ndef test_raw():\n    assert f(1) == 1, 'raw \ud800'\n```",
]


def test_lone_surrogates_in_messages_output_and_collection_errors_are_stored_escaped(tmp_path) -> None:
    """An answer whose run produces a lone surrogate does not stop the partition (pandas' Arrow strings refuse
    one: UnicodeEncodeError): its text stays as it came, the warehouse writes it escaped and records the
    repair, and the scores are plain pytest's (its print passes)."""
    from evalmislead_assets.sandbox.host import Limits, Sandbox
    from evalmislead_assets.store.database import Warehouse

    generations = pd.DataFrame({"task_id": ["Python/1"] * 3, "problem_idx": [1] * 3,
                                "response_text": pd.Series(SURROGATE_ANSWERS, dtype=object),
                                "finish_reason": ["stop"] * 3, "error": [None] * 3})
    box = Sandbox(Limits(timeout_s=20.0), workers=2)
    generated = build_generated_tests(generations, PROBLEMS, box, max_tests=10)
    assert generated["n_tests"].tolist() == [3, 0, 1]
    # writing to sys.stderr directly reaches a stream object (the verified subset allows print and capsys only)
    assert generated["verified"].tolist() == [False, True, True]
    assert "sys.stderr" in generated["unverified_reason"].iloc[0]
    assert generated["error"].tolist()[1] == "ValueError: at import \ud800"
    assert "raw \ud800" in generated["source"].iloc[2]
    outcomes = build_test_outcomes(generated, PROBLEMS, box)
    got = {t: (b, f) for t, b, f in zip(outcomes["test_id"], outcomes["buggy_status"], outcomes["fixed_status"])}
    assert got == {"test_message": ("failed", "passed"), "test_output": ("passed", "failed"),
                   "test_raises": ("failed", "failed"), "test_raw": ("failed", "passed")}
    details = dict(zip(outcomes["test_id"], outcomes["buggy_detail"]))
    assert details["test_message"].startswith("AssertionError: half \ud800 a pair")
    assert details["test_raises"] == "ValueError: raised \udc80"
    assert details["test_raw"].startswith("AssertionError: raw \ud800")

    wh = Warehouse(tmp_path / "study.duckdb")
    partition = {"condition": "buggy_code", "thinking": "off"}
    wh.replace_rows("generated_tests", generated.assign(**partition), partition)
    wh.replace_rows("test_outcomes", outcomes.assign(**partition), partition)
    stored = wh.read_table("generated_tests", order_by="task_id")
    assert "ValueError: at import \\ud800" in stored["error"].tolist()
    stored_details = wh.read_table("test_outcomes")["buggy_detail"].tolist()
    assert any(d.startswith("AssertionError: half \\ud800 a pair") for d in stored_details)
    repairs = wh.read_table("storage_repairs")
    assert sorted(zip(repairs["table_name"], repairs["column_name"], repairs["n_values"])) == [
        ("generated_tests", "error", 1), ("generated_tests", "source", 1),
        ("test_outcomes", "buggy_detail", 3), ("test_outcomes", "fixed_detail", 1)]


def test_a_file_outside_the_verified_subset_is_still_run_and_scored_with_its_reason(tmp_path) -> None:
    """The flag is the file's, set before it runs; an unverified file's tests are scored as any."""
    from evalmislead_assets.sandbox.host import Limits, Sandbox
    from evalmislead_assets.store.database import Warehouse

    answers = ["```python\nimport os\nfrom solution import f\n\ndef test_one():\n    assert f(1) == 1\n```",
               "```python\nfrom solution import f\n\ndef test_one():\n    assert f(1) == 1\n```",
               "No code."]
    generations = pd.DataFrame({"task_id": ["Python/1"] * 3, "problem_idx": [1] * 3, "response_text": answers,
                                "finish_reason": ["stop"] * 3, "error": [None] * 3})
    box = Sandbox(Limits(timeout_s=20.0), workers=2)
    generated = build_generated_tests(generations, PROBLEMS, box, max_tests=10)
    assert generated["verified"].tolist()[:2] == [False, True] and pd.isna(generated["verified"].iloc[2])
    assert generated["unverified_reason"].tolist()[:2] == ["imports os", None]
    outcomes = build_test_outcomes(generated, PROBLEMS, box)
    assert outcomes["outcome"].tolist() == ["effective", "effective"]
    wh = Warehouse(tmp_path / "study.duckdb")
    wh.replace_rows("generated_tests", generated.assign(condition="buggy_code", thinking="off"),
                    {"condition": "buggy_code", "thinking": "off"})
    assert wh.query_df("SELECT count(*) FILTER (WHERE verified), count(*) FILTER (WHERE NOT verified), "
                    "count(*) FILTER (WHERE verified IS NULL) FROM generated_tests").values.tolist() == [[1, 1, 1]]


class CollectsOneTest(NothingToRun):
    """A sandbox whose every module collects one test, ``test_one`` (the flag is set before anything runs)."""

    def collect(self, modules: Sequence[Module]) -> list[Collected]:
        self.asked.append(len(modules))
        return [Collected(["test_one"], None, 0.0) for _ in modules]


def test_the_verified_flag_sees_what_the_module_under_test_imports() -> None:
    """``from solution import *`` takes the problem's own imports: an ``import os`` there is the test file's."""
    problems = pd.DataFrame({"task_id": ["Python/1", "Python/2"], "problem_idx": [1, 2], "entry_point": ["f", "f"],
                             "buggy_code": ["import os\ndef f(x):\n    return x + 1\n",
                                            "import math\ndef f(x):\n    return x + 1\n"],
                             "fixed_code": ["def f(x):\n    return x\n", "def f(x):\n    return x\n"]}
                            ).set_index("task_id")
    answer = "```python\nfrom solution import *\n\ndef test_one():\n    assert f(1) == 1\n```"
    generations = pd.DataFrame({"task_id": ["Python/1", "Python/2"], "problem_idx": [1, 2],
                                "response_text": [answer, answer], "finish_reason": ["stop"] * 2, "error": [None] * 2})
    generated = build_generated_tests(generations, problems, CollectsOneTest(), max_tests=5)  # type: ignore[arg-type]
    assert generated["verified"].tolist() == [False, True]
    assert generated["unverified_reason"].tolist() == ["takes os from solution, which imports os", None]
