"""`evalmislead run`'s plan comes from the definitions: every asset of the graph is in one step, in the study's
order, and an asset added to a group module runs with no other edit."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetKey, asset

from evalmislead_assets import definitions, study_models
from evalmislead_assets.cli import run_plan

TWO_MODELS_TWO_LANGUAGES = """
languages = ["python", "java"]

[[models]]
name = "alpha"
urls = ["http://127.0.0.1:1"]

[[models]]
name = "beta"
urls = ["http://127.0.0.1:2"]
"""


@pytest.fixture(autouse=True)
def _fresh_study():
    study_models.reset()
    yield
    study_models.reset()


def _use_study(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "study.toml"
    path.write_text(text)
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(path))
    for name in ("EVALMISLEAD_MODELS", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL"):
        monkeypatch.delenv(name, raising=False)
    study_models.reset()
    return study_models.study()


def _plan(study, modes=("off",), conditions=("buggy_code", "fixed_code"), optional=("mutation",)) -> run_plan.Plan:
    graph = definitions.build(study).resolve_asset_graph()
    return run_plan.build_plan(graph, study.names, list(study.languages), list(modes), list(conditions), optional)


def _names(step: run_plan.Step) -> set[str]:
    return {k.to_user_string() for k in step.keys}


def test_every_asset_of_the_shipped_study_is_in_one_step() -> None:
    study = study_models.study()
    graph = definitions.build(study).resolve_asset_graph()
    plan = run_plan.build_plan(graph, study.names, list(study.languages), ["off", "on"],
                               ["buggy_code", "fixed_code", "model_spec"], ["mutation"])
    planned = [(k, s.partition) for s in plan.steps for k in s.keys]
    assert len(planned) == len(set(planned))  # no asset partition twice
    assert {k for k, _ in planned} == set(graph.materializable_asset_keys)  # no asset left out
    inputs, *rest = plan.steps
    assert _names(inputs) == {"problems", "problem_validation", "mutants"}
    # per mode: the specs, then each condition's chain; the analysis once; the cross-model step last
    labels = [s.label for s in rest]
    assert labels == ["model_specs [off]", "chain [buggy_code|off]", "chain [fixed_code|off]", "chain [model_spec|off]",
                      "model_specs [on]", "chain [buggy_code|on]", "chain [fixed_code|on]", "chain [model_spec|on]",
                      "analysis", "across"]
    assert _names(rest[1]) == {"test_generations", "generated_tests", "test_outcomes", "test_coverage",
                               "mutation_scores", "mutant_kills"}
    assert {"condition_rates", "study_report", "spec_labels", "spec_label_splits"} <= _names(rest[8])
    assert {"model_rates", "models_report"} <= _names(rest[9])


def test_a_run_without_mutation_leaves_out_exactly_the_tagged_assets() -> None:
    study = study_models.study()
    plan = _plan(study, optional=())
    planned = {k.to_user_string() for s in plan.steps for k in s.keys}
    assert not planned & {"mutants", "mutation_scores", "mutant_kills"}
    assert {k.to_user_string() for k in plan.left_out["mutation"]} == {"mutants", "mutation_scores", "mutant_kills"}
    assert "test_coverage" in planned


def test_models_and_languages_run_in_the_study_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study = _use_study(tmp_path, TWO_MODELS_TWO_LANGUAGES, monkeypatch)
    plan = _plan(study, conditions=("buggy_code",))
    order = [(s.model, s.language, s.label) for s in plan.steps]
    assert order == [
        (None, None, "inputs"),
        ("alpha", "python", "model_specs [off]"), ("alpha", "python", "chain [buggy_code|off]"),
        ("alpha", "python", "analysis"),
        ("alpha", "java", "java/model_specs [off]"), ("alpha", "java", "java/chain [buggy_code|off]"),
        ("beta", "python", "model_specs [off]"), ("beta", "python", "chain [buggy_code|off]"),
        ("beta", "python", "analysis"),
        ("beta", "java", "java/model_specs [off]"), ("beta", "java", "java/chain [buggy_code|off]"),
        (None, None, "across"),
    ]
    assert _names(plan.steps[0]) >= {"java/problems", "java/problem_validation", "problems"}
    assert _names(plan.steps[5]) == {"alpha/java/test_generations", "alpha/java/generated_tests",
                                     "alpha/java/test_outcomes"}
    assert {"model_rates", "language_comparisons", "languages_report"} <= _names(plan.steps[-1])


def test_an_asset_added_to_a_group_module_runs_with_no_other_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("evalmislead_throwaway_assets")

    @asset(group_name="analysis")
    def throwaway_summary(condition_rates: pd.DataFrame) -> pd.DataFrame:
        return condition_rates

    module.throwaway_summary = throwaway_summary  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(definitions, "PER_MODEL_MODULES", [*definitions.PER_MODEL_MODULES, module])
    plan = _plan(study_models.study())
    analysis = [s for s in plan.steps if s.stage == run_plan.ANALYSIS]
    assert len(analysis) == 1 and AssetKey("throwaway_summary") in analysis[0].keys
    monkeypatch.undo()
    shipped = _plan(study_models.study())
    assert AssetKey("throwaway_summary") not in {k for s in shipped.steps for k in s.keys}


def test_partitions_come_from_the_partitions_definition_in_mode_then_condition_order() -> None:
    from evalmislead_assets.partitions import condition_thinking_partitions, thinking_partitions

    keys = run_plan.partitions_for(condition_thinking_partitions, ["on", "off"], ["fixed_code", "buggy_code"])
    assert keys == ["fixed_code|on", "buggy_code|on", "fixed_code|off", "buggy_code|off"]
    assert run_plan.partitions_for(thinking_partitions, ["off"], ["buggy_code"]) == ["off"]
    with pytest.raises(ValueError, match="cannot choose"):
        run_plan.partitions_for(object(), ["off"], [])
