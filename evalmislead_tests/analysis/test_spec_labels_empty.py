"""spec_labels on an empty model_specs table: no KeyError: 'thinking'."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from dagster import DagsterInstance, materialize

from evalmislead_assets.analysis import spec_labels as sl
from evalmislead_assets.assets import analysis as assets
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseIOManager, WarehouseResource
from evalmislead_assets.store import schema
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.stored import with_stored


def test_review_sample_of_no_specs_is_empty() -> None:
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in schema.column_names("model_specs")})
    assert len(sl.review_sample(empty, 20, 1)) == 0


def test_spec_labels_asset_on_empty_model_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "study.duckdb"
    monkeypatch.setenv("EVALMISLEAD_DB", str(db))
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("EVALMISLEAD_REVIEW_CSV", str(tmp_path / "review.csv"))
    wh = Warehouse(db)
    wh.ensure_schema()  # every table present, none with a row (as after a run that stored nothing)
    res = materialize(
        with_stored([assets.spec_labels]), instance=DagsterInstance.ephemeral(), raise_on_error=False,
        resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                 "study_settings": StudySettingsResource(),
                   "judge_llm": LLMResource(urls="http://127.0.0.1:9")},  # nothing to judge: never asked
    )
    failures = [e.message for e in res.all_events if e.is_step_failure]
    assert res.success, failures
    assert len(wh.read_table("spec_labels")) == 0
    assert not (tmp_path / "review.csv").exists()  # no spec, no review row
