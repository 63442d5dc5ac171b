"""`evalmislead verify` recomputes a package's derived tables from its own rows and names the first disagreement.

A package is exported from a DuckDB file in tmp_path holding upstream rows (three conditions, both thinking
modes, test bodies with copies) and the derived tables the analysis functions compute from them, stored as the
assets store theirs. Editing one test_outcomes row and recomputing the sums (as someone tidying a package by
hand would) leaves every sum matching; the consistency check then names the table, row and column that no
longer follow from the edited outcomes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from evalmislead_assets import settings
from evalmislead_assets.analysis import problem_level, rates, repetition, secondary
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.analysis.reasoning_mentions import load_keywords
from evalmislead_assets.analysis.spec_labels import agreement, category
from evalmislead_assets.analysis.tool_policy import INPUT_COLUMNS as TOOL_POLICY_COLUMNS
from evalmislead_assets.analysis.tool_policy import tool_policy
from evalmislead_assets.analysis.upstream import (
    REASONING_GENERATION_COLUMNS,
    REPETITION_GENERATED_COLUMNS,
    REPETITION_GENERATION_COLUMNS,
    UPSTREAM_COLUMNS,
)
from evalmislead_assets.cli import main
from evalmislead_assets.execution.cells import outcome
from evalmislead_assets.report import export
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.hashing import sha256_file

CONDITIONS = ("buggy_code", "fixed_code", "model_spec")
STATUSES = [("passed", "failed"), ("failed", "passed"), ("passed", "passed"), ("failed", "failed")]


def _source(n: int) -> str:
    """n test functions; the even ones share one body (copies, as an answer caught in a loop writes them)."""
    bodies = ["    assert f(1) == 0\n" if k % 2 == 0 else f"    assert f({k}) == {k}\n" for k in range(n)]
    return "from solution import f\n\n" + "".join(f"\ndef test_{k}():\n{b}" for k, b in enumerate(bodies))


def store_upstream(wh: Warehouse, n_problems: int = 6) -> None:
    gens, gt, outcomes = [], [], []
    for thinking in ("off", "on"):
        for c, cond in enumerate(CONDITIONS):
            for i in range(n_problems):
                key = {"condition": cond, "thinking": thinking, "task_id": f"Python/{i}", "problem_idx": i}
                n = 0 if (i + c) % 5 == 4 else 1 + (i + c) % 4  # a few answers cut with no test
                gens.append({**key, "finish_reason": "length" if n == 0 else "stop", "error": None,
                             "response_text": "", "model": "m", "template_sha256": "t" * 64,
                             "reasoning_text": "The code has a bug: it returns x - 1." if i % 3 == 0 else "Fine.",
                             "request_json": json.dumps({"max_tokens": 4096})})
                gt.append({**key, "source": _source(n) if n else None, "n_tests": n, "import_ok": n > 0,
                           "test_ids": [f"test_{k}" for k in range(n)]})
                for k in range(n):
                    b, f = STATUSES[(i + k + c) % 4]
                    outcomes.append({**key, "test_id": f"test_{k}", "buggy_status": b, "fixed_status": f,
                                     "outcome": outcome(b, f)})
    wh.replace_rows("test_generations", pd.DataFrame(gens))
    wh.replace_rows("generated_tests", pd.DataFrame(gt))
    wh.replace_rows("test_outcomes", pd.DataFrame(outcomes))


def spec_labels(n_problems: int = 6) -> pd.DataFrame:
    """Thinking-off spec labels: a judge's, and a human's on the first four (one disagreeing); final: human first."""
    rows = []
    for i in range(n_problems):
        judge = (i % 2 == 0, i % 3 == 0)
        human = ((not judge[0]) if i == 1 else judge[0], judge[1]) if i < 4 else (None, None)
        final = tuple(h if h is not None else j for h, j in zip(human, judge))
        rows.append({"thinking": "off", "task_id": f"Python/{i}", "problem_idx": i, "judge_transcribes_bug": judge[0],
                     "judge_states_correct": judge[1], "in_review_sample": i < 4, "human_transcribes_bug": human[0],
                     "human_states_correct": human[1], "transcribes_bug": final[0], "states_correct": final[1],
                     "label_source": "human" if i < 4 else "judge", "category": category(*final)})
    return pd.DataFrame(rows)


def store_derived(wh: Warehouse) -> None:
    """The derived tables as the analysis assets compute them: the same functions on the same projections."""
    plan = load_plan(settings.analysis_plan_path())

    def read(table: str, columns: list[str] | tuple[str, ...]) -> pd.DataFrame:
        return wh.query_df(f"SELECT {', '.join(columns)} FROM {table}")

    o, g, gt = (read(t, cols) for t, cols in UPSTREAM_COLUMNS.items())
    subset = rates.truncation_matched_subset(o, g, gt, plan)
    tests = repetition.per_test_repeats(o, read("generated_tests", REPETITION_GENERATED_COLUMNS))
    answers = repetition.per_answer_repeats(tests, read("test_generations", REPETITION_GENERATION_COLUMNS))
    labels = spec_labels()
    labels.insert(0, "plan_sha256", plan.sha256)
    agree = agreement(labels)
    agree.insert(0, "plan_sha256", plan.sha256)
    sec = plan.section("reasoning_mentions")

    def cell(df: pd.DataFrame) -> pd.DataFrame:  # the plan's condition and thinking mode, as the asset reads them
        return df[(df["condition"] == sec["condition"]) & (df["thinking"] == sec["thinking"])].reset_index(drop=True)

    mentions = secondary.reasoning_mentions(cell(read("test_generations", REASONING_GENERATION_COLUMNS)), cell(o),
                                            load_keywords(secondary.keywords_path(plan)), plan)
    tables = {
        **dict(zip(("reasoning_mentions", "reasoning_mention_matches", "reasoning_mention_summary"), mentions)),
        "spec_labels": labels, "spec_label_agreement": agree,
        "spec_label_splits": secondary.spec_label_splits(o, g, gt, labels, plan),
        "condition_rates": rates.condition_rates(o, g, gt, plan),
        "bootstrap_comparisons": rates.bootstrap_comparisons(o, g, gt, plan)[0],
        "truncation_matched_subset": subset,
        "thinking_comparisons": rates.thinking_comparisons(o, subset, plan, g),
        "problem_rates": problem_level.problem_rates(o, g, gt, plan),
        "problem_comparisons": problem_level.problem_comparisons(o, g, gt, plan)[0],
        "tool_policy": tool_policy(read("test_outcomes", TOOL_POLICY_COLUMNS), plan.level),
        "test_repeats": tests, "answer_repeats": answers,
        "repetition_rates": repetition.repetition_rates(tests, answers, plan),
    }
    for name, df in tables.items():
        assert len(df), name  # every table the check compares holds rows here
        wh.replace_rows(name, df)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package, exported once per module (the plan passed, no review file or report to copy)."""
    folder = tmp_path_factory.mktemp("study")
    wh = Warehouse(folder / "study.duckdb")
    store_upstream(wh)
    store_derived(wh)
    export.export_package(wh.path, folder / "pkg", plan_path=settings.analysis_plan_path())
    return folder / "pkg"


