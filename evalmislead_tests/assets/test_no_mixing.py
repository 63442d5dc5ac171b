"""A study never mixes or shrinks silently, through real Dagster runs against a fake server.

(c) a run over a slice of problems replaces only that slice's answers and says first that the partition
keeps the others; (a) a template edited and one condition generated again: the analysis refuses the
comparison (and a cell holding two template versions gets no rate), naming why; (b) the server behind the
URL now serves another model file: refused in one line before anything is sent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dagster import DagsterInstance, materialize

from evalmislead_assets import settings
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.analysis.rates import bootstrap_comparisons, condition_rates
from evalmislead_assets.assets import generation
from evalmislead_assets.assets.analysis_inputs import UPSTREAM
from evalmislead_assets.partitions import partition_key
from evalmislead_assets.report.tables import made_with_table
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseIOManager, WarehouseResource
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.fake_llm_server import FakeLLMServer
from evalmislead_tests.stored import with_stored


def _run(url: str, condition: str, raise_on_error: bool = True) -> tuple[bool, list[str]]:
    """Materialize test_generations[condition|off] in a real Dagster run: (success, the run's log lines)."""
    resources = {"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                 "study_settings": StudySettingsResource(),
                 "llm": LLMResource(urls=url, retries=1, backoff_s=0.2)}
    asset = generation.test_generations
    instance = DagsterInstance.ephemeral()
    result = materialize(with_stored([generation.model_specs, asset]), selection=[asset],
                         partition_key=partition_key(condition, "off"), resources=resources,
                         instance=instance, raise_on_error=raise_on_error,
                         run_config={"ops": {asset.op.name: {"config": {"max_tokens": 16}}}})
    lines = [e.user_message for e in instance.all_logs(result.run_id)]
    failures = [e.step_failure_data.error.message.strip() for e in result.all_events if e.is_step_failure]
    return result.success, lines + failures


def _problems(wh: Warehouse, condition: str) -> list[int]:
    df = wh.query_df("SELECT problem_idx FROM test_generations WHERE condition = ? ORDER BY problem_idx", [condition])
    return df["problem_idx"].tolist()


@pytest.mark.slow
def test_a_slice_rerun_keeps_the_partitions_other_problems_and_says_so(seeded_warehouse, monkeypatch) -> None:
    wh = seeded_warehouse
    with FakeLLMServer() as fake:
        monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "0-3")
        _run(fake.url, "buggy_code")
        assert _problems(wh, "buggy_code") == [0, 1, 2, 3] and fake.chat_requests == 4
        monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30")
        _, logs = _run(fake.url, "buggy_code")
        assert fake.chat_requests == 5  # only problem 30 was asked
        assert _problems(wh, "buggy_code") == [0, 1, 2, 3, 30]  # the other problems' answers are kept
        assert any("this run asks 1 problems (30); the partition keeps its stored answers for 4 other problems "
                   "(0-3) and will hold 5" in m for m in logs), logs
        monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "0-3")
        _run(fake.url, "buggy_code")
        assert fake.chat_requests == 5 and _problems(wh, "buggy_code") == [0, 1, 2, 3, 30]




