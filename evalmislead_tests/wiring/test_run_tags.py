"""Every run names the study file and settings it worked from, whichever route launched it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from dagster import DagsterInstance, asset, materialize

from evalmislead_assets import settings
from evalmislead_assets.resources import WarehouseIOManager
from evalmislead_assets.run_tags import SETTINGS_TAG, STUDY_TAG, settings_fingerprint, study_tags


@asset(name="problems")
def tiny_problems() -> pd.DataFrame:
    return pd.DataFrame()


def _run_tags(tmp_path: Path) -> dict[str, str]:
    with DagsterInstance.ephemeral() as instance:
        result = materialize([tiny_problems], resources={"io_manager": WarehouseIOManager()}, instance=instance)
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        return dict(run.tags)


def test_a_run_carries_the_study_hash_and_the_settings_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALMISLEAD_DB", str(tmp_path / "s.duckdb"))
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "1,2")
    tags = _run_tags(tmp_path)
    assert tags[STUDY_TAG] == study_tags(settings.study_text())[STUDY_TAG]
    assert tags[SETTINGS_TAG] == settings_fingerprint(settings.study_text(), {})
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "3")  # another setting: another fingerprint, the same study
    other = _run_tags(tmp_path)
    assert other[SETTINGS_TAG] != tags[SETTINGS_TAG] and other[STUDY_TAG] == tags[STUDY_TAG]


def test_where_files_live_is_not_a_setting() -> None:
    base = {"EVALMISLEAD_PROBLEMS": "1"}
    assert settings_fingerprint("x", {}, base) == settings_fingerprint("x", {}, {**base, "EVALMISLEAD_CACHE": "/a"})
    assert settings_fingerprint("x", {}, base) != settings_fingerprint("y", {}, base)
