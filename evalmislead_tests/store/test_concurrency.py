"""Several processes writing one DuckDB file at the same moment: no failure on the lock, no lost row.

DuckDB admits one writing process per file. The Warehouse never keeps the file
open: each write is one short transaction, and opening retries with jittered
backoff while another process holds the lock. These tests start real processes
at the same instant, first with bare Warehouse writes (and measure the lock wait),
then as four Dagster partition runs of the generation chain.
"""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evalmislead_assets.store.database import Warehouse

WRITER = textwrap.dedent("""
    import json, sys, time
    import pandas as pd
    from evalmislead_assets.store.database import Warehouse
    db, condition, n_writes, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    wh = Warehouse(db, lock_timeout_s=120)
    time.sleep(max(start_at - time.time(), 0))
    waits = []
    for i in range(n_writes):
        # one "answer" per call, as a generation run commits them, plus the partition replace of a finished step
        t = time.monotonic()
        wh.append_rows("llm_calls", pd.DataFrame({"call_id": [f"{condition}-{i}"], "condition": [condition], "thinking": ["on"]}))
        df = pd.DataFrame({"condition": condition, "thinking": "on", "task_id": [f"Python/{j}" for j in range(i + 1)]})
        wh.replace_rows("generated_tests", df, where={"condition": condition, "thinking": "on"})
        waits.append(time.monotonic() - t)
    print(json.dumps({"condition": condition, "max_s": max(waits), "mean_s": sum(waits) / len(waits)}), flush=True)
""")

CONDITIONS = ["buggy_code", "fixed_code", "model_spec", "signature_only"]


@pytest.mark.slow
def test_four_writer_processes_at_the_same_moment(tmp_path: Path) -> None:
    db = tmp_path / "study.duckdb"
    Warehouse(db).execute("select 1")  # create the schema once, as the problems asset would
    n_writes = 20
    start_at = time.time() + 2.0  # after every interpreter has imported pandas and duckdb
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(db), c, str(n_writes), str(start_at)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for c in CONDITIONS
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    wall = time.time() - start_at
    wh = Warehouse(db)
    calls = wh.query_df("select condition, count(*) n from llm_calls group by all")
    assert dict(zip(calls["condition"], calls["n"])) == dict.fromkeys(CONDITIONS, n_writes)
    tests = wh.query_df("select condition, count(*) n, count(distinct task_id) d from generated_tests group by all")
    assert dict(zip(tests["condition"], tests["n"])) == dict.fromkeys(CONDITIONS, n_writes)  # the last replace
    assert (tests["d"] == n_writes).all()
    worst = max(r["max_s"] for r in results)
    print(f"\n4 processes x {n_writes} (append + partition replace): wall {wall:.2f} s, "
          f"mean {1000 * sum(r['mean_s'] for r in results) / 4:.0f} ms, worst {1000 * worst:.0f} ms per write pair")


PARTITIONS = [f"{c}|off" for c in ["buggy_code", "fixed_code", "signature_only", "human_docstring"]]


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the runs' own 900 s limit, plus seeding problems and specs first
def test_four_partition_runs_started_together_all_succeed(tmp_path: Path, llama_server: str) -> None:
    """Four `dagster asset materialize` processes, one per partition of the generation chain, at once."""
    from dagster import AssetKey, DagsterEventType, DagsterInstance

    from evalmislead_tests.dagster_services import (
        BIN,
        CHAIN_ASSETS,
        PROJECT_ROOT,
        STUDY_ENV,
        grammar_run_config,
        materialize_thinking_mode,
    )

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes((PROJECT_ROOT / "dagster.yaml").read_bytes())
    db = tmp_path / "study.duckdb"
    env = {**STUDY_ENV, "EVALMISLEAD_PROBLEMS": "30,0", "EVALMISLEAD_DB": str(db),
           "EVALMISLEAD_HOME": str(tmp_path / "home"), "EVALMISLEAD_LLM_URL": llama_server}
    materialize_thinking_mode(home, env, "off", conditions=[], with_analysis=False)  # problems, validation, specs

    full_env = {**os.environ, **env, "DAGSTER_HOME": str(home)}
    cmd = [str(BIN / "dagster"), "asset", "materialize", "-m", "evalmislead_assets.definitions",
           "--select", ",".join(CHAIN_ASSETS), "--config-json", json.dumps(grammar_run_config()), "--partition"]
    start = time.monotonic()
    procs = {k: subprocess.Popen([*cmd, k], cwd=tmp_path, env=full_env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True) for k in PARTITIONS}
    outputs = {k: p.communicate(timeout=900)[0] for k, p in procs.items()}
    wall = time.monotonic() - start
    for k, p in procs.items():
        assert p.returncode == 0, f"{k}:\n{outputs[k][-4000:]}"

    wh = Warehouse(db)
    for key in PARTITIONS:
        condition = key.split("|")[0]
        where = [condition, "off"]
        gens = wh.query_df("SELECT task_id FROM test_generations WHERE condition = ? AND thinking = ?", where)
        assert sorted(gens["task_id"]) == ["Python/0", "Python/30"], key
        tests = wh.query_df("SELECT task_id, n_tests FROM generated_tests WHERE condition = ? AND thinking = ?", where)
        assert sorted(tests["task_id"]) == ["Python/0", "Python/30"], key
        outcomes = wh.query_df("SELECT count(*) n FROM test_outcomes WHERE condition = ? AND thinking = ?", where)
        assert outcomes["n"][0] == tests["n_tests"].sum() == 4, key  # two tests per answer, all executed
        calls = wh.query_df("SELECT count(DISTINCT task_id) n FROM llm_calls WHERE condition = ? AND thinking = ?"
                            " AND asset = 'test_generations' AND error IS NULL", where)
        assert calls["n"][0] == 2, key
    with DagsterInstance.from_config(str(home)) as instance:
        for asset in CHAIN_ASSETS:
            done = instance.get_latest_storage_id_by_partition(AssetKey(asset), DagsterEventType.ASSET_MATERIALIZATION)
            assert set(PARTITIONS) <= set(done), asset
    print(f"\n4 partition runs at once: all succeeded in {wall:.0f} s")
