"""The SQL that docs/analysis.md gives for the rate interval computes what cluster_wilson stores."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from evalmislead_assets.analysis.rate_interval import cluster_wilson

DOC = Path(__file__).resolve().parents[2] / "docs" / "analysis.md"


def _doc_sql() -> str:
    section = DOC.read_text(encoding="utf-8").split("## The rate interval", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sql\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1, "the rate interval section holds one SQL block"
    return blocks[0]


def _outcomes(per_problem: list[tuple[int, int]]) -> pd.DataFrame:
    """test_outcomes rows of buggy_code|off: per problem (tests, misleading ones); other cells around them."""
    rows = []
    for i, (n, x) in enumerate(per_problem):
        for k in range(n):
            outcome = "misleading" if k < x else ("effective" if k % 2 else "both_pass")
            rows.append({"task_id": f"Python/{i}", "condition": "buggy_code", "thinking": "off",
                         "outcome": outcome, "language": "python"})
    # rows the query must leave out: another condition, the other mode, another language
    rows += [{"task_id": "Python/0", "condition": "fixed_code", "thinking": "off", "outcome": "misleading",
              "language": "python"},
             {"task_id": "Python/0", "condition": "buggy_code", "thinking": "on", "outcome": "misleading",
              "language": "python"},
             {"task_id": "Java/0", "condition": "buggy_code", "thinking": "off", "outcome": "misleading",
              "language": "java"}]
    return pd.DataFrame(rows)


def _random_problems(seed: int, k: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    tests = rng.integers(1, 12, k)
    return [(int(n), int(x)) for n, x in zip(tests, rng.binomial(tests, 0.15))]


CASES = {
    "spread": [(8, 1)] * 6,
    "clustered": [(8, 6)] + [(8, 0)] * 5,
    "no events": [(3, 0)] * 4,
    "all events": [(2, 2)] * 3,
    "one problem": [(5, 2)],
    "one test per problem": [(1, 1)] * 7 + [(1, 0)] * 23,
    "random": _random_problems(7, 40),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_documented_sql_gives_the_stored_interval(case):
    per_problem = CASES[case]
    con = duckdb.connect()
    con.register("outcomes", _outcomes(per_problem))
    con.execute("CREATE TABLE test_outcomes AS SELECT * FROM outcomes")
    got = con.execute(_doc_sql()).fetchone()
    want = cluster_wilson(np.array([x for _, x in per_problem]), np.array([n for n, _ in per_problem]), 0.9875)
    assert got[0] == sum(x for _, x in per_problem) and got[1] == want.n
    assert got[2:] == pytest.approx((want.estimate, want.design_effect, want.ci_low, want.ci_high), abs=1e-12)
