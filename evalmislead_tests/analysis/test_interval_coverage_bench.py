"""benchmarks/bench_interval_coverage.py and extract_interval_cells.py: the cells read from a replay's DuckDB file
(problems without tests included, other modes, languages and models left out) and a small seeded run."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("bench_interval_coverage"), importlib.import_module("extract_interval_cells")
    finally:
        sys.path.remove(str(BENCH))


def _db(path: Path, models: tuple[str, ...] = ("m",)) -> str:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE test_generations (condition VARCHAR, thinking VARCHAR, task_id VARCHAR, "
                "model_name VARCHAR, language VARCHAR)")
    con.execute("CREATE TABLE test_outcomes (condition VARCHAR, thinking VARCHAR, task_id VARCHAR, test_id VARCHAR, "
                "outcome VARCHAR, model_name VARCHAR, language VARCHAR)")
    for model in models:
        for task in ("Python/0", "Python/1", "Python/2"):  # Python/2 answered, no tests
            con.execute("INSERT INTO test_generations VALUES ('buggy_code', 'off', ?, ?, 'python')", [task, model])
        con.execute("INSERT INTO test_generations VALUES ('buggy_code', 'on', 'Python/0', ?, 'python')", [model])
        con.execute("INSERT INTO test_generations VALUES ('buggy_code', 'off', 'Java/0', ?, 'java')", [model])
        rows = [("Python/0", "misleading")] * 3 + [("Python/0", "both_pass"), ("Python/1", "effective"),
                                                   ("Python/1", "both_fail")]
        for i, (task, outcome) in enumerate(rows):
            con.execute("INSERT INTO test_outcomes VALUES ('buggy_code', 'off', ?, ?, ?, ?, 'python')",
                        [task, f"t{i}", outcome, model])
        # another mode and another language: not in the off cells
        con.execute("INSERT INTO test_outcomes VALUES ('buggy_code', 'on', 'Python/0', 'x', 'misleading', ?, 'python')",
                    [model])
        con.execute("INSERT INTO test_outcomes VALUES ('buggy_code', 'off', 'Java/0', 'x', 'misleading', ?, 'java')",
                    [model])
    con.close()
    return str(path)


def test_cells_from_a_replay(bench, tmp_path):
    _, extract = bench
    cells = {c["metric"]: c for c in extract.from_db(_db(tmp_path / "one.duckdb"))}
    assert cells["misleading"]["task_ids"] == ["Python/0", "Python/1", "Python/2"]
    assert cells["misleading"]["tests"] == [4, 2, 0]
    assert cells["misleading"]["events"] == [3, 0, 0]
    assert cells["effective"]["events"] == [0, 1, 0]


def test_several_models_need_a_name(bench, tmp_path):
    _, extract = bench
    db = _db(tmp_path / "two.duckdb", ("a", "b"))
    with pytest.raises(SystemExit, match="several models"):
        extract.from_db(db)
    assert [c["tests"] for c in extract.from_db(db, model="b")][0] == [4, 2, 0]


def test_a_seeded_run_measures_coverage(bench):
    coverage, _ = bench
    cells = [{"condition": "buggy_code", "metric": "misleading", "tests": [34, 5, 5, 6, 0, 4, 3],
              "events": [28, 2, 0, 1, 0, 0, 0]},
             {"condition": "fixed_code", "metric": "misleading", "tests": [3, 3], "events": [0, 0]}]
    methods = ["cluster_wilson", "problem_weighted_wilson", "boot_t"]
    rows = coverage.run(cells, reps=200, boot=49, seed=1, methods=methods, boot_reps=50)
    again = coverage.run(cells, reps=200, boot=49, seed=1, methods=methods, boot_reps=50)
    assert rows == again  # seeded
    got = [r for r in rows if r["method"]]
    assert {(r["world"], r["method"]) for r in got} == {(w, m) for w in ("bootstrap", "parametric") for m in methods}
    assert all(0 <= r["coverage"] <= 1 and r["mc_se"] >= 0 and r["reps"] in (200, 50) for r in got)
    assert [r["condition"] for r in rows if r["method"] is None] == ["fixed_code"]  # no events: not simulated
    table = coverage.render(rows) + coverage.skipped(rows)
    assert "problem_weighted_wilson" in table and "Cells without events" in table and "fixed_code misleading" in table
    assert "| buggy_code misleading | 3 | cluster_wilson |" in coverage.render_compact(rows)


def test_the_fitted_correlation(bench):
    coverage, _ = bench
    n = np.full(20, 5.0)
    assert coverage.fitted_icc(n, np.zeros(20)) == 0  # no events: nothing to fit
    lumped = coverage.fitted_icc(n, np.array([5.0] * 4 + [0.0] * 16))  # every problem all or nothing
    spread = coverage.fitted_icc(n, np.array([1.0] * 20))  # the same share everywhere
    assert lumped > 0.9 and spread == 0
