"""Per-problem counts of every rate cell of a run, for bench_interval_coverage.py.

    .venv/bin/python benchmarks/extract_interval_cells.py --db data/evalmislead.duckdb [--thinking off] [--model M] \
        [--out benchmarks/data/interval_cells_recorded_1p5b.json]
    .venv/bin/python benchmarks/extract_interval_cells.py --csv evalmislead_tests/data/recorded_1p5b_buggy_fixed_counts.csv

A cell is one condition x metric (misleading, effective) of one thinking mode; it holds, per problem answered
(``test_generations``; a problem whose answer gave no test has 0 tests), the number of tests and of tests in the
cell (``test_outcomes``), the counts ``condition_rates`` computes its interval from. ``--db`` reads a replay's
DuckDB file read-only; ``--csv`` converts the buggy_code / fixed_code per-problem counts the tests ship (extracted
from a replay of the recorded pack).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "interval_cells_recorded_1p5b.json"
METRICS = ("misleading", "effective")


def from_db(db: str, thinking: str = "off", model: str | None = None) -> list[dict]:
    """The cells of one model's Python rows; a file holding several models needs ``model`` (its study name)."""
    import duckdb

    con = duckdb.connect(db, read_only=True)
    try:
        models = [r[0] for r in con.execute("SELECT DISTINCT model_name FROM test_generations").fetchall()]
        if model is None and len(models) > 1:
            raise SystemExit(f"{db} holds several models ({', '.join(map(str, models))}): name one with --model")
        where = ("thinking = ? AND coalesce(language, 'python') = 'python'"
                 + (" AND model_name = ?" if model is not None else ""))
        params = [thinking] + ([model] if model is not None else [])
        answered = con.execute(f"SELECT DISTINCT condition, task_id FROM test_generations WHERE {where}",
                               params).df()
        counts = con.execute(
            "SELECT condition, task_id, count(*) AS n_tests,"
            " count(*) FILTER (WHERE outcome = 'misleading') AS n_misleading,"
            " count(*) FILTER (WHERE outcome = 'effective') AS n_effective"
            f" FROM test_outcomes WHERE {where} GROUP BY ALL", params).df()
    finally:
        con.close()
    per = answered.merge(counts, on=["condition", "task_id"], how="left").fillna(0)
    return _cells(per, thinking)


def from_csv(path: Path) -> list[dict]:
    d = pd.read_csv(path)
    parts = []
    for cond, side in (("buggy_code", "buggy"), ("fixed_code", "fixed")):
        parts.append(pd.DataFrame({"condition": cond, "task_id": d["task_id"], "n_tests": d[f"{side}_tests"],
                                   **{f"n_{m}": d[f"{side}_{m}"] for m in METRICS}}))
    return _cells(pd.concat(parts), "off")


def _cells(per: pd.DataFrame, thinking: str) -> list[dict]:
    out = []
    for cond, g in per.sort_values(["condition", "task_id"]).groupby("condition", sort=False):
        for metric in METRICS:
            out.append({"condition": cond, "thinking": thinking, "metric": metric, "n_problems": len(g),
                        "task_ids": g["task_id"].tolist(), "tests": g["n_tests"].astype(int).tolist(),
                        "events": g[f"n_{metric}"].astype(int).tolist()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--db")
    src.add_argument("--csv", type=Path)
    ap.add_argument("--thinking", default="off")
    ap.add_argument("--model", help="the study's model name, where the file holds several models")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    cells = from_db(args.db, args.thinking, args.model) if args.db else from_csv(args.csv)
    source = f"replay DuckDB {Path(args.db).name}" if args.db else f"{args.csv.as_posix()}"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"source": source, "cells": cells}) + "\n", encoding="utf-8")
    for c in cells:
        print(f"{c['condition']:<26} {c['metric']:<10} problems {c['n_problems']:>3}  tests {sum(c['tests']):>4}  "
              f"events {sum(c['events']):>3} in {sum(e > 0 for e in c['events'])} problems")


if __name__ == "__main__":
    main()
