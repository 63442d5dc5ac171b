"""The JavaScript and Java chains as table rows: problems, problem_validation, generated_tests, test_outcomes.

The same tables (and columns) as Python's (store/schema.py), so one SQL query sets the languages side by side;
the ``language`` column is filled by the IO manager from the asset's key. Plain Python (no Dagster); the
assets are in ``assets/language_problems.py`` and ``assets/language_chain.py``.

What Python has and these chains do not (docs/languages.md): the verified-subset check (``verified`` stays
NULL: not checked), coverage and mutation (not estimable offline: no JaCoCo, c8 or PIT/Stryker here).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd

from evalmislead_assets.execution.batch import cap_tests
from evalmislead_assets.execution.cells import ScoredTest
from evalmislead_assets.execution.collection import ModuleTests
from evalmislead_assets.polyglot import oracle as polyglot_oracle
from evalmislead_assets.polyglot.extraction import extract_java, extract_js
from evalmislead_assets.polyglot.problems import DATA_SHA256, Problem, declared_name, load_problems
from evalmislead_assets.polyglot.scoring import collect_java, collect_js, js_modules, score_java, score_js
from evalmislead_assets.store.text_repair import text_column
from evalmislead_assets.store.values import is_missing

_PROBLEM_COLUMNS = ["task_id", "problem_idx", "entry_point", "declaration", "prompt", "canonical_solution",
                    "buggy_solution", "bug_type", "test", "buggy_code", "fixed_code", "source_sha256"]


def problem_rows(language: str) -> pd.DataFrame:
    """The shipped split of ``language`` (sha256-checked) as rows of the ``problems`` table."""
    problems = load_problems(language)
    return pd.DataFrame([{
        "task_id": p.task_id, "problem_idx": p.problem_idx, "entry_point": p.entry_point,
        "declaration": p.declaration, "prompt": p.prompt,
        "canonical_solution": p.fixed_code[len(p.declaration):], "buggy_solution": p.buggy_code[len(p.declaration):],
        "bug_type": p.bug_type, "test": p.test, "buggy_code": p.buggy_code, "fixed_code": p.fixed_code,
        "source_sha256": DATA_SHA256[language],
    } for p in problems], columns=_PROBLEM_COLUMNS)


def problems_from_rows(rows: pd.DataFrame, language: str) -> list[Problem]:
    """``problems`` table rows back to the domain's problems (what the oracle, prompts and runners take)."""
    return [Problem(language=language, task_id=r["task_id"], problem_idx=int(r["problem_idx"]),
                    entry_point=r["entry_point"], declaration=r["declaration"], prompt=r["prompt"],
                    buggy_code=r["buggy_code"], fixed_code=r["fixed_code"], test=r["test"], bug_type=r["bug_type"])
            for r in rows.to_dict("records")]


def validation_rows(problems: list[Problem]) -> pd.DataFrame:
    """The dataset's own test on both versions of each problem: rows of ``problem_validation``; the reason of
    each exclusion is in ``buggy_detail`` / ``fixed_detail`` (see ``exclusions``)."""
    results = polyglot_oracle.validate(problems)
    return pd.DataFrame([{
        "task_id": v.task_id, "problem_idx": v.problem_idx, "buggy_passed": v.buggy.passed,
        "fixed_passed": v.fixed.passed, "buggy_detail": v.buggy.detail, "fixed_detail": v.fixed.detail,
        "seconds": v.buggy.seconds + v.fixed.seconds, "valid": v.valid,
    } for v in results], columns=["task_id", "problem_idx", "buggy_passed", "fixed_passed", "buggy_detail",
                                  "fixed_detail", "seconds", "valid"])


def exclusions(validation: pd.DataFrame) -> dict[str, str]:
    """{task_id: why it is excluded} for every problem that is not a valid pair."""
    out = {}
    for r in validation[~validation["valid"].astype(bool)].to_dict("records"):
        parts = []
        if not r["fixed_passed"]:
            parts.append(f"fixed version fails the dataset's test: {r['fixed_detail']}")
        if r["buggy_passed"]:
            parts.append("buggy version passes the dataset's test")
        out[r["task_id"]] = "; ".join(parts)
    return out


def _solutions(problem: Problem) -> tuple[str, str]:
    """(buggy, fixed) code under test as the runner takes it: JS modules, Java ``Solution`` sources."""
    return js_modules(problem) if problem.language == "js" else (problem.buggy_code, problem.fixed_code)


