"""Two real models in one study: each answers through its own embedded llama-server, both models'
rows sit side by side in one DuckDB file, the cross-model assets average them, and re-materializing one
model leaves the other's rows byte-identical.

Each model runs the whole chain `evalmislead run` runs (run_study's lists: specs, the generation chain with
coverage and mutation scores, every analysis asset, spec_labels among them, and the report), then the
cross-model assets: the multi-asset spec_labels must run for every prefixed model, which a chain without it
would not check."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetKey, AssetsDefinition, DagsterInstance, materialize

from evalmislead_assets import study_models
from evalmislead_assets.cli import run_plan
from evalmislead_assets.llm.llama_server import smollm2_model
from evalmislead_assets.store.schema import PER_MODEL_TABLES
from evalmislead_tests.dagster_services import GET_POSITIVE_GRAMMAR, grammar_run_config

# task 30 again (the buggy version keeps only the negatives), two tests that pass on both versions
BOTH_PASS_GRAMMAR = (
    r'root ::= "```python\nfrom solution import get_positive\n\n\ndef test_p" [a-z]{0,6} "():\n'
    r'    assert get_positive([0]) == []\n\n\ndef test_q" [a-z]{0,6} "():\n'
    r'    assert get_positive([]) == []\n```\n"'
)
CONDITIONS = ("buggy_code", "fixed_code")


def _by_key(defs) -> dict[AssetKey, AssetsDefinition]:
    return {k: a for a in defs.assets if isinstance(a, AssetsDefinition) for k in a.keys}


def _materialize(defs, keys: list[AssetKey], resources: dict, **kw) -> None:
    """The assets of ``keys`` with every other asset of the graph as a stored source."""
    assets = _by_key(defs)
    wanted = list(dict.fromkeys(assets[k] for k in keys))  # a multi-asset once, whichever of its keys
    deps = {d for a in wanted for d in a.dependency_keys} - set(keys)
    sources = [assets[d].to_source_asset(d) for d in deps]
    result = materialize([*wanted, *sources], selection=keys, resources=resources,
                         instance=DagsterInstance.ephemeral(), **kw)
    assert result.success


def _model_rows(wh, model: str) -> dict[str, pd.DataFrame]:
    return {t: wh.query_df(f"SELECT * FROM {t} WHERE model_name = ? ORDER BY ALL", [model]) for t in PER_MODEL_TABLES}


@pytest.mark.slow
@pytest.mark.timeout(3600)  # two real models, each through its whole chain, on a loaded 2-core machine
def test_two_models_side_by_side_and_one_rerun_leaves_the_other_untouched(
    seeded_warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalmislead_assets.definitions import build
    from evalmislead_assets.resources import (
        EmbeddedServerResource,
        LLMResource,
        StudySettingsResource,
        WarehouseIOManager,
        WarehouseResource,
    )

    study_file = tmp_path / "study.toml"
    study_file.write_text(
        f'[[models]]\nname = "smollm2-135m"\ngguf = "{smollm2_model().path}"\nparameters = "135M"\n'
        'family = "Qwen2.5-Coder"\n\n'  # one "family" here, so that the size table has two rows
        '[[models]]\nname = "qwen2.5-coder-0.5b"\nbundled = "qwen2.5-coder-0.5b"\nslots = 1\n'
    )
    for name, value in {"EVALMISLEAD_STUDY": str(study_file), "EVALMISLEAD_PROBLEMS": "30",
                        "EVALMISLEAD_MAX_TOKENS_OFF": "128", "EVALMISLEAD_MAX_TOKENS_ON": "64",
                        "EVALMISLEAD_PROBE_N": "1", "EVALMISLEAD_JUDGE_MAX_TOKENS": "32"}.items():
        monkeypatch.setenv(name, value)
    for name in ("EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL", "EVALMISLEAD_MODELS"):
        monkeypatch.delenv(name, raising=False)
    study_models.reset()
    try:
        study = study_models.study()
        defs = build(study)
        server = EmbeddedServerResource()
        resources = {"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                     "study_settings": StudySettingsResource(),
                     "embedded_server": server, "llm": LLMResource(embedded_server=server),
                     "judge_llm": LLMResource(embedded_server=server)}
        wh = seeded_warehouse

        # the steps `evalmislead run` takes, from the definitions
        plan = run_plan.build_plan(defs.resolve_asset_graph(), study.names, list(study.languages), ["off"],
                                   list(CONDITIONS), ["mutation"])

        def run_model(key: str, grammar: str) -> None:
            for step in plan.of_model(study.by_key(key).name):
                if step.specs_only:
                    _materialize(defs, list(step.keys), resources, partition_key=step.partition)
                elif step.partition is not None:
                    _materialize(defs, list(step.keys), resources, partition_key=step.partition,
                                 run_config=grammar_run_config(grammar))
                else:
                    _materialize(defs, list(step.keys), resources)

        try:
            _materialize(defs, [AssetKey("mutants")], resources)  # model-free: the mutation scores' input
            run_model("smollm2_135m", GET_POSITIVE_GRAMMAR)
            run_model("qwen2_5_coder_0_5b", GET_POSITIVE_GRAMMAR)
            _materialize(defs, [k for s in plan.across for k in s.keys], resources)

            gens = wh.query_df("SELECT model_name, model, condition, count(*) AS n FROM test_generations "
                               "GROUP BY ALL ORDER BY ALL")
            assert gens["model_name"].tolist() == ["qwen2.5-coder-0.5b"] * 2 + ["smollm2-135m"] * 2
            served = dict(zip(gens["model_name"], gens["model"]))
            assert served == {"qwen2.5-coder-0.5b": "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M",
                              "smollm2-135m": "SmolLM2-135M-Instruct.Q4_1"}  # two real servers answered
            cells = wh.query_df("SELECT model_name, condition, outcome, count(*) AS n FROM test_outcomes "
                                "GROUP BY ALL ORDER BY ALL")
            # the grammar's two tests: misleading + effective in every cell, for both models
            assert len(cells) == 8 and set(cells["outcome"]) == {"misleading", "effective"}
            rates = wh.query_df("SELECT * FROM model_rates ORDER BY model_name, condition")
            assert rates["model_name"].tolist() == ["qwen2.5-coder-0.5b"] * 2 + ["smollm2-135m"] * 2
            assert (rates["misleading_rate"] == 0.5).all() and rates["misleading_ci_low"].notna().all()
            avg = wh.query_df("SELECT * FROM model_average WHERE kind = 'rate' AND metric = 'misleading_rate'")
            assert (avg["n_models"] == 2).all() and (avg["pooled"] == 0.5).all() and (avg["mean"] == 0.5).all()
            sizes = wh.query_df("SELECT model_name FROM model_sizes ORDER BY size_rank, condition")
            assert sizes["model_name"].tolist() == ["smollm2-135m"] * 2 + ["qwen2.5-coder-0.5b"] * 2
            report = (Path(tmp_path / "home") / "report" / "models.md").read_text()
            assert "smollm2-135m" in report and "qwen2.5-coder-0.5b" in report and "Average over models" in report
            assert "Replication on the average over models" in report
            # the whole chain ran for both models: every analysis table, the judge's labels and each report
            for table in ("spec_labels", "spec_label_splits", "condition_rates", "bootstrap_comparisons",
                          "test_coverage", "mutation_scores", "determinism_probe"):
                models = wh.query_df(f"SELECT DISTINCT model_name FROM {table} ORDER BY 1")["model_name"].tolist()
                assert models == ["qwen2.5-coder-0.5b", "smollm2-135m"], table
            for key in ("smollm2_135m", "qwen2_5_coder_0_5b"):
                assert (Path(tmp_path / "home") / "report" / key / "report.md").is_file()

            # one model again, with other answers: only its rows move
            qwen_before = _model_rows(wh, "qwen2.5-coder-0.5b")
            smol_before = _model_rows(wh, "smollm2-135m")
            run_model("smollm2_135m", BOTH_PASS_GRAMMAR)
            qwen_after = _model_rows(wh, "qwen2.5-coder-0.5b")
            for table in PER_MODEL_TABLES:
                pd.testing.assert_frame_equal(qwen_before[table], qwen_after[table], obj=table)
            smol = wh.query_df("SELECT outcome, count(*) AS n FROM test_outcomes WHERE model_name = 'smollm2-135m' "
                               "GROUP BY ALL ORDER BY ALL")
            assert smol["outcome"].tolist() == ["both_pass"] and smol["n"].tolist() == [4]  # the new answers' tests
            assert not smol_before["test_outcomes"].equals(_model_rows(wh, "smollm2-135m")["test_outcomes"])
        finally:
            server.stop()
    finally:
        study_models.reset()
