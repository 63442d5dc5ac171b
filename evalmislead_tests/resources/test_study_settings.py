"""The study's run-level settings reach the assets as one resource: filled from the study file when the definitions
load (what the launchpad shows), overridden by a run's config, recorded in the run's tags; asset bodies read no
environment variable."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, asset, materialize

from evalmislead_assets import settings, study_models
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.resources import StudySettingsResource
from evalmislead_assets.resources.study_settings import SETTINGS_VALUES_TAG

ROOT = Path(__file__).resolve().parents[2]
MODEL = '\n[[models]]\nname = "coder"\nbundled = "qwen2.5-coder-0.5b"\n'


@contextmanager
def _study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Iterator[Path]:
    path = tmp_path / "study.toml"
    path.write_text(text + MODEL)
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(path))
    monkeypatch.setenv("EVALMISLEAD_DB", str(tmp_path / "s.duckdb"))
    for name in ("EVALMISLEAD_PROBLEMS", "EVALMISLEAD_MODELS", "EVALMISLEAD_PROBE_N", "EVALMISLEAD_MAX_TOKENS_OFF"):
        monkeypatch.delenv(name, raising=False)
    settings.forget_study_text()
    study_models.reset()
    try:
        yield path
    finally:
        settings.forget_study_text()
        study_models.reset()


def _launchpad_defaults() -> dict[str, Any]:
    """The study_settings config the launchpad scaffolds for the asset job of freshly built definitions."""
    from evalmislead_assets.definitions import build

    job = build(study_models.study()).resolve_implicit_global_asset_job_def()
    field = job.run_config_schema.config_type.fields["resources"].config_type.fields["study_settings"]
    assert field.default_provided
    return field.default_value["config"]


def test_the_launchpad_shows_the_study_files_values_and_follows_an_edit(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    with _study(tmp_path, monkeypatch, 'problems = "0-2"\n') as path:
        shown = _launchpad_defaults()
        assert shown["problems"] == "0,1,2" and shown["max_tokens_off"] == settings.DEFAULT_MAX_TOKENS["off"]
        path.write_text('problems = "5,7"\n' + MODEL)
        settings.forget_study_text()
        assert _launchpad_defaults()["problems"] == "5,7"
        monkeypatch.setenv("EVALMISLEAD_PROBE_N", "4")  # a documented override shows as well
        assert _launchpad_defaults()["probe_n"] == 4


seen: dict[str, Any] = {}


@asset
def reads_settings(study_settings: StudySettingsResource) -> None:
    seen.update(subset=study_settings.problem_subset(), cap=study_settings.max_tokens("off"))


def _run(resource: StudySettingsResource, run_config: dict | None = None) -> dict[str, str]:
    seen.clear()
    with DagsterInstance.ephemeral() as instance:
        result = materialize([reads_settings], resources={"study_settings": resource}, instance=instance,
                             run_config=run_config)
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        return dict(run.tags)


def test_an_asset_reads_the_resource_and_the_run_records_the_values(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    with _study(tmp_path, monkeypatch, 'problems = "0-2"\n'):
        tags = _run(StudySettingsResource.from_study())
        assert seen == {"subset": [0, 1, 2], "cap": settings.DEFAULT_MAX_TOKENS["off"]}
        recorded = json.loads(tags[SETTINGS_VALUES_TAG])
        assert recorded["problems"] == "0,1,2" and recorded["max_tokens_off"] == settings.DEFAULT_MAX_TOKENS["off"]

        # a run's own config wins over the study file, and the run says so
        tags = _run(StudySettingsResource.from_study(),
                    {"resources": {"study_settings": {"config": {"problems": "9", "max_tokens_off": 64}}}})
        assert seen == {"subset": [9], "cap": 64}
        assert json.loads(tags[SETTINGS_VALUES_TAG])["problems"] == "9"

        # an empty field is resolved when asked: the study file's value
        _run(StudySettingsResource())
        assert seen["subset"] == [0, 1, 2]


def test_a_bad_value_is_left_empty_at_load_and_refused_when_used(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with _study(tmp_path, monkeypatch, ""):
        monkeypatch.setenv("EVALMISLEAD_MAX_TOKENS_OFF", "lots")
        resource = StudySettingsResource.from_study()  # the definitions still load
        assert resource.max_tokens_off is None and resource.max_tokens_on == settings.DEFAULT_MAX_TOKENS["on"]
        with pytest.raises(ConfigError, match="EVALMISLEAD_MAX_TOKENS_OFF='lots' is not an integer"):
            resource.max_tokens("off")


# the getters of run-level settings: asset bodies take these from the study_settings resource
RUN_LEVEL = re.compile(r"\bsettings\.(problem_subset|max_tokens|max_tests_per_answer|max_mutation_runs_per_file"
                       r"|probe_n|judge_max_tokens|sandbox_workers)\(|os\.environ|os\.getenv")


def test_no_asset_module_reads_a_run_level_setting_or_the_environment() -> None:
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "evalmislead_assets" / "assets").glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if RUN_LEVEL.search(line)]
    assert found == []
    assert RUN_LEVEL.search("    subset = settings.problem_subset()")  # the check finds what it looks for
