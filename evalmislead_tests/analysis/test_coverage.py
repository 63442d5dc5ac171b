"""Coverage of the function under test: measured in the real sandbox, united per file and
version, banded, and reported with SQL that recomputes every number."""

from __future__ import annotations

import math
import re

import duckdb
import pandas as pd
import pytest

from evalmislead_assets.analysis import coverage as ca
from evalmislead_assets.report.sections import coverage as coverage_report
from evalmislead_assets.sandbox import coverage_probe as cm
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox
from evalmislead_tests.stored import with_stored

# statements: the `if` (2) and both returns (3, 5); `else:` is not a statement; branches: 2->3, 2->5
BUGGY = "def sign(x):\n    if x > 0:\n        return 'positive'\n    else:\n        return 'non-positive'\n"
FIXED = "def sign(x):\n    if x >= 0:\n        return 'positive'\n    else:\n        return 'non-positive'\n"
HEAD = "import os\nfrom solution import sign\n\n"
POSITIVE = "def test_positive():\n    assert sign(5) == 'positive'\n\n"
NEGATIVE = "def test_negative():\n    assert sign(-5) == 'non-positive'\n\n"
ZERO = "def test_zero_is_positive():\n    assert sign(0) == 'positive'\n\n"  # fails on buggy, in its else branch
DIES = "def test_dies():\n    sign(-5)\n    os._exit(0)\n\n"  # runs the else branch, never reports
FILES = {
    "one_branch": (HEAD + POSITIVE, ["test_positive"]),
    "both_branches": (HEAD + POSITIVE + NEGATIVE, ["test_positive", "test_negative"]),
    "failing": (HEAD + ZERO + POSITIVE, ["test_zero_is_positive", "test_positive"]),
    "dies": (HEAD + POSITIVE + DIES, ["test_positive", "test_dies"]),
}
# (n_statements_run, n_branches_taken, n_tests_measured) per file and version; 3 statements, 2 branches
EXPECTED = {
    ("one_branch", "buggy"): (2, 1, 1), ("one_branch", "fixed"): (2, 1, 1),
    ("both_branches", "buggy"): (3, 2, 2), ("both_branches", "fixed"): (3, 2, 2),
    ("failing", "buggy"): (3, 2, 2), ("failing", "fixed"): (2, 1, 2),
    ("dies", "buggy"): (2, 1, 1), ("dies", "fixed"): (2, 1, 1),
}


def _generated() -> pd.DataFrame:
    return pd.DataFrame([{"task_id": name, "problem_idx": i, "source": src, "test_ids": list(ids),
                          "n_tests": len(ids)} for i, (name, (src, ids)) in enumerate(FILES.items())])


def _problems() -> pd.DataFrame:
    return pd.DataFrame([{"task_id": name, "entry_point": "sign", "buggy_code": BUGGY, "fixed_code": FIXED}
                         for name in FILES]).set_index("task_id")


@pytest.fixture(scope="module")
def measured() -> pd.DataFrame:
    return ca.build_test_coverage(_generated(), _problems(), Sandbox(Limits(timeout_s=5.0), workers=2))


@pytest.mark.slow
def test_line_and_branch_counts_on_both_versions(measured: pd.DataFrame) -> None:
    got = {(r.task_id, r.version): (r.n_statements_run, r.n_branches_taken, r.n_tests_measured)
           for r in measured.itertuples(index=False)}
    assert got == EXPECTED
    assert (measured["n_statements"] == 3).all() and (measured["n_branches"] == 2).all()
    one = measured[measured["task_id"] == "one_branch"].iloc[0]
    assert one["line_coverage"] == pytest.approx(2 / 3) and one["branch_coverage"] == pytest.approx(0.5)
    both = measured[measured["task_id"] == "both_branches"]
    assert (both["line_coverage"] == 1.0).all() and (both["branch_coverage"] == 1.0).all()
    assert dict(zip(measured["task_id"], measured["n_tests"])) == {k: len(v[1]) for k, v in FILES.items()}


@pytest.mark.slow
def test_failing_test_counts_the_lines_it_ran(measured: pd.DataFrame) -> None:
    ran = Sandbox(workers=1).run([(Module(BUGGY, FILES["failing"][0]), "test_zero_is_positive")], coverage=True)
    assert ran[0].status == "failed"
    arcs = cm.payload_arcs(ran[0].coverage)
    assert arcs is not None and (2, 5) in arcs  # the buggy else branch, taken by a failing test
    row = measured[(measured["task_id"] == "failing") & (measured["version"] == "buggy")].iloc[0]
    assert row["line_coverage"] == 1.0


def test_a_test_that_kills_its_process_adds_nothing_and_breaks_nothing() -> None:
    ran = Sandbox(workers=1).run([(Module(BUGGY, FILES["dies"][0]), t) for t in FILES["dies"][1]], coverage=True)
    assert [r.status for r in ran] == ["passed", "crashed"]
    assert cm.payload_arcs(ran[0].coverage) == {(-1, 2), (2, 3), (3, -1)}
    assert ran[1].coverage is None


