"""Repetition loops as data: tests that copy an earlier test of the same answer, and answers cut at the cap
while repeating.

At temperature 0 a small model often falls into a loop, writing one test again and again until the output
cap cuts it. Every copy is scored, so one looping answer can hold most of a condition's misleading tests and
carry the pooled rate. These tables make that visible beside the preregistered pooled rates, which stay as
they are (report-only, prompts/analysis_plan_changes.md, amendment of 2026-12-07):

- ``test_repeats``: per scored test, the sha256 of its body (the test function's statements, whitespace
  normalised, its name left out) and ``duplicate_of``, the first earlier test of the same answer with the same
  body, the same decorators and the same parameters (a parametrized test's instances are not copies of each
  other).
- ``answer_repeats``: per answer, its tests, copies, whether its end repeats (``tail_repeating``, digits
  masked so that a loop that counts up, ``test_fib_31``, ``test_fib_32``, ... repeats too: of its last
  ``TAIL_LINES`` non-empty lines at most half are distinct, or its last ``TAIL_CHARS`` characters compress to
  at most ``TAIL_RATIO`` of their size) and ``loop``: cut at the cap (finish_reason = length) while repeating
  (a copy, or a repeating tail).
- ``repetition_rates``: per condition x thinking, the pooled rates, the same rates with copies counted once,
  the share of the cell's misleading and effective tests from its top problem, and how many of them come from
  loop answers.

Pure functions over DataFrames (no DuckDB file, no Dagster).
"""

from __future__ import annotations

import ast
import hashlib
import re
import zlib
from typing import Any

import pandas as pd

from evalmislead_assets.analysis import plan as analysis_plan
from evalmislead_assets.analysis.plan import KEY, Plan, cells_present
from evalmislead_assets.store.values import is_missing

TAIL_LINES = 30
MIN_TAIL_LINES = 10  # fewer non-empty lines: too short to call a loop
# the compression rule: on the recorded 1.5B run, no answer that stopped on its own (longer than 2,000 characters)
# compresses below 0.14; the loops cut at the cap do to 0.01-0.12
TAIL_CHARS = 2000
MIN_TAIL_CHARS = 1000
TAIL_RATIO = 0.12


def _norm(text: str) -> str:
    return " ".join(text.split())


