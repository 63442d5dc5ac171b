"""A partition's answers -> test files -> outcome rows: the generated_tests and test_outcomes tables.

Each step is one sandbox batch over every answer it is given (extraction and collection, then each
collected test against both versions), so the execution assets and the determinism probe score the
same way. Plain Python (no Dagster); the assets are in ``assets/execution.py``.

Text that comes from a model's answer or from running it (the source, a collection error, a test's
failure message) may hold a lone surrogate (``assert x, "\ud800"``): those columns stay plain Python
strings (``text_column``), which the warehouse escapes and records in ``storage_repairs`` on write;
pandas' Arrow string dtype would refuse them outright and stop the partition.
"""

from __future__ import annotations

from typing import Any, Optional

import pandas as pd

from evalmislead_assets.execution.cells import score_many
from evalmislead_assets.execution.collection import CollectRequest, collect_modules, stored_test_ids
from evalmislead_assets.execution.extraction import defined_names, extract
from evalmislead_assets.sandbox import verified_subset
from evalmislead_assets.sandbox.host import Sandbox
from evalmislead_assets.store.text_repair import text_column
from evalmislead_assets.store.values import is_missing

_GENERATED_TESTS_COLUMNS = [
    "task_id", "problem_idx", "source", "extraction", "import_ok", "n_tests", "test_ids", "error", "finish_reason",
    "one_version_ids", "n_tests_over_cap", "max_tests", "verified", "unverified_reason",
]
_TEST_OUTCOMES_COLUMNS = [
    "task_id", "problem_idx", "test_id", "buggy_status", "fixed_status", "outcome", "buggy_detail", "fixed_detail",
    "seconds",
]
# columns whose text comes from the answer or from running it (model-controlled; may hold lone surrogates)
_ANSWER_TEXT = frozenset({"source", "error", "test_id", "buggy_detail", "fixed_detail", "unverified_reason"})


def build_generated_tests(generations: pd.DataFrame, problems: pd.DataFrame, sandbox: Sandbox,
                          max_tests: int) -> pd.DataFrame:
    """One row per generation: the extracted module, how it was found, and its collected test ids.

    ``generations`` has task_id, problem_idx, response_text, finish_reason, error; ``problems``
    is indexed by task_id with entry_point, buggy_code, fixed_code. Only ids collected against
    both versions are tests (the others go to ``one_version_ids``); of those, the first
    ``max_tests`` in file order are scored and the rest counted in ``n_tests_over_cap``.
    """
    rows: list[dict[str, Any]] = []
    requests: list[CollectRequest] = []
    for g in generations.itertuples(index=False):
        row: dict[str, Any] = {
            "task_id": g.task_id, "problem_idx": _int(g.problem_idx), "source": None, "extraction": "none",
            "import_ok": False, "n_tests": 0, "test_ids": [], "error": None, "finish_reason": _str(g.finish_reason),
            "one_version_ids": [], "n_tests_over_cap": 0, "max_tests": max_tests, "verified": None,
            "unverified_reason": None,
        }
        truncated = " (answer truncated at the token cap)" if row["finish_reason"] == "length" else ""
        problem = problems.loc[g.task_id] if g.task_id in problems.index else None
        if _str(g.error):
            row["error"] = f"generation failed: {g.error}"
        elif problem is None:
            row["error"] = f"problem {g.task_id} is not in the problems table"
        else:
            names = defined_names(problem.buggy_code) | defined_names(problem.fixed_code)
            found = extract(_str(g.response_text), problem.entry_point, names)
            row["extraction"] = found.extraction
            if found.source.strip():
                row["source"] = found.source
                row["verified"], row["unverified_reason"] = verified_subset.check(
                    found.source, (problem.buggy_code, problem.fixed_code))
            else:
                row["error"] = "no code found in the answer" + truncated
        rows.append(row)
        requests.append(CollectRequest(row["source"] or "", problem.buggy_code if problem is not None else "",
                                       problem.fixed_code if problem is not None else ""))
    collected = collect_modules(requests, sandbox)
    for row, module in zip(rows, collected):
        if row["source"] is None:
            continue
        kept, over = cap_tests(list(module.test_ids), max_tests)
        row["import_ok"], row["n_tests"], row["test_ids"] = module.import_ok, len(kept), kept
        row["n_tests_over_cap"] = over
        row["error"], row["one_version_ids"] = module.error, list(module.one_version_ids)
    df = _frame(rows, _GENERATED_TESTS_COLUMNS)
    df["problem_idx"] = df["problem_idx"].astype("Int32")
    df["n_tests"] = df["n_tests"].astype("int32")
    df["n_tests_over_cap"] = df["n_tests_over_cap"].astype("int32")
    df["max_tests"] = df["max_tests"].astype("int32")
    df["import_ok"] = df["import_ok"].astype(bool)
    df["verified"] = df["verified"].astype("boolean")  # NULL: no code to check
    return df


def cap_tests(test_ids: list[str], max_tests: int) -> tuple[list[str], int]:
    """(the first ``max_tests`` ids in file order, how many were cut): the study's work cap per answer."""
    if max_tests < 1:
        raise ValueError(f"max_tests={max_tests}: set EVALMISLEAD_MAX_TESTS_PER_ANSWER to at least 1")
    return test_ids[:max_tests], max(0, len(test_ids) - max_tests)


def build_test_outcomes(generated: pd.DataFrame, problems: pd.DataFrame, sandbox: Sandbox) -> pd.DataFrame:
    """One row per collected test id: status against each version and its cell."""
    generated = generated[generated["n_tests"] > 0]
    jobs, keys = [], []
    for g in generated.itertuples(index=False):
        problem = problems.loc[g.task_id]
        jobs.append((g.source, stored_test_ids(g.test_ids), problem.buggy_code, problem.fixed_code))
        keys.append((g.task_id, _int(g.problem_idx)))
    scored = score_many(jobs, sandbox)
    rows = [
        {"task_id": task_id, "problem_idx": idx, "test_id": s.test_id, "buggy_status": s.buggy_status,
         "fixed_status": s.fixed_status, "outcome": s.outcome, "buggy_detail": s.buggy_detail,
         "fixed_detail": s.fixed_detail, "seconds": s.seconds}
        for (task_id, idx), tests in zip(keys, scored) for s in tests
    ]
    df = _frame(rows, _TEST_OUTCOMES_COLUMNS)
    df["problem_idx"] = df["problem_idx"].astype("Int32")
    df["seconds"] = df["seconds"].astype(float)
    return df


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    """``rows`` as a frame of ``columns``; the answer's text columns as plain Python strings (see the module doc)."""
    df = pd.DataFrame(rows, columns=[c for c in columns if c not in _ANSWER_TEXT])
    for column in columns:
        if column in _ANSWER_TEXT:
            df[column] = text_column([row[column] for row in rows]).set_axis(df.index)
    return df[columns]


def _int(x: Any) -> Optional[int]:
    return None if is_missing(x) else int(x)


def _str(x: Any) -> str:
    return "" if is_missing(x) else str(x)