@pytest.mark.slow
def test_coverage_off_by_default_leaves_results_unchanged() -> None:
    requests = [(Module(v, src), t) for v in (BUGGY, FIXED) for src, ids in FILES.values() for t in ids]
    box = Sandbox(workers=2)
    plain, covered = box.run(requests), box.run(requests, coverage=True)
    assert all(r.coverage is None for r in plain)
    assert [(r.status, r.detail) for r in plain] == [(r.status, r.detail) for r in covered]
    assert sum(r.coverage is not None for r in covered) == len(requests) - 2  # the two test_dies runs


def test_coverage_without_os_isolation() -> None:
    src, ids = FILES["both_branches"]
    ran = Sandbox(workers=1, os_isolation=False).run([(Module(FIXED, src), t) for t in ids], coverage=True)
    arcs = set().union(*(cm.payload_arcs(r.coverage) or set() for r in ran))
    fc = cm.measure(cm.function_shape(FIXED, "sign"), arcs)
    assert (fc.n_statements_run, fc.n_branches_taken) == (3, 2)


def test_function_shape_counts_only_the_entry_points_body() -> None:
    source = (
        "import math\n"                          # 1
        "def helper(x):\n"                       # 2
        "    return x if x else 0\n"             # 3
        "# not a statement\n"                    # 4
        "def f(a,\n"                             # 5
        "      b):\n"                            # 6
        '    """Doc."""\n'                       # 7
        "    total = helper(\n"                  # 8
        "        a)\n"                           # 9
        "    for i in range(b):\n"               # 10
        "        total += i\n"                   # 11
        "    return total\n"                     # 12
    )
    shape = cm.function_shape(source, "f")
    assert shape is not None and shape.statements == {8, 10, 11, 12}
    assert shape.branches == {(10, 11), (10, 12)}
    # a run that calls f(1, 0): lines 8, 10, 12 (and the helper, outside f); arcs as coverage.py records them
    fc = cm.measure(shape, {(-5, 8), (8, 9), (9, 8), (8, 10), (10, 12), (12, -5), (-2, 3), (3, -2)})
    assert (fc.n_statements, fc.n_statements_run, fc.n_branches, fc.n_branches_taken) == (4, 3, 2, 1)
    straight = cm.function_shape("def g():\n    return 1\n", "g")
    no_branch = cm.measure(straight, {(-1, 2), (2, -1)})
    assert no_branch.branch_coverage is None and no_branch.line_coverage == 1.0
    assert cm.function_shape("def g():\n    return 1\n", "missing") is None
    assert cm.measure(None, set()).line_coverage is None


@pytest.mark.parametrize("payload", [None, {}, {"arcs": "x"}, {"arcs": [[1]]}, {"arcs": [[1, "2"]]},
                                     {"arcs": [[True, 2]]}, {"error": "boom"}, {"arcs": [[1, 2]] * (cm.MAX_ARCS + 1)}])
def test_malformed_payloads_are_not_believed(payload: object) -> None:
    assert cm.payload_arcs(payload) is None


# --------------------------------------------------------------------------- bands and report

def _cov_row(condition: str, task: str, version: str, run: int, stmts: int = 4) -> dict:
    return {"condition": condition, "thinking": "off", "task_id": task, "problem_idx": 0, "version": version,
            "n_statements": stmts, "n_statements_run": run, "line_coverage": run / stmts if stmts else None,
            "n_branches": 2, "n_branches_taken": min(run, 2), "branch_coverage": min(run, 2) / 2,
            "n_tests": 2, "n_tests_measured": 2}


def _hand_made() -> tuple[pd.DataFrame, pd.DataFrame]:
    cov = pd.DataFrame([
        _cov_row("buggy_code", "t1", "fixed", 1), _cov_row("buggy_code", "t1", "buggy", 4),   # 25 %: <50 %
        _cov_row("buggy_code", "t2", "fixed", 2), _cov_row("buggy_code", "t2", "buggy", 2),   # 50 %: 50-99 %
        _cov_row("buggy_code", "t3", "fixed", 4), _cov_row("buggy_code", "t3", "buggy", 3),   # 100 %
        _cov_row("fixed_code", "t1", "fixed", 4), _cov_row("fixed_code", "t1", "buggy", 4),   # 100 %
    ])
    outcomes = pd.DataFrame(
        [("buggy_code", "t1", o) for o in ("misleading", "both_fail")]
        + [("buggy_code", "t2", o) for o in ("misleading", "misleading", "effective")]
        + [("buggy_code", "t3", o) for o in ("both_pass",)]
        + [("fixed_code", "t1", o) for o in ("effective", "misleading", "both_pass", "both_pass")],
        columns=["condition", "task_id", "outcome"]).assign(thinking="off", test_id="x")
    return cov, outcomes


