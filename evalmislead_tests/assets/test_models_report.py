"""report/models.md from a real Dagster run of the cross-model assets, on stored rows of three models.

The rows are chosen so that every way the report went wrong shows: a mean difference that is 0 in every
resample (float noise of 3.7e-17 read as "excludes 0"), a condition's rate row over more problems than the
comparison beside it, thinking-on rows (report-only), equal model sizes, figures the average does not hold.
Every SQL statement the report prints is run against the DuckDB file and must return the figure shown.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import AssetsDefinition, DagsterInstance, materialize

from evalmislead_assets import study_models
from evalmislead_assets.cli import run_plan
from evalmislead_assets.report.formatting import pct, points
from evalmislead_assets.report.sections.replication_average import NOT_AVERAGED

M, BP = "misleading", "both_pass"
MODELS = ("x", "y", "z")
SIZES = {"x": "1B", "y": "1B", "z": "3B"}


def _cells(n_misleading: int, n_tests: int = 10) -> list[str]:
    return [M] * n_misleading + [BP] * (n_tests - n_misleading)


# model -> (condition, thinking) -> problem -> outcomes. Off, problem 1: buggy 1/2/3 misleading of 10 per model,
# fixed 3/2/1: the mean difference is 0 (float noise). Problem 2 is answered in buggy_code by every model but in
# fixed_code only by y and z, so the buggy_code rate row covers problems 1 and 2, the comparison problem 1 only.
# On, problem 1: buggy 5/6/7 of 10, fixed 0: a clear difference, report-only.
STUDY = {
    m: {("buggy_code", "off"): {1: _cells(k), 2: [[M, BP], [M, M], [BP, BP]][i]},
        ("fixed_code", "off"): {1: _cells(4 - k), **({} if m == "x" else {2: [BP, BP]})},
        ("buggy_code", "on"): {1: _cells(4 + k)},
        ("fixed_code", "on"): {1: _cells(0)}}
    for i, (m, k) in enumerate(zip(MODELS, (1, 2, 3)))
}


def _seed(wh) -> None:
    outcomes, gens, gt = [], [], []
    for model, cells in STUDY.items():
        for (cond, thinking), probs in cells.items():
            for p, outs in probs.items():
                key = {"model_name": model, "condition": cond, "thinking": thinking, "task_id": f"Python/{p}",
                       "problem_idx": p}
                gens.append({**key, "finish_reason": "stop", "error": None})
                gt.append({**key, "n_tests": len(outs), "import_ok": True, "source": "def test_x(): pass\n",
                           "error": None})
                outcomes += [{**key, "test_id": f"test_{i}", "outcome": c, "buggy_status": "passed",
                              "fixed_status": "failed" if c == M else "passed"} for i, c in enumerate(outs)]
    for table, rows in (("test_outcomes", outcomes), ("test_generations", gens), ("generated_tests", gt)):
        wh.replace_rows(table, pd.DataFrame(rows))


def _table(md: str, after: str) -> pd.DataFrame:
    """The first Markdown table after the line ``after``, as strings."""
    lines = md[md.index(after):].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    rows = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return pd.DataFrame(rows[2:], columns=rows[0])


def _statements(md: str) -> list[tuple[str, str, str]]:
    """(figure id or '', its comment line, its statement: '' where only a comment is printed) for every entry of
    the report's SQL block; the last one, without an id, is the recompute."""
    block = md.split("```sql\n", 1)[1].split("```", 1)[0]
    entries: list[tuple[str, list[str]]] = []
    for ln in block.splitlines():
        last = entries[-1][1] if entries else []
        done = bool(last) and (last[-1].endswith(";") or last[-1].startswith("--"))  # its line(s) are all there
        if re.match(r"^-- [CF]\d+ ", ln) or not entries or (ln.startswith("--") and done):
            entries.append((ln, []))
        else:
            last.append(ln)
    out = []
    for comment, lines in entries:
        ident = re.match(r"^-- ([CF]\d+) ", comment)
        statement = "\n".join(ln for ln in lines if not ln.startswith("--"))
        out.append((ident.group(1) if ident else "", "\n".join([comment, *lines]), statement))
    return out


WHY = {"no rows", "no common problem", "0 tests: not estimable", "not defined: a model has 0 tests"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_models_report_prints_what_its_sql_returns(seeded_warehouse, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from evalmislead_assets.definitions import build
    from evalmislead_assets.resources import WarehouseIOManager, WarehouseResource

    study_file = tmp_path / "study.toml"
    study_file.write_text("".join(f'[[models]]\nname = "{m}"\nurls = ["http://127.0.0.1:9"]\nfamily = "F"\n'
                                  f'parameters = "{SIZES[m]}"\n\n' for m in MODELS))
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(study_file))
    for name in ("EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL", "EVALMISLEAD_MODELS"):
        monkeypatch.delenv(name, raising=False)
    study_models.reset()
    try:
        _seed(seeded_warehouse)
        defs = build(study_models.study())
        assets = {k: a for a in defs.assets if isinstance(a, AssetsDefinition) for k in a.keys}
        study = study_models.study()
        plan = run_plan.build_plan(defs.resolve_asset_graph(), study.names, list(study.languages), ["off"], [])
        keys = list(plan.across[0].keys)  # the cross-model step of `evalmislead run`
        wanted = list(dict.fromkeys(assets[k] for k in keys))
        deps = {d for a in wanted for d in a.dependency_keys} - set(keys)
        result = materialize([*wanted, *(assets[d].to_source_asset(d) for d in deps)], selection=keys,
                             resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager()},
                             instance=DagsterInstance.ephemeral())
        assert result.success
    finally:
        study_models.reset()
    md = (tmp_path / "home" / "report" / "models.md").read_text()
    with duckdb.connect(str(seeded_warehouse.path), read_only=True) as con:
        _check_report(md, con)


