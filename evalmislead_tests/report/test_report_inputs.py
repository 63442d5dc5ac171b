"""The report's inputs, declared once (report/inputs.py): the study_report asset's inputs are that list, the
report reads those tables and no other, and a table it was not given fails loudly, naming it."""

from __future__ import annotations

import pandas as pd
import pytest
from dagster import AssetKey

from evalmislead_assets import settings
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.report import section_list
from evalmislead_assets.report.build import build, file_ref, load_data
from evalmislead_assets.report.inputs import INPUTS, ReportInputError, ReportSource, read
from evalmislead_assets.report.sections import collected_not_scored, method_notes, tampering
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.report.test_report import store


@pytest.fixture()
def wh(tmp_path):
    return Warehouse(tmp_path / "r.duckdb")


def _markdown(source: object) -> str:
    text = build(load_data(source), load_plan(settings.analysis_plan_path())).markdown(file_ref)
    return "\n".join(line for line in text.splitlines() if not line.startswith("Generated "))  # the clock


def test_the_report_assets_inputs_are_the_declared_tables_and_columns() -> None:
    from evalmislead_assets.assets.analysis import study_report
    from evalmislead_assets.definitions import defs

    assert set(study_report.keys_by_input_name) == set(INPUTS)
    for name, columns in INPUTS.items():
        assert study_report.keys_by_input_name[name] == AssetKey(name)
        metadata = study_report.node_def.input_def_named(name).metadata
        assert metadata.get("columns") == (list(columns) if columns else None), name
    parents = defs.resolve_asset_graph().get(AssetKey("study_report")).parent_keys
    assert parents == {AssetKey(name) for name in INPUTS}  # the side tables too: no read by hand


def test_every_table_a_section_or_the_method_notes_read_is_declared() -> None:
    assert set(section_list.tables()) <= set(INPUTS)
    source = ReportSource({name: pd.DataFrame() for name in INPUTS})
    method_notes.load(source)  # every query of the notes runs on the declared tables alone


def test_a_missing_input_raises_naming_it(wh) -> None:
    store(wh)
    frames = read(wh)
    del frames["spec_label_splits"]
    with pytest.raises(ReportInputError, match="spec_label_splits"):
        load_data(frames)


def test_reading_an_undeclared_table_raises_naming_it() -> None:
    source = ReportSource({name: pd.DataFrame() for name in INPUTS})
    with pytest.raises(ReportInputError, match="'llm_calls'.*inputs.py"):
        source.read_table("llm_calls")
    with pytest.raises(ReportInputError, match="'llm_calls'"):
        source.query_df("SELECT count(*) FROM llm_calls")
    assert source.query_df("SELECT count(*) AS n FROM test_outcomes")["n"].iloc[0] == 0


@pytest.mark.slow
def test_the_declared_columns_are_all_the_report_needs(wh) -> None:
    """The report from the declared projections (what the asset is given) is the report from every column."""
    store(wh, modes=("off", "on"))
    wh.execute("UPDATE generated_tests SET error = 'tampered: reached into pytest', one_version_ids = ['t_x'], "
               "n_tests_over_cap = 3 WHERE condition = 'fixed_code' AND task_id = 'Python/1' AND thinking = 'off'")
    everything = {name: wh.read_table(name) for name in INPUTS}
    projected = read(wh)
    assert list(projected["generated_tests"].columns) == list(INPUTS["generated_tests"])
    assert _markdown(projected) == _markdown(everything)
    # the sections that read generated_tests are given the columns they count
    data = load_data(projected)
    files = tampering.counts(data.extra["test_outcomes"], data.extra["generated_tests"]).set_index(
        ["condition", "thinking"])
    assert files.loc[("fixed_code", "off"), "files_tampered"] == 1 and files["files_tampered"].sum() == 1
    capped = collected_not_scored.counts(data.extra["generated_tests"]).set_index(["condition", "thinking"])
    assert capped.loc[("fixed_code", "off"), "tests_over_cap"] == 3
    assert capped.loc[("fixed_code", "off"), "one_version_ids"] == 1