def test_band_split_on_a_hand_made_frame() -> None:
    cov, outcomes = _hand_made()
    bands = ca.misleading_by_band(cov, outcomes)
    got = {(r.condition, r.band): (r.tests, r.misleading) for r in bands.itertuples(index=False)}
    assert got == {("buggy_code", "<50 %"): (2, 1), ("buggy_code", "50–99 %"): (3, 2), ("buggy_code", "100 %"): (1, 0),
                   ("fixed_code", "<50 %"): (0, 0), ("fixed_code", "50–99 %"): (0, 0), ("fixed_code", "100 %"): (4, 1)}
    rates = dict(zip(zip(bands["condition"], bands["band"]), bands["rate"]))
    assert rates[("buggy_code", "50–99 %")] == pytest.approx(2 / 3)
    assert math.isnan(rates[("fixed_code", "<50 %")])
    assert ca.band(0, 0) is None and ca.band(9, 10) == "50–99 %" and ca.band(4, 9) == "<50 %"


def test_printed_sql_recomputes_every_number() -> None:
    cov, outcomes = _hand_made()
    con = duckdb.connect()
    con.register("test_coverage", cov)
    con.register("test_outcomes", outcomes)
    per = ca.coverage_by_condition(cov, outcomes).set_index(["condition", "thinking"])
    sql_per = con.execute(coverage_report.COVERAGE_SQL).df().set_index(["condition", "thinking"])
    for col in ["files", "line_fixed", "line_buggy", "branch_fixed", "branch_buggy", "tests", "misleading",
                "effective", "both_pass", "both_fail"]:
        assert sql_per.loc[per.index, col].astype(float).tolist() == pytest.approx(per[col].astype(float).tolist()), col
    bands = ca.misleading_by_band(cov, outcomes)
    sql_bands = con.execute(coverage_report.BAND_SQL).df()
    estimable = bands[bands["tests"] > 0].set_index(["condition", "thinking", "band"])
    sql_bands = sql_bands.set_index(["condition", "thinking", "band"])
    assert sorted(sql_bands.index) == sorted(estimable.index)
    for col in ("tests", "misleading", "rate"):
        assert sql_bands.loc[estimable.index, col].astype(float).tolist() == pytest.approx(estimable[col].tolist())


def test_report_section_with_data() -> None:
    cov, outcomes = _hand_made()
    text = "\n".join(coverage_report.render({"test_coverage": cov, "test_outcomes": outcomes}))
    cells = re.sub(r" {2,}", " ", text)  # md_table pads the columns
    assert "| buggy_code | off | 3 | 58.3 % | 75.0 % |" in cells  # mean of 25, 50, 100 % (fixed); 100, 50, 75 % (buggy)
    assert "| fixed_code | off | <50 % | 0 | 0 | not estimable |" in cells
    assert text.count("```sql") == 2 and "data:image/png;base64," in text


@pytest.mark.parametrize("frames", [{}, {"test_coverage": pd.DataFrame(), "test_outcomes": pd.DataFrame()},
                                    {"test_coverage": pd.DataFrame(columns=[c for c, _ in ca.COLUMNS]),
                                     "test_outcomes": _hand_made()[1]}])
def test_report_section_without_rows_shows_no_numbers(frames: dict) -> None:
    text = "\n".join(coverage_report.render(frames))
    assert "test_coverage" in text and not re.search(r"\d", text)


@pytest.mark.slow
def test_asset_materializes_one_partition(seeded_warehouse) -> None:
    from dagster import DagsterInstance, materialize

    from evalmislead_assets.assets import coverage as coverage_assets
    from evalmislead_assets.partitions import partition_key
    from evalmislead_assets.resources import StudySettingsResource, WarehouseIOManager, WarehouseResource
    from evalmislead_tests.execution.test_scoring import WORKED_EXAMPLE

    wh = seeded_warehouse
    ids = re.findall(r"^def (test_\w+)", WORKED_EXAMPLE, flags=re.M)
    generated = pd.DataFrame([
        {"task_id": "Python/30", "problem_idx": 30, "source": WORKED_EXAMPLE, "extraction": "fence:python",
         "import_ok": True, "n_tests": len(ids), "test_ids": list(ids), "error": None, "finish_reason": "stop"},
        {"task_id": "Python/0", "problem_idx": 0, "source": None, "extraction": "none", "import_ok": False,
         "n_tests": 0, "test_ids": [], "error": "no code found in the answer", "finish_reason": "stop"},
    ]).assign(condition="buggy_code", thinking="off")
    wh.replace_rows("generated_tests", generated)
    result = materialize(with_stored([coverage_assets.test_coverage]), partition_key=partition_key("buggy_code", "off"),
                         resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                                    "study_settings": StudySettingsResource()},
                         instance=DagsterInstance.ephemeral())
    assert result.success
    rows = wh.read_table("test_coverage").set_index("version")
    assert sorted(rows.index) == ["buggy", "fixed"] and set(rows["task_id"]) == {"Python/30"}
    assert (rows["line_coverage"] == 1.0).all() and (rows["n_tests"] == len(ids)).all()
    assert (rows["n_tests_measured"] == len(ids)).all() and set(rows["condition"]) == {"buggy_code"}
    meta = {k: v.value for k, v in result.asset_materializations_for_node("test_coverage")[0].metadata.items()}
    assert meta["files"] == 1 and meta["tests"] == len(ids) and meta["line_coverage_fixed"] == 1.0