def _collect(problem: Problem, source: str) -> ModuleTests:
    buggy, fixed = _solutions(problem)
    return (collect_js if problem.language == "js" else collect_java)(source, buggy, fixed)


def _score(problem: Problem, source: str, test_ids: list[str]) -> list[ScoredTest]:
    buggy, fixed = _solutions(problem)
    return (score_js if problem.language == "js" else score_java)(source, test_ids, buggy, fixed)


def _text(x: Any) -> str:
    return "" if is_missing(x) else str(x)


def generated_test_rows(generations: pd.DataFrame, problems: dict[str, Problem], max_tests: int,
                        workers: int = 2) -> pd.DataFrame:
    """One ``generated_tests`` row per answer: the extracted test file, how it was found, its test ids collected
    against both versions (a file that does not load or compile against either has zero tests)."""
    def one(g: dict[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = {
            "task_id": g["task_id"], "problem_idx": int(g["problem_idx"]), "source": None, "extraction": "none",
            "import_ok": False, "n_tests": 0, "test_ids": [], "error": None,
            "finish_reason": _text(g.get("finish_reason")) or None, "one_version_ids": [], "n_tests_over_cap": 0,
            "max_tests": max_tests, "verified": None, "unverified_reason": None,
        }
        problem = problems.get(g["task_id"])
        if _text(g.get("error")):
            row["error"] = f"generation failed: {g['error']}"
            return row
        if problem is None:
            row["error"] = f"problem {g['task_id']} is not in the problems table"
            return row
        text = _text(g.get("response_text"))
        found = extract_js(text, declared_name(problem)) if problem.language == "js" else extract_java(text)
        row["extraction"] = found.extraction
        if not found.source.strip():
            truncated = " (answer truncated at the token cap)" if row["finish_reason"] == "length" else ""
            row["error"] = "no code found in the answer" + truncated
            return row
        row["source"] = found.source
        tests = _collect(problem, found.source)
        kept, over = cap_tests(list(tests.test_ids), max_tests)
        row.update(import_ok=tests.import_ok, n_tests=len(kept), test_ids=kept, n_tests_over_cap=over,
                   error=tests.error, one_version_ids=list(tests.one_version_ids))
        return row

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(pool.map(one, generations.to_dict("records")))
    df = pd.DataFrame(rows, columns=["task_id", "problem_idx", "source", "extraction", "import_ok", "n_tests",
                                     "test_ids", "error", "finish_reason", "one_version_ids", "n_tests_over_cap",
                                     "max_tests", "verified", "unverified_reason"])
    for column in ("source", "error"):  # model-controlled text: may hold lone surrogates (store/text_repair.py)
        df[column] = text_column(list(df[column])).set_axis(df.index)
    df["problem_idx"] = df["problem_idx"].astype("Int32")
    df["n_tests"] = df["n_tests"].astype("int32")
    df["import_ok"] = df["import_ok"].astype(bool)
    df["verified"] = df["verified"].astype("boolean")  # NULL: the verified subset is Python's check
    return df


def outcome_rows(generated: pd.DataFrame, problems: dict[str, Problem]) -> pd.DataFrame:
    """One ``test_outcomes`` row per collected test id: its status against each version (own process each)
    and its cell, by Python's rules (execution/cells.py)."""
    rows = []
    for g in generated[generated["n_tests"] > 0].to_dict("records"):
        ids = [str(t) for t in (g["test_ids"] if g["test_ids"] is not None else [])]
        for s in _score(problems[g["task_id"]], g["source"], ids):
            rows.append({"task_id": g["task_id"], "problem_idx": int(g["problem_idx"]), "test_id": s.test_id,
                         "buggy_status": s.buggy_status, "fixed_status": s.fixed_status, "outcome": s.outcome,
                         "buggy_detail": s.buggy_detail, "fixed_detail": s.fixed_detail, "seconds": s.seconds})
    df = pd.DataFrame(rows, columns=["task_id", "problem_idx", "test_id", "buggy_status", "fixed_status", "outcome",
                                     "buggy_detail", "fixed_detail", "seconds"])
    for column in ("test_id", "buggy_detail", "fixed_detail"):
        df[column] = text_column(list(df[column])).set_axis(df.index)
    df["problem_idx"] = df["problem_idx"].astype("Int32")
    df["seconds"] = df["seconds"].astype(float)
    return df
