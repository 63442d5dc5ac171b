"""Replication table: the published figures file, direction and agreement logic, the report section."""

import re

import pandas as pd
import pytest

from evalmislead_assets.analysis import rates as analysis  # noqa: F401  (registers the tables the printed SQL reads)
from evalmislead_assets.report.section_list import sections
from evalmislead_assets.report.sections import replication as rp
from evalmislead_assets.store.database import Warehouse

THIS_RUN_COLUMNS = ["this run (a vs b)", "this run direction", "vs paper", "vs published run"]


def test_published_file_has_a_source_for_every_figure_and_the_protocol_numbers():
    data = rp.load_published()
    assert {"published_run", "paper"} <= set(data["sources"])
    assert "PROTOCOL.md" in data["sources"]["published_run"] and "13 model settings" in data["sources"]["paper"]
    for comp in data["comparisons"]:
        for side in ("paper", "published_run"):
            if comp[side]:
                assert comp[side]["source"].startswith(("paper:", "published run:")), comp["id"]
    for fig in data["figures"]:
        assert fig["source"].startswith(("paper:", "published run:")), fig["id"]
    by_id = {c["id"]: c for c in data["comparisons"]}
    assert (by_id["C1"]["paper"]["a"], by_id["C1"]["paper"]["b"]) == (0.0384, 0.0046)
    assert (by_id["C2"]["paper"]["a"], by_id["C2"]["paper"]["b"]) == (0.0298, 0.0851)
    assert (by_id["C3"]["paper"]["a"], by_id["C4"]["paper"]["a"]) == (0.0269, 0.0450)
    assert (by_id["C5"]["paper"]["a"], by_id["C5"]["paper"]["b"]) == (0.0461, 0.0294)
    assert by_id["C5"]["published_run"]["estimate"] == 0.152 and by_id["C1"]["published_run"]["a"] == 0.164
    figs = {f["id"]: f for f in data["figures"]}
    assert (figs["F1"]["value"], figs["F2"]["value"], figs["F9"]["value"]) == (141, 81, 85)
    # every stated paper direction matches its own numbers
    for c in data["comparisons"]:
        if c["paper"]:
            assert rp.direction(c["paper"]["a"] - c["paper"]["b"]) == rp._sign(c["paper"]["direction"])


