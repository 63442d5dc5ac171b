"""Settings reach the domain as values: the assets that used to read the environment inside the domain
show each such setting as a run-config field in the launchpad (empty = the EVALMISLEAD_* variable)."""

from __future__ import annotations

import pytest
from dagster import AssetKey, DagsterInstance, RunConfig, materialize

from evalmislead_assets.assets import problems as problem_assets
from evalmislead_assets.definitions import defs
from evalmislead_assets.errors import ConfigError

LAUNCHPAD_SETTINGS = {
    # asset: (config field, the variable it overrides)
    "problems": ("source", "EVALMISLEAD_DATASET_SOURCE"),
    "spec_labels": ("judge_max_tokens", "EVALMISLEAD_JUDGE_MAX_TOKENS"),
    "mutation_scores": ("max_runs_per_file", "EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE"),
    "determinism_probe": ("n", "EVALMISLEAD_PROBE_N"),
    "test_outcomes": ("workers", "EVALMISLEAD_SANDBOX_WORKERS"),
    "test_generations": ("max_tokens", "EVALMISLEAD_MAX_TOKENS_OFF"),
}


@pytest.mark.parametrize("asset, field, variable", [(a, f, v) for a, (f, v) in LAUNCHPAD_SETTINGS.items()])
def test_each_setting_is_a_described_optional_launchpad_field(asset: str, field: str, variable: str) -> None:
    fields = defs.get_assets_def(AssetKey(asset)).op.config_schema.config_type.fields
    assert field in fields, sorted(fields)
    assert not fields[field].is_required  # empty: the environment variable, as before
    assert variable in (fields[field].description or ""), fields[field].description


def test_the_problems_source_comes_from_run_config_else_the_environment(tmp_path, monkeypatch) -> None:
    from evalmislead_assets.resources import WarehouseIOManager

    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path))
    io = {"io_manager": WarehouseIOManager(path=str(tmp_path / "s.duckdb"))}
    result = materialize([problem_assets.problems], resources=io, instance=DagsterInstance.ephemeral())
    meta = result.asset_materializations_for_node("problems")[0].metadata
    assert meta["source"].value == "local" and meta["rows"].value == 164
    config = RunConfig(ops={"problems": problem_assets.ProblemsConfig(source="web")})
    with pytest.raises(ConfigError) as info:
        materialize([problem_assets.problems], resources=io, run_config=config, instance=DagsterInstance.ephemeral())
    assert "source='web'" in str(info.value) and "EVALMISLEAD_DATASET_SOURCE" in str(info.value)
    assert "\n" not in str(info.value)
    monkeypatch.setenv("EVALMISLEAD_DATASET_SOURCE", "web")  # the environment's bad value: settings' own error
    with pytest.raises(Exception) as info:  # raised where the run's resources check every setting first
        materialize([problem_assets.problems], resources=io, instance=DagsterInstance.ephemeral())
    err: BaseException | None = info.value
    while err is not None and not isinstance(err, ConfigError):  # Dagster's resource error holds it as user_exception
        err = getattr(err, "user_exception", None) or err.__cause__
    assert err is not None and "EVALMISLEAD_DATASET_SOURCE='web'" in str(err)
    assert str(info.value) == str(err)  # the run's own error is that line, not "Error executing resource_fn ..."
