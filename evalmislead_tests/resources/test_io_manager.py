"""The warehouse IO manager: partition replace, empty frames, partition mapping, read-only loads, lineage."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import warnings

import pandas as pd
import pytest
from dagster import AssetIn, AssetKey, DagsterInstance, MultiToSingleDimensionPartitionMapping, asset, materialize

from evalmislead_assets.partitions import condition_thinking_partitions, partition_key, thinking_partitions
from evalmislead_assets.resources import WarehouseIOManager
from evalmislead_assets.store.database import StorageLockTimeout, Warehouse

OUTCOMES: dict[str, pd.DataFrame] = {}  # what the test asset returns, per partition key
SEEN: dict[str, pd.DataFrame] = {}  # what downstream test assets were given


def _rows(n: int, tag: str) -> pd.DataFrame:  # no partition columns: the IO manager fills them
    return pd.DataFrame({"task_id": [f"Python/{i}" for i in range(n)], "problem_idx": list(range(n)),
                         "test_id": [f"t_{tag}_{i}" for i in range(n)], "outcome": ["both_pass"] * n})


@asset(name="test_outcomes", partitions_def=condition_thinking_partitions)
def outcomes_asset(context) -> pd.DataFrame:
    return OUTCOMES[str(context.partition_key)]


@asset
def reads_all(test_outcomes: pd.DataFrame) -> None:
    SEEN["all"] = test_outcomes


@asset(name="model_specs", partitions_def=thinking_partitions, metadata={"partition_expr": "thinking"})
def specs_asset(context) -> pd.DataFrame:
    return pd.DataFrame({"task_id": ["Python/0"], "problem_idx": [0], "spec_text": [f"spec {context.partition_key}"]})


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _SAME_THINKING = MultiToSingleDimensionPartitionMapping(partition_dimension_name="thinking")


@asset(partitions_def=condition_thinking_partitions,
       ins={"model_specs": AssetIn(partition_mapping=_SAME_THINKING, metadata={"columns": ["thinking", "spec_text"]})})
def reads_specs(model_specs: pd.DataFrame) -> None:
    SEEN["specs"] = model_specs


def _run(assets, key=None, selection=None, path=None):
    return materialize(assets, selection=selection, partition_key=key, instance=DagsterInstance.ephemeral(),
                       resources={"io_manager": WarehouseIOManager(path=str(path))})


def test_output_replaces_exactly_its_partition_and_an_empty_frame_clears_it(tmp_path) -> None:
    db = tmp_path / "db.duckdb"
    wh = Warehouse(db)
    for key, n, tag in [(partition_key("buggy_code", "off"), 3, "a"), (partition_key("buggy_code", "on"), 2, "a"),
                        (partition_key("buggy_code", "off"), 1, "b")]:
        OUTCOMES[str(key)] = _rows(n, tag)
        assert _run([outcomes_asset], key, path=db).success
    df = wh.query_df("SELECT condition, thinking, test_id FROM test_outcomes ORDER BY thinking, test_id")
    assert df.values.tolist() == [["buggy_code", "off", "t_b_0"], ["buggy_code", "on", "t_a_0"],
                                  ["buggy_code", "on", "t_a_1"]]
    OUTCOMES["buggy_code|on"] = _rows(0, "c")
    assert _run([outcomes_asset], partition_key("buggy_code", "on"), path=db).success
    assert wh.query_df("SELECT thinking FROM test_outcomes")["thinking"].tolist() == ["off"]


def test_rows_of_another_partition_are_refused(tmp_path) -> None:
    OUTCOMES["fixed_code|off"] = _rows(1, "x").assign(condition="buggy_code", thinking="off")
    result = materialize([outcomes_asset], partition_key=partition_key("fixed_code", "off"),
                         instance=DagsterInstance.ephemeral(), raise_on_error=False,
                         resources={"io_manager": WarehouseIOManager(path=str(tmp_path / "db.duckdb"))})
    assert not result.success


def test_unpartitioned_downstream_reads_every_partition(tmp_path) -> None:
    db = tmp_path / "db.duckdb"
    for c, t, n in [("buggy_code", "off", 2), ("fixed_code", "on", 3)]:
        OUTCOMES[f"{c}|{t}"] = _rows(n, c)
        assert _run([outcomes_asset], partition_key(c, t), path=db).success
    assert _run([outcomes_asset, reads_all], selection=[reads_all], path=db).success
    seen = SEEN["all"]
    assert len(seen) == 5 and set(zip(seen["condition"], seen["thinking"])) == {("buggy_code", "off"),
                                                                                ("fixed_code", "on")}
    assert list(seen.columns)[:4] == ["condition", "thinking", "task_id", "problem_idx"]  # the table's order


def test_thinking_only_upstream_is_read_for_the_same_thinking_mode(tmp_path) -> None:
    db = tmp_path / "db.duckdb"
    for t in ("off", "on"):
        assert _run([specs_asset], t, path=db).success
    rows = Warehouse(db).read_table("model_specs", order_by="thinking")
    assert rows["thinking"].tolist() == ["off", "on"] and rows["spec_text"].tolist() == ["spec off", "spec on"]
    assert _run([specs_asset, reads_specs], partition_key("model_spec", "on"), selection=[reads_specs], path=db).success
    assert SEEN["specs"].values.tolist() == [["on", "spec on"]]  # projected to the input's columns


HOLD_READ_ONLY = textwrap.dedent("""
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1], read_only=True)
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
""")


def test_loads_use_read_only_connections(tmp_path) -> None:
    """Another process holds the file read-only (as a reader would): a write waits, a load does not."""
    db = tmp_path / "db.duckdb"
    OUTCOMES["buggy_code|off"] = _rows(4, "r")
    assert _run([outcomes_asset], partition_key("buggy_code", "off"), path=db).success
    holder = subprocess.Popen([sys.executable, "-c", HOLD_READ_ONLY, str(db), "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(StorageLockTimeout):  # the write lock is not to be had
            Warehouse(db, lock_timeout_s=1.0).execute("DELETE FROM test_outcomes WHERE false")
        start = time.monotonic()
        assert _run([outcomes_asset, reads_all], selection=[reads_all], path=db).success
        assert len(SEEN["all"]) == 4 and time.monotonic() - start < 30
        ro = Warehouse(db, lock_timeout_s=1.0)
        assert len(ro.read_table("test_outcomes", read_only=True)) == 4
        assert len(ro.query_df("SELECT * FROM test_outcomes", read_only=True)) == 4
    finally:
        holder.kill()
        holder.wait()


def test_the_asset_graph_has_every_dependency_an_asset_reads() -> None:
    from evalmislead_assets.definitions import defs

    graph = defs.resolve_asset_graph()

    def parents(name: str) -> set[str]:
        return {k.to_user_string() for k in graph.get(AssetKey(name)).parent_keys}

    assert {"test_outcomes", "generated_tests", "test_generations", "problems", "condition_rates",
            "bootstrap_comparisons", "spec_labels", "reasoning_mentions", "model_specs"} <= parents("study_report")
    assert parents("problem_validation") == {"problems"}
    assert parents("model_specs") == {"problems", "problem_validation"}
    assert parents("test_generations") == {"problems", "problem_validation", "model_specs"}
    assert parents("generated_tests") == {"test_generations", "problems"}
    assert parents("test_outcomes") == {"generated_tests", "problems"}
    for name in ("condition_rates", "bootstrap_comparisons", "truncation_matched_subset"):
        assert parents(name) == {"test_outcomes", "generated_tests", "test_generations"}
    assert {"generated_tests", "mutants", "problems"} <= parents("mutation_scores")
    # side tables are assets: computed with their table from its inputs, and read by the report as inputs
    assert parents("mutant_kills") == parents("mutation_scores")
    assert parents("spec_label_splits") == parents("spec_labels")
    assert parents("reasoning_mention_summary") == parents("reasoning_mentions")
    assert {"spec_label_agreement", "spec_label_splits", "reasoning_mention_summary"} <= parents("study_report")
    assert {"generated_tests", "problems"} <= parents("test_coverage")
    assert {"test_generations", "problems"} <= parents("determinism_probe")
    mapping = graph.get(AssetKey("test_generations")).partition_mappings.get(AssetKey("model_specs"))
    assert isinstance(mapping, MultiToSingleDimensionPartitionMapping)