def _analysis_inputs(wh: Warehouse) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The three upstream tables as the analysis assets read them (UPSTREAM's projections); every answered
    problem gets one test, misleading for buggy_code and effective for fixed_code."""
    gens = wh.query_df(f"SELECT {', '.join(UPSTREAM['test_generations'].metadata['columns'])} FROM test_generations")
    gt = gens[["condition", "thinking", "task_id", "problem_idx"]].assign(n_tests=1, import_ok=True, error=None,
                                                                         has_code=True)
    outcomes = gt[["condition", "thinking", "task_id", "problem_idx"]].assign(
        test_id="t", outcome=np.where(gt["condition"] == "buggy_code", "misleading", "effective"))
    return outcomes, gens, gt


@pytest.mark.slow
def test_an_edited_template_never_yields_a_comparison_across_prompt_versions(seeded_warehouse, monkeypatch,
                                                                               tmp_path) -> None:
    wh = seeded_warehouse
    plan = load_plan(settings.analysis_plan_path())
    prompts_dir = tmp_path / "prompts"
    shutil.copytree(Path(__file__).resolve().parents[2] / "prompts", prompts_dir)
    monkeypatch.setenv("EVALMISLEAD_PROMPTS_DIR", str(prompts_dir))
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "0-3")
    with FakeLLMServer() as fake:
        _run(fake.url, "buggy_code")
        _run(fake.url, "fixed_code")
        comparisons, _ = bootstrap_comparisons(*_analysis_inputs(wh), plan)
        assert comparisons["estimate"].notna().all()  # one template: compared as before
        template = prompts_dir / "test_generation.md"
        template.write_text(template.read_text() + "\nAlso test empty inputs.\n")
        _run(fake.url, "buggy_code")  # buggy_code only, with the new template
        comparisons, notes = bootstrap_comparisons(*_analysis_inputs(wh), plan)
        off = comparisons[comparisons["thinking"] == "off"]
        assert off["estimate"].isna().all() and not off["excludes_zero"].any()
        assert all(v.startswith("not comparable (prompt template differs: buggy_code ") for v in off["verdict"])
        assert any("buggy_code vs fixed_code not comparable" in n for n in notes)
        rates = condition_rates(*_analysis_inputs(wh), plan)
        assert rates["provenance_note"].isna().all() and rates["template_sha256"].nunique() == 2
        # the same edit, generated again on a slice only: buggy_code now holds two versions, so no rate
        template.write_text(template.read_text() + "\nAnd negative numbers.\n")
        monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "1")
        _run(fake.url, "buggy_code")
        rates = condition_rates(*_analysis_inputs(wh), plan)
        shown = made_with_table(rates).set_index("condition")  # the report's table of what made each cell
        assert shown.loc["buggy_code", "template"] == "mixed or unknown"
        assert shown.loc["fixed_code", "model"] == "fake-model" and shown.loc["fixed_code", "cap"] == "16"
        rates = rates.set_index("condition")
        note = rates.loc["buggy_code", "provenance_note"]
        assert note.startswith("mixed prompt templates (") and "x3" in note and "x1" in note, note
        assert np.isnan(rates.loc["buggy_code", "misleading_rate"]) and rates.loc["buggy_code", "n_tests"] == 4
        assert rates.loc["fixed_code", "effective_rate"] == 1.0


def test_a_server_that_now_serves_another_model_file_is_refused_in_one_line(seeded_warehouse, monkeypatch) -> None:
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "0-1")
    with FakeLLMServer() as fake:
        fake.model_path = "/models/coder-1.5b-q4.gguf"
        _run(fake.url, "buggy_code")
        sent = fake.chat_requests
        fake.model_path = "/other/place/coder-7b-q4.gguf"  # same alias, another model file behind the URL
        ok, lines = _run(fake.url, "fixed_code", raise_on_error=False)
        assert not ok and fake.chat_requests == sent  # nothing was sent
        (line,) = [x for x in lines if "serves coder-7b-q4.gguf" in x]
        assert "\n" not in line and "stored answers of model 'fake-model' came from coder-1.5b-q4.gguf (2 answers)" \
            in line, line
        assert _problems(wh, "fixed_code") == []
        fake.model_path = "/home/someone/else/coder-1.5b-q4.gguf"  # the same file in another folder is the same model
        assert _run(fake.url, "fixed_code")[0] and _problems(wh, "fixed_code") == [0, 1]


def test_the_generation_assets_code_version_is_their_templates_hash(monkeypatch, tmp_path) -> None:
    """An edited template changes the asset's code version, so the UI marks what the old one made stale."""
    prompts_dir = tmp_path / "prompts"
    shutil.copytree(Path(__file__).resolve().parents[2] / "prompts", prompts_dir)
    monkeypatch.setenv("EVALMISLEAD_PROMPTS_DIR", str(prompts_dir))
    before = generation.template_version("test_generation")
    assert before.startswith("generation-1+test_generation-") and len(before.rsplit("-", 1)[1]) == 12
    (prompts_dir / "test_generation.md").write_text("Write tests for {code}\n")
    assert generation.template_version("test_generation") != before
    assert generation.template_version("spec") != generation.template_version("test_generation")