def _check_report(md: str, con: duckdb.DuckDBPyConnection) -> None:

    # a mean difference that is 0 in every resample does not exclude 0; thinking on is marked report-only
    avg = _table(md, "\nthinking off:\n")
    c1 = avg[(avg["#"] == "1")].iloc[0]
    assert c1["mean of models"] == "+0.0 [+0.0, +0.0]" and c1["mean excludes 0"] == "no", c1.to_dict()
    on = _table(md, "\nthinking on:\n")
    assert on.loc[on["#"] == "1", "mean excludes 0"].tolist() == ["yes (report-only)"]
    assert not con.execute("SELECT bool_or(mean_excludes_zero) FROM model_average WHERE thinking = 'off' "
                           "AND kind = 'comparison'").fetchone()[0]
    # equal sizes share a rank
    ranks = con.execute("SELECT DISTINCT model_name, size_rank FROM model_sizes ORDER BY ALL").fetchall()
    assert ranks == [("x", 1), ("y", 1), ("z", 3)]

    # the replication rows: a comparison's rates are on its own paired problems; what is not averaged says so
    directions = _table(md, "**Directions**").set_index("id")
    assert directions.loc["C1", "this run (a vs b)"] == "20.0 % vs 20.0 %"
    assert directions.loc["C5", "this run (a vs b)"] == NOT_AVERAGED
    assert directions.loc["C5", "this run direction"] == NOT_AVERAGED
    figures = _table(md, "**Headline figures**").set_index("id")
    assert figures.loc["F1", "this run"] == NOT_AVERAGED and "not estimable" not in figures["this run"].tolist()

    # every printed statement returns exactly the figure shown beside it
    entries = _statements(md)
    with_sql = [i for i in figures.index if not figures.loc[i, "this run"].startswith("not set beside here")]
    assert [e[0] for e in entries] == [*directions.index, *with_sql, ""]
    for ident, text, sql in entries:
        if not sql:  # no figure in the average: the row says so
            shown = directions.loc[ident, "this run (a vs b)"] if ident in directions.index else figures.loc[
                ident, "this run"]
            assert shown == NOT_AVERAGED and NOT_AVERAGED in text, (ident, text)
            continue
        got = con.execute(sql).df()
        if ident.startswith("C") and "kind = 'comparison'" in sql:
            row = directions.loc[ident]
            assert len(got) == 1, sql
            g = got.iloc[0]
            if pd.isna(g["estimate"]):  # no figure: the row says why, and the statement returns no value
                assert row["this run (a vs b)"] in WHY and row["this run difference [98.75 % CI]"] in WHY, ident
                assert g[["rate_a", "rate_b", "ci_low", "ci_high"]].isna().all(), ident
            else:
                assert row["this run (a vs b)"] == f"{pct(g['rate_a'])} vs {pct(g['rate_b'])}", (ident, sql)
                assert row["this run difference [98.75 % CI]"] == (
                    f"{points(g['estimate'])} [{points(g['ci_low'])}, {points(g['ci_high'])}]"), (ident, sql)
        elif ident.startswith("C"):  # two rate rows (condition_a, condition_b): a vs b, their difference
            pair = re.search(r"condition_a IN \('([^']+)', '([^']+)'\)", sql)
            assert pair, sql
            rates = dict(zip(got["condition"], got.iloc[:, 1]))
            a, b = rates.get(pair.group(1)), rates.get(pair.group(2))
            assert directions.loc[ident, "this run (a vs b)"] == f"{pct(a)} vs {pct(b)}", (ident, sql)
        elif ident.startswith("F"):
            shown = figures.loc[ident, "this run"]
            assert got.shape[1] == 1 and len(got) <= 1, sql
            assert shown == (pct(got.iloc[0, 0]) if len(got) else "no stored row"), (ident, sql)
        else:  # the recompute: each model's pooled rates, as model_rates holds them and the report shows them
            rates = con.execute("SELECT model_name, condition, thinking, n_tests, misleading_rate, effective_rate, "
                                "problems_with_effective FROM model_rates").df()
            merged = got.merge(rates, on=["model_name", "condition", "thinking"], suffixes=("", "_table"))
            assert len(merged) == len(got) == len(rates) == 12, sql
            for col in ("n_tests", "misleading_rate", "effective_rate", "problems_with_effective"):
                assert (merged[col] == merged[f"{col}_table"]).all(), col
            shown = _table(md, "**Rates per model, thinking off**")
            for _, x in merged[merged["thinking"] == "off"].iterrows():
                cell = shown[(shown["model"] == x["model_name"]) & (shown["condition"] == x["condition"])]
                assert cell["misleading rate"].iloc[0].startswith(pct(x["misleading_rate"]) + " ")