def test_bad_direction_in_the_file_is_refused(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('{"sources": {}, "comparisons": [{"id": "X", "paper": {"direction": "up"}}], "figures": []}')
    with pytest.raises(ValueError, match="direction"):
        rp.load_published(bad)


@pytest.mark.parametrize("diff, n_a, n_b, expected", [
    (0.02, 10, 10, "+"), (-0.01, 10, 10, "−"), (0.0, 10, 10, "no direction"),
    (0.02, 0, 10, "not estimable"), (0.02, 10, 0, "not estimable"), (None, 10, 10, "not estimable"),
    (float("nan"), 10, 10, "not estimable"), (0.02, None, 10, "not estimable"),
])
def test_direction(diff, n_a, n_b, expected):
    assert rp.direction(diff, n_a, n_b) == expected


@pytest.mark.parametrize("this, published, ci, expected", [
    ("+", "+", (0.01, 0.2), "agrees"), ("−", "-", (-0.2, -0.01), "agrees"), ("+", "-", (0.01, 0.2), "disagrees"),
    ("−", "+", (-0.2, -0.01), "disagrees"), ("+", None, (0.01, 0.2), "not reported"),
    ("not estimable", "+", (None, None), "not estimable"), ("no direction", "-", (0.0, 0.0), "inconclusive"),
    # the interval decides, not the point estimate's sign: one that includes 0 (or touches it) is inconclusive
    ("−", "+", (-0.188, 0.0), "inconclusive"), ("+", "+", (-0.01, 0.3), "inconclusive"),
    ("−", "-", (None, None), "inconclusive"), ("+", "+", (float("nan"), 0.3), "inconclusive"),
])
def test_agreement_needs_an_interval_that_excludes_zero(this, published, ci, expected):
    assert rp.agreement(this, published, *ci) == expected


def test_demo_c4_with_an_interval_touching_zero_is_inconclusive_and_shows_the_interval():
    boot = pd.DataFrame([{"thinking": "off", "metric": "effective_rate", "condition_a": "model_spec",
                          "condition_b": "buggy_code", "rate_a": 0.0, "rate_b": 0.094, "estimate": -0.094,
                          "ci_low": -0.188, "ci_high": 0.0, "n_tests_a": 3, "n_tests_b": 12}])
    row = rp.comparison_rows(rp.load_published(), {"bootstrap_comparisons": boot}).set_index("id").loc["C4"]
    assert row["this run direction"] == "−"
    assert row["vs paper"] == "inconclusive"
    assert row["this run difference [98.75 % CI]"] == "-9.4 [-18.8, +0.0]"


def _frames() -> dict[str, pd.DataFrame]:
    boot = pd.DataFrame([
        # C1: buggy misleading above fixed (agrees with both); C2: a tie; C3: model_spec had no tests
        {"thinking": "off", "metric": "misleading_rate", "condition_a": "buggy_code", "condition_b": "fixed_code",
         "rate_a": 0.20, "rate_b": 0.05, "estimate": 0.15, "ci_low": 0.05, "ci_high": 0.25,
         "n_tests_a": 100, "n_tests_b": 80},
        {"thinking": "off", "metric": "effective_rate", "condition_a": "buggy_code", "condition_b": "fixed_code",
         "rate_a": 0.10, "rate_b": 0.10, "estimate": 0.0, "ci_low": -0.05, "ci_high": 0.05,
         "n_tests_a": 100, "n_tests_b": 80},
        {"thinking": "off", "metric": "misleading_rate", "condition_a": "model_spec", "condition_b": "buggy_code",
         "rate_a": 0.0, "rate_b": 0.20, "estimate": -0.20, "n_tests_a": 0, "n_tests_b": 100},
        {"thinking": "on", "metric": "misleading_rate", "condition_a": "buggy_code", "condition_b": "fixed_code",
         "rate_a": 0.0, "rate_b": 0.9, "estimate": -0.9, "n_tests_a": 5, "n_tests_b": 5},
    ])
    thinking = pd.DataFrame([
        {"condition": "buggy_code", "metric": "misleading_rate", "rate_off": 0.30, "rate_on": 0.10, "estimate": -0.20,
         "ci_low": -0.3, "ci_high": -0.1, "n_problems": 12, "n_tests_off": 50, "n_tests_on": 40},
    ])
    rates = pd.DataFrame([
        {"condition": "buggy_code", "thinking": "off", "misleading_rate": 0.20, "n_tests": 100,
         "problems_with_effective": 3, "n_problems": 5, "n_truncated_no_tests": 0},
        {"condition": "buggy_code_with_docstring", "thinking": "off", "misleading_rate": 0.05, "n_tests": 60,
         "problems_with_effective": 4, "n_problems": 5, "n_truncated_no_tests": 0},
    ])
    return {"bootstrap_comparisons": boot, "thinking_comparisons": thinking, "condition_rates": rates}


def test_directions_from_stored_rows():
    rows = rp.comparison_rows(rp.load_published(), _frames()).set_index("id")
    assert rows.loc["C1", "this run direction"] == "+"
    assert rows.loc["C1", "vs paper"] == "agrees" and rows.loc["C1", "vs published run"] == "agrees"
    assert rows.loc["C1", "this run (a vs b)"] == "20.0 % vs 5.0 %"
    assert rows.loc["C1", "published run direction"] == "+ (inferred)"
    assert rows.loc["C1", "this run difference [98.75 % CI]"] == "+15.0 [+5.0, +25.0]"
    assert rows.loc["C2", "this run direction"] == "no direction" and rows.loc["C2", "vs paper"] == "inconclusive"
    assert rows.loc["C3", "this run direction"] == "not estimable" and rows.loc["C3", "vs paper"] == "not estimable"
    assert rows.loc["C4", "this run direction"] == "not estimable"  # no stored row
    assert rows.loc["C5", "this run direction"] == "−"  # on − off
    assert rows.loc["C5", "vs paper"] == "disagrees (vs an unpaired average)"
    assert rows.loc["C5", "vs published run"] == "disagrees"
    # the paper's thinking on vs off is an unpaired average over different models: marked; C1's is not
    assert rows.loc["C5", "paper (a vs b)"] == f"4.6 % vs 2.9 % ({rp.UNPAIRED})"
    assert rows.loc["C1", "paper (a vs b)"] == "3.8 % vs 0.5 %" and rows.loc["C1", "vs paper"] == "agrees"
    assert rows.loc["C6", "vs paper"] == "not reported"
    # condition_rates stores no interval: a direction, but no verdict
    assert rows.loc["C8", "this run direction"] == "−" and rows.loc["C8", "vs published run"] == "inconclusive"
    assert rows.loc["C8", "this run difference [98.75 % CI]"] == "-15.0 (no interval stored)"
    figs = rp.figure_rows(rp.load_published(), _frames()).set_index("id")
    assert figs.loc["F2", "this run"] == "3/5" and figs.loc["F2", "published"] == "81/164"
    assert figs.loc["F4", "this run"] == "20.0 %" and figs.loc["F1", "this run"] == "no stored row"
    assert figs.loc["F10", "this run"] == "-20.0 [-30.0, -10.0]" and figs.loc["F10", "published"] == "+15.2 [+7.3, +22.9]"
    assert figs.loc["F9", "this run"] == "12"


def test_section_registered_and_empty_frames_give_no_numbers_for_this_run(tmp_path):
    section = next(s for s in sections() if s.title == "Replication (direction only)")
    assert set(section.tables) == set(rp.TABLES)
    empty = {t: pd.DataFrame() for t in section.tables}
    rows = rp.comparison_rows(rp.load_published(), empty)
    for col in THIS_RUN_COLUMNS:
        assert not rows[col].str.contains(r"\d").any(), col
    assert set(rows["this run direction"]) == {"not estimable"}
    figs = rp.figure_rows(rp.load_published(), empty)
    assert not figs["this run"].str.contains(r"\d").any()
    text = "\n".join(section.render(empty))
    assert "levels" in text and "not compared" in text and "No condition_rates" in text
    # every printed SQL statement runs against the study schema
    wh = Warehouse(tmp_path / "empty.duckdb")
    sql = text.split("```sql")[1].split("```")[0]
    statements = [s for s in sql.split(";") if re.sub(r"--[^\n]*", "", s).strip()]
    assert len(statements) >= len(rp.load_published()["comparisons"])
    for stmt in statements:
        wh.query_df(stmt)


def test_section_with_rows_names_levels_not_compared():
    text = "\n".join(rp.section(_frames()))
    assert "| C1 " in text and "agrees" in text and "disagrees" in text and "inconclusive" in text
    assert "interval excludes 0" in text and rp.UNPAIRED in text
    assert "SELECT rate_a, rate_b, estimate, ci_low, ci_high, n_tests_a, n_tests_b FROM bootstrap_comparisons" in text
