"""The partitioned jobs, their thinking-mode slices, and `dagster job backfill` on them."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, MultiPartitionKey, RunsFilter

from evalmislead_assets import jobs
from evalmislead_assets.definitions import defs
from evalmislead_assets.partitions import condition_thinking_partitions, thinking_partitions

ROOT = Path(__file__).resolve().parents[2]


def test_thinking_partition_keys_split_the_grid() -> None:
    on, off = jobs.thinking_partition_keys("on"), jobs.thinking_partition_keys("off")
    assert len(on) == len(off) == 6
    assert sorted(on + off) == sorted(condition_thinking_partitions.get_partition_keys())
    assert all(k.endswith("|on") for k in on)
    keys = {str(k): k for k in condition_thinking_partitions.get_partition_keys()}
    assert {keys[k].keys_by_dimension["thinking"] for k in on} == {"on"}
    assert sorted(on) == sorted(condition_thinking_partitions.get_multipartition_keys_with_dimension_value("thinking", "on"))


def test_asset_partition_keys() -> None:
    assert jobs.asset_partition_keys(thinking_partitions, "on") == ["on"]
    assert jobs.asset_partition_keys(condition_thinking_partitions, "off") == jobs.thinking_partition_keys("off")
    with pytest.raises(ValueError, match="not a thinking-partitioned asset"):
        jobs.asset_partition_keys(None, "on")
    with pytest.raises(ValueError, match="not one of"):
        jobs.thinking_partition_keys("maybe")


def test_jobs_select_by_partitions_leaving_the_optional_assets_out() -> None:
    chain = defs.resolve_job_def("generation_chain_job")
    assert chain.partitions_def == condition_thinking_partitions
    # every condition x thinking asset but the optional mutation steps
    assert chain.asset_layer.executable_asset_keys == {
        AssetKey(a) for a in ("test_generations", "generated_tests", "test_outcomes", "test_coverage")}
    assert chain.executor_def.name == "in_process"
    specs = defs.resolve_job_def("model_specs_job")
    assert specs.partitions_def == thinking_partitions
    assert specs.asset_layer.executable_asset_keys == {AssetKey("model_specs")}
    assert isinstance(condition_thinking_partitions.get_partition_key_from_str("buggy_code|on"), MultiPartitionKey)


def test_the_backfill_default_is_the_jobs_python_assets_in_dependency_order() -> None:
    from evalmislead_assets.cli.backfill_cmd import default_assets

    names = default_assets()
    assert names[0] == "model_specs" and set(names) == {
        "model_specs", "test_generations", "generated_tests", "test_outcomes", "test_coverage"}
    assert names.index("test_generations") < names.index("generated_tests") < names.index("test_outcomes")


def test_every_selection_takes_a_multi_asset_whole() -> None:
    """A multi-asset (spec_labels, reasoning_mentions, mutation_scores and their side tables) is one step: each
    job and each step of `evalmislead run` that selects one of its tables selects all of them."""
    from evalmislead_assets import study_models
    from evalmislead_assets.cli import run_plan

    graph = defs.resolve_asset_graph()
    study = study_models.study()
    plan = run_plan.build_plan(graph, study.names, list(study.languages), ["off"], ["buggy_code"], ["mutation"])
    multi = {k for k in graph.get_all_asset_keys() if len(graph.get(k).execution_set_asset_keys) > 1}
    assert {k.to_user_string() for k in multi} >= {
        "spec_labels", "spec_label_agreement", "spec_label_splits", "reasoning_mentions",
        "reasoning_mention_matches", "reasoning_mention_summary", "mutation_scores", "mutant_kills"}
    selections = [[k.to_user_string() for k in step.keys] for step in plan.steps] + [
                  *([k.to_user_string() for k in j.asset_layer.executable_asset_keys]
                    for j in (defs.resolve_job_def("generation_chain_job"), defs.resolve_job_def("model_specs_job")))]
    for names in selections:
        keys = {AssetKey(n) for n in names}
        for key in keys:
            assert graph.get(key).execution_set_asset_keys <= keys, (key, names)


def test_module_prints_the_keys_for_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "evalmislead_assets.jobs", "on"], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out.split(",") == jobs.thinking_partition_keys("on")


@pytest.mark.slow
def test_dagster_job_backfill_queues_only_thinking_on_runs(tmp_path: Path) -> None:
    """Route 2 of the README: the CLI queues one run per *|on partition for the daemon; nothing else."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(ROOT / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home), "EVALMISLEAD_DB": str(tmp_path / "study.duckdb")}
    keys = ",".join(jobs.thinking_partition_keys("on"))
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "job", "backfill", "-w", str(ROOT / "workspace.yaml"),
         "-j", "generation_chain_job", "--partitions", keys, "--noprompt"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Launched backfill job" in proc.stdout
    with DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs(RunsFilter(job_name="generation_chain_job"))
        assert sorted(r.tags["dagster/partition"] for r in runs) == sorted(jobs.thinking_partition_keys("on"))
        assert {r.status for r in runs} == {DagsterRunStatus.QUEUED}  # the daemon starts them
        assert all(r.asset_selection is None for r in runs)  # each run executes the whole chain job
        assert {r.tags["dagster/partition/thinking"] for r in runs} == {"on"}
        assert len(instance.get_runs()) == 6
