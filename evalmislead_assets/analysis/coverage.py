"""The test_coverage table: coverage of the function under test by each generated test file.

Every test of a file with collected tests runs again, against the buggy and the fixed version,
in the same sandbox as test_outcomes but with coverage on (``Sandbox.run(coverage=True)``).
The arcs each test process executed are united per file and version, and compared with what
the entry point's body could execute in that version (coverage_probe.py). A failing test
counts the lines it ran; a test whose process ended before it reported (crashed, timeout)
adds nothing, and ``n_tests_measured`` says how many tests did report.

Also here: the coverage bands of the report ("misleading rate by coverage band"), computed
from stored rows exactly as the SQL printed in the report recomputes them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalmislead_assets.execution.collection import stored_test_ids
from evalmislead_assets.sandbox import coverage_probe
from evalmislead_assets.sandbox.host import Module, Sandbox
from evalmislead_assets.store import schema

TABLE = "test_coverage"
VERSIONS = ("buggy", "fixed")
COLUMNS = schema.TABLES[TABLE]  # declared in store/schema.py

BANDS = ("<50 %", "50–99 %", "100 %")  # line coverage of the fixed version: [0, .5), [.5, 1), exactly 1


def build_test_coverage(generated: pd.DataFrame, problems: pd.DataFrame, sandbox: Sandbox) -> pd.DataFrame:
    """Two rows (buggy, fixed) per generated test file with tests.

    ``generated`` has task_id, problem_idx, source, test_ids, n_tests; ``problems`` is indexed by
    task_id with entry_point, buggy_code and fixed_code. Rows lack condition and thinking.
    """
    generated = generated[generated["n_tests"] > 0]
    requests: list[tuple[Module, str]] = []
    files: list[tuple[Any, list[str]]] = []
    for g in generated.itertuples(index=False):
        problem = problems.loc[g.task_id]
        ids = stored_test_ids(g.test_ids)
        files.append((g, ids))
        for tid in ids:
            requests += [(Module(problem.buggy_code, g.source), tid), (Module(problem.fixed_code, g.source), tid)]
    ran = sandbox.run(requests, coverage=True)
    rows: list[dict[str, Any]] = []
    k = 0
    for g, ids in files:
        problem = problems.loc[g.task_id]
        arcs: dict[str, set[coverage_probe.Arc]] = {v: set() for v in VERSIONS}
        measured = dict.fromkeys(VERSIONS, 0)
        for _ in ids:
            for version in VERSIONS:  # requests alternate buggy, fixed
                got = coverage_probe.payload_arcs(ran[k].coverage)
                k += 1
                if got is not None:
                    arcs[version] |= got
                    measured[version] += 1
        for version in VERSIONS:
            code = problem.buggy_code if version == "buggy" else problem.fixed_code
            fc = coverage_probe.measure(coverage_probe.function_shape(code, problem.entry_point), arcs[version])
            rows.append({
                "task_id": g.task_id, "problem_idx": None if pd.isna(g.problem_idx) else int(g.problem_idx),
                "version": version, "n_statements": fc.n_statements, "n_statements_run": fc.n_statements_run,
                "line_coverage": fc.line_coverage, "n_branches": fc.n_branches,
                "n_branches_taken": fc.n_branches_taken, "branch_coverage": fc.branch_coverage,
                "n_tests": len(ids), "n_tests_measured": measured[version],
            })
    return coverage_frame(rows)


def coverage_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    columns = [c for c, _ in COLUMNS if c not in ("condition", "thinking")]
    df = pd.DataFrame(rows, columns=columns)
    for c in ("problem_idx",):
        df[c] = df[c].astype("Int32")
    for c in ("n_statements", "n_statements_run", "n_branches", "n_branches_taken", "n_tests", "n_tests_measured"):
        df[c] = df[c].astype("int32")
    for c in ("line_coverage", "branch_coverage"):
        df[c] = df[c].astype(float)
    return df


def band(n_statements_run: Any, n_statements: Any) -> str | None:
    """The coverage band of one file (None when its function has no statements)."""
    if pd.isna(n_statements) or pd.isna(n_statements_run) or int(n_statements) == 0:
        return None
    if int(n_statements_run) == int(n_statements):
        return BANDS[2]
    return BANDS[0] if int(n_statements_run) / int(n_statements) < 0.5 else BANDS[1]


def coverage_by_condition(cov: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    """Per condition x thinking: files, mean line and branch coverage per version, and the four cells."""
    cols = ["condition", "thinking", "files", "line_fixed", "line_buggy", "branch_fixed", "branch_buggy",
            "tests", "misleading", "effective", "both_pass", "both_fail"]
    if cov.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for (c, t), g in cov.groupby(["condition", "thinking"], sort=False):
        fixed, buggy = g[g["version"] == "fixed"], g[g["version"] == "buggy"]
        o = outcomes[(outcomes["condition"] == c) & (outcomes["thinking"] == t)] if len(outcomes) else outcomes
        row = {"condition": c, "thinking": t, "files": len(fixed),
               "line_fixed": _mean(fixed["line_coverage"]), "line_buggy": _mean(buggy["line_coverage"]),
               "branch_fixed": _mean(fixed["branch_coverage"]), "branch_buggy": _mean(buggy["branch_coverage"]),
               "tests": len(o)}
        for cell in ("misleading", "effective", "both_pass", "both_fail"):
            row[cell] = int((o["outcome"] == cell).sum()) if len(o) else 0
        out.append(row)
    return _order(pd.DataFrame(out, columns=cols))


def misleading_by_band(cov: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    """Per condition x thinking x band (of the file's line coverage on the fixed version): tests,
    misleading tests, misleading rate (NaN, "not estimable", where the band has no tests)."""
    cols = ["condition", "thinking", "band", "tests", "misleading", "rate"]
    if cov.empty or outcomes.empty:
        return pd.DataFrame(columns=cols)
    fixed = cov[cov["version"] == "fixed"].copy()
    fixed["band"] = [band(r, s) for r, s in zip(fixed["n_statements_run"], fixed["n_statements"])]
    fixed = fixed[fixed["band"].notna()]
    joined = outcomes.merge(fixed[["condition", "thinking", "task_id", "band"]], on=["condition", "thinking", "task_id"])
    out = []
    for c, t in fixed[["condition", "thinking"]].drop_duplicates().itertuples(index=False):
        for b in BANDS:
            rows = joined[(joined["condition"] == c) & (joined["thinking"] == t) & (joined["band"] == b)]
            n, m = len(rows), int((rows["outcome"] == "misleading").sum())
            out.append({"condition": c, "thinking": t, "band": b, "tests": n, "misleading": m,
                        "rate": m / n if n else float("nan")})
    return _order(pd.DataFrame(out, columns=cols))


def _mean(s: pd.Series) -> float:
    s = s.dropna()
    return float(s.mean()) if len(s) else float("nan")


def _order(df: pd.DataFrame) -> pd.DataFrame:
    from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES

    if df.empty:
        return df.reset_index(drop=True)
    rank = {c: i for i, c in enumerate(CONDITION_NAMES)}
    key = df["thinking"].map({m: i for i, m in enumerate(THINKING_MODES)}).fillna(9) * 100 + \
        df["condition"].map(rank).fillna(99)
    if "band" in df:
        key = key * 10 + df["band"].map({b: i for i, b in enumerate(BANDS)})
    return df.assign(_k=key.values).sort_values("_k", kind="stable").drop(columns="_k").reset_index(drop=True)