def function_keys(source: object) -> dict[str, tuple[str, str]]:
    """Per test function of a module (``name``, or ``Class::name`` for a method): (normalised decorators,
    normalised body). A name defined twice keeps its last definition, the one pytest collects."""
    if not isinstance(source, str):
        return {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    out: dict[str, tuple[str, str]] = {}

    def add(node: ast.AST, prefix: str) -> None:
        for child in getattr(node, "body", []):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = "\n".join(ast.get_source_segment(source, s) or "" for s in child.body)
                decorators = "\n".join(ast.get_source_segment(source, d) or "" for d in child.decorator_list)
                out[prefix + child.name] = (_norm(decorators), _norm(body))
            elif isinstance(child, ast.ClassDef):
                add(child, prefix + child.name + "::")

    add(tree, "")
    return out


def _test_name(test_id: str) -> tuple[str, str]:
    """(qualified function name, parameter suffix) of a pytest node id: ``f.py::TestX::test_y[1-2]``."""
    parts = str(test_id).split("::")[1:] or [str(test_id)]
    m = re.match(r"^(.*?)(\[.*\])?$", parts[-1])
    name, params = (m.group(1), m.group(2) or "") if m else (parts[-1], "")
    return "::".join([*parts[:-1], name]), params


def tail_repeating(text: object, lines: int = TAIL_LINES) -> bool:
    """The answer's end repeats (digits masked): of its last ``lines`` non-empty lines at most half are distinct,
    or its last ``TAIL_CHARS`` characters compress to at most ``TAIL_RATIO`` of their size (a loop inside one
    long line, or lines that grow by one element each)."""
    if not isinstance(text, str):
        return False
    masked = re.sub(r"\d+", "0", text)
    tail = [ln.strip() for ln in masked.splitlines() if ln.strip()][-lines:]
    if len(tail) >= MIN_TAIL_LINES and len(set(tail)) * 2 <= len(tail):
        return True
    chars = masked[-TAIL_CHARS:].encode()
    return len(chars) >= MIN_TAIL_CHARS and len(zlib.compress(chars, 9)) <= TAIL_RATIO * len(chars)


def per_test_repeats(outcomes: pd.DataFrame, generated: pd.DataFrame) -> pd.DataFrame:
    """One row per scored test (test_outcomes), in each answer's file order, with body_sha256 and duplicate_of."""
    cols = analysis_plan.columns("test_repeats")
    o = analysis_plan.frame(outcomes, KEY + ["problem_idx", "test_id", "outcome"])
    if len(o) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    g = analysis_plan.frame(generated, KEY + ["source", "test_ids"])
    sources = {tuple(k): (s, ids) for k, s, ids in zip(g[KEY].to_numpy().tolist(), g["source"],
                                                       g["test_ids"] if "test_ids" in g.columns else [None] * len(g))}
    rows = []
    for key, part in o.groupby(KEY, sort=True):
        source, ids = sources.get(tuple(key), (None, None))
        order = {t: i for i, t in enumerate(list(ids))} if ids is not None and not is_missing(ids) else {}
        part = part.assign(_pos=[order.get(t, len(order) + i) for i, t in enumerate(part["test_id"])])
        funcs = function_keys(source)
        first: dict[tuple[str, str, str], str] = {}
        for _, t in part.sort_values("_pos", kind="stable").iterrows():
            name, params = _test_name(t["test_id"])
            found = funcs.get(name)
            sha, dup = None, None
            if found is not None:
                sha = hashlib.sha256(found[1].encode()).hexdigest()
                k = (found[0], found[1], params)
                dup = first.setdefault(k, t["test_id"])
                dup = None if dup == t["test_id"] else dup
            rows.append({"condition": key[0], "thinking": key[1], "task_id": key[2],
                         "problem_idx": t.get("problem_idx"), "test_id": t["test_id"], "outcome": t["outcome"],
                         "body_sha256": sha, "duplicate_of": dup})
    return pd.DataFrame(rows, columns=cols)


def per_answer_repeats(repeats: pd.DataFrame, generations: pd.DataFrame) -> pd.DataFrame:
    """One row per answer (test_generations): its tests, copies, repeating tail, loop; answers without scored
    tests included (0 tests)."""
    cols = analysis_plan.columns("answer_repeats")
    gens = analysis_plan.frame(generations, KEY + ["problem_idx", "finish_reason", "response_text"])
    if len(gens) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    r = repeats if len(repeats) else pd.DataFrame(columns=KEY + ["duplicate_of", "outcome"])
    per = {}
    for key, part in r.groupby(KEY, sort=False):
        per[tuple(key)] = (len(part), int(part["duplicate_of"].notna().sum()),
                           int((part["outcome"] == "misleading").sum()), int((part["outcome"] == "effective").sum()))
    rows = []
    for _, a in gens.drop_duplicates(KEY).iterrows():
        n, dups, mis, eff = per.get((a["condition"], a["thinking"], a["task_id"]), (0, 0, 0, 0))
        finish = None if is_missing(a["finish_reason"]) else str(a["finish_reason"])
        tail = tail_repeating(a.get("response_text"))
        rows.append({"condition": a["condition"], "thinking": a["thinking"], "task_id": a["task_id"],
                     "problem_idx": a.get("problem_idx"), "n_tests": n, "n_distinct": n - dups,
                     "n_duplicates": dups, "finish_reason": finish, "tail_repeating": tail,
                     "loop": finish == "length" and (dups > 0 or tail), "n_misleading": mis, "n_effective": eff})
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(KEY, kind="stable").reset_index(drop=True)


def _top(part: pd.DataFrame, cell: str) -> tuple[Any, int, float]:
    hits = part[part["outcome"] == cell]
    if hits.empty:
        return None, 0, float("nan")
    counts = hits.groupby("task_id").size().sort_values(ascending=False, kind="stable")
    counts = counts[counts == counts.iloc[0]].sort_index()  # ties: the first task id
    return str(counts.index[0]), int(counts.iloc[0]), int(counts.iloc[0]) / len(hits)


def repetition_rates(repeats: pd.DataFrame, answers: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """One row per condition x thinking with scored tests: pooled rates first, then with copies counted once,
    the top problem's share of each cell's tests, and what loop answers hold."""
    rows = []
    loops = set(map(tuple, answers.loc[answers["loop"].astype(bool), KEY].to_numpy().tolist())) if len(answers) else set()
    for condition, thinking in cells_present(repeats):
        part = repeats[(repeats["condition"] == condition) & (repeats["thinking"] == thinking)]
        distinct = part[part["duplicate_of"].isna()]
        in_loop = part[[k in loops for k in map(tuple, part[KEY].to_numpy().tolist())]]
        a = answers[(answers["condition"] == condition) & (answers["thinking"] == thinking)] if len(answers) else answers
        row: dict[str, Any] = {"condition": condition, "thinking": thinking, "n_tests": len(part)}
        for cell in ("misleading", "effective"):
            row[f"n_{cell}"] = int((part["outcome"] == cell).sum())
        for cell in ("misleading", "effective"):
            row[f"{cell}_rate"] = analysis_plan.rate(row[f"n_{cell}"], len(part))
        row["n_tests_distinct"] = len(distinct)
        for cell in ("misleading", "effective"):
            row[f"n_{cell}_distinct"] = int((distinct["outcome"] == cell).sum())
        for cell in ("misleading", "effective"):
            row[f"{cell}_rate_distinct"] = analysis_plan.rate(row[f"n_{cell}_distinct"], len(distinct))
        for cell in ("misleading", "effective"):
            task, n, share = _top(part, cell)
            row.update({f"top_{cell}_task": task, f"top_{cell}_n": n, f"top_{cell}_share": share})
        row.update({
            "n_answers_with_tests": int((a["n_tests"] > 0).sum()) if len(a) else int(part["task_id"].nunique()),
            "n_loop_answers": int((a["loop"].astype(bool) & (a["n_tests"] > 0)).sum()) if len(a) else 0,
            "n_tests_in_loops": len(in_loop),
            "n_misleading_in_loops": int((in_loop["outcome"] == "misleading").sum()),
            "n_effective_in_loops": int((in_loop["outcome"] == "effective").sum()),
        })
        rows.append(row)
    return analysis_plan.sha_col(pd.DataFrame(rows, columns=analysis_plan.columns("repetition_rates")), plan)