@pytest.fixture()
def package(exported: Path, tmp_path: Path) -> Path:
    """A copy of the package each test may edit."""
    return Path(shutil.copytree(exported, tmp_path / "pkg"))


def edit(pkg: Path, table: str, sql: str) -> None:
    """Run an UPDATE on one of the package's tables (``t``), then recompute every sum, as a hand edit would."""
    path = (pkg / "tables" / f"{table}.parquet").as_posix()
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{path}')")
    assert con.execute(sql).fetchall()[0][0] == 1  # exactly one row changed
    con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    con.close()
    manifest = json.loads((pkg / "manifest.json").read_text())
    for f in manifest["files"]:
        f.update(sha256=sha256_file(pkg / f["path"]), bytes=(pkg / f["path"]).stat().st_size)
    (pkg / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (pkg / "SHA256SUMS").write_text("".join(f"{f['sha256']}  {f['path']}\n" for f in manifest["files"]))


def verify(pkg: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["verify", str(pkg), "--sample", "0"])
    return rc, capsys.readouterr().out


# Python/0, buggy_code, thinking off, test_0: stored passed on buggy, failed on fixed (misleading)
THE_TEST = "condition = 'buggy_code' AND thinking = 'off' AND task_id = 'Python/0' AND test_id = 'test_0'"


def test_an_untouched_package_passes(package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = verify(package, capsys)
    assert rc == 0, out
    assert "files match manifest.json" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("evalmislead: consistency: "))
    stored = pd.read_parquet(package / "tables" / "test_outcomes.parquet")
    assert f"{len(stored)} stored tests give their cells; 15 derived tables" in line and "none stored" not in line


def test_an_edited_outcome_with_recomputed_sums_fails_naming_condition_rates(
        package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stored = pd.read_parquet(package / "tables" / "condition_rates.parquet")
    before = int(stored.loc[(stored["condition"] == "buggy_code") & (stored["thinking"] == "off"), "n_misleading"].iloc[0])
    # the misleading test made both_pass, its statuses and its cell changed together: the row is consistent in itself
    edit(package, "test_outcomes", f"UPDATE t SET fixed_status = 'passed', outcome = 'both_pass' WHERE {THE_TEST} "
                                   "AND outcome = 'misleading'")
    rc, out = verify(package, capsys)
    assert rc == 1
    assert "files match manifest.json" in out  # the sums alone pass
    lines = [ln for ln in out.splitlines() if ln.startswith("evalmislead: consistency: ")]
    assert lines == [f"evalmislead: consistency: condition_rates row condition=buggy_code, thinking=off: "
                     f"n_misleading stored {before}, recomputed {before - 1}"]


def test_a_status_edited_without_its_cell_fails_naming_the_test(package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(package, "test_outcomes", f"UPDATE t SET buggy_status = 'failed' WHERE {THE_TEST}")
    rc, out = verify(package, capsys)
    assert rc == 1
    assert ("evalmislead: consistency: test_outcomes row condition=buggy_code, thinking=off, task_id=Python/0, "
            "test_id=test_0: outcome stored 'misleading', recomputed 'both_fail'") in out.splitlines()


def test_an_edited_comparison_estimate_fails_naming_its_row(package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(package, "bootstrap_comparisons", "UPDATE t SET estimate = estimate + 0.01 WHERE thinking = 'off' "
                                           "AND comparison_id = 2")
    rc, out = verify(package, capsys)
    assert rc == 1
    assert "evalmislead: consistency: bootstrap_comparisons row thinking=off, comparison_id=2: estimate stored " in out


def test_an_edited_interval_bound_fails_too(package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the paired bootstrap is re-run with the plan's seed: its bounds are compared like any other value
    edit(package, "problem_comparisons", "UPDATE t SET ci_high = ci_high + 0.001 WHERE thinking = 'off' "
                                         "AND comparison_id = 1")
    rc, out = verify(package, capsys)
    assert rc == 1
    assert "problem_comparisons row thinking=off, comparison_id=1: ci_high stored " in out


@pytest.mark.slow
def test_a_package_of_materialized_analysis_assets_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The derived tables as the assets themselves store them (IO manager, Dagster) agree with verify's recomputation
    (all but the spec-label tables, whose asset asks a judge model)."""
    from dagster import materialize

    from evalmislead_assets.assets import analysis as assets
    from evalmislead_assets.resources import WarehouseIOManager, WarehouseResource
    from evalmislead_tests.stored import with_stored

    monkeypatch.setenv("EVALMISLEAD_REVIEW_CSV", str(tmp_path / "review.csv"))
    monkeypatch.setenv("EVALMISLEAD_REPORT_DIR", str(tmp_path / "no_report"))
    wh = Warehouse(tmp_path / "study.duckdb")
    store_upstream(wh)
    computed = [assets.condition_rates, assets.bootstrap_comparisons, assets.truncation_matched_subset,
                assets.thinking_comparisons, assets.tool_policy, assets.problem_rates, assets.problem_comparisons,
                assets.repetition_rates]
    res = materialize(with_stored(computed), resources={"warehouse": WarehouseResource(path=str(wh.path)),
                                                        "io_manager": WarehouseIOManager(path=str(wh.path))})
    assert res.success
    pkg = tmp_path / "pkg"
    export.export_package(wh.path, pkg, plan_path=settings.analysis_plan_path())
    rc, out = verify(pkg, capsys)
    assert rc == 0, out
    assert "; 10 derived tables (" in out
    assert ("none stored: spec_label_agreement, spec_label_splits, reasoning_mentions, reasoning_mention_matches, "
            "reasoning_mention_summary") in out
    edit(pkg, "test_outcomes", f"UPDATE t SET fixed_status = 'passed', outcome = 'both_pass' WHERE {THE_TEST}")
    rc, out = verify(pkg, capsys)
    assert rc == 1 and "consistency: condition_rates row condition=buggy_code, thinking=off: n_misleading" in out


def test_an_edited_spec_label_fails_naming_the_split_it_moves(package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(package, "spec_labels", "UPDATE t SET category = 'neither', transcribes_bug = false WHERE task_id = 'Python/0'")
    rc, out = verify(package, capsys)
    assert rc == 1
    assert "evalmislead: consistency: spec_label_splits row thinking=off, condition=buggy_code, " in out


def test_an_edited_reasoning_text_fails_naming_its_answer(package: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(package, "test_generations", "UPDATE t SET reasoning_text = 'Fine.' WHERE condition = 'buggy_code' "
                                      "AND thinking = 'on' AND task_id = 'Python/0'")
    rc, out = verify(package, capsys)
    assert rc == 1
    assert ("evalmislead: consistency: reasoning_mentions row condition=buggy_code, thinking=on, task_id=Python/0: "
            "reasoning_chars stored ") in out
