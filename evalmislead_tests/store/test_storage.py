import multiprocessing as mp
import time

import duckdb
import pandas as pd
import pytest

from evalmislead_assets.store.database import StorageLockTimeout, Warehouse


def _rows(cond: str, thinking: str, n: int, tag: str = "a") -> pd.DataFrame:
    return pd.DataFrame({
        "condition": [cond] * n, "thinking": [thinking] * n, "task_id": [f"Python/{i}" for i in range(n)],
        "problem_idx": list(range(n)), "test_id": [f"t_{tag}_{i}" for i in range(n)],
        "outcome": ["both_pass"] * n,
    })


def test_replace_rows_touches_only_its_partition(tmp_path) -> None:
    wh = Warehouse(tmp_path / "db.duckdb")
    wh.replace_rows("test_outcomes", _rows("buggy_code", "off", 3), {"condition": "buggy_code", "thinking": "off"})
    wh.replace_rows("test_outcomes", _rows("buggy_code", "on", 2), {"condition": "buggy_code", "thinking": "on"})
    wh.replace_rows("test_outcomes", _rows("buggy_code", "off", 1, "b"), {"condition": "buggy_code", "thinking": "off"})
    df = wh.query_df("SELECT thinking, test_id FROM test_outcomes ORDER BY thinking, test_id")
    assert df.values.tolist() == [["off", "t_b_0"], ["on", "t_a_0"], ["on", "t_a_1"]]


def test_failed_replace_leaves_old_rows(tmp_path) -> None:
    wh = Warehouse(tmp_path / "db.duckdb")
    wh.replace_rows("test_outcomes", _rows("fixed_code", "off", 2), {"condition": "fixed_code", "thinking": "off"})
    bad = _rows("fixed_code", "off", 1).assign(not_a_column=1)
    with pytest.raises(ValueError, match="not_a_column"):
        wh.replace_rows("test_outcomes", bad, {"condition": "fixed_code", "thinking": "off"})
    assert len(wh.read_table("test_outcomes")) == 2


def _hold_lock(path: str, seconds: float, ready) -> None:
    con = duckdb.connect(path)
    con.execute("CREATE TABLE IF NOT EXISTS holder (x INTEGER)")
    ready.set()
    time.sleep(seconds)
    con.close()


def test_writer_waits_for_another_process_lock(tmp_path) -> None:
    path = tmp_path / "db.duckdb"
    ready = mp.get_context("spawn").Event()
    proc = mp.get_context("spawn").Process(target=_hold_lock, args=(str(path), 2.0, ready))
    proc.start()
    assert ready.wait(30)
    t0 = time.monotonic()
    Warehouse(path).append_rows("test_outcomes", _rows("buggy_code", "off", 1))
    waited = time.monotonic() - t0
    proc.join()
    assert waited > 0.5  # it really waited for the lock instead of failing
    assert len(Warehouse(path).read_table("test_outcomes")) == 1


def test_lock_timeout_is_a_clear_error(tmp_path) -> None:
    path = tmp_path / "db.duckdb"
    ready = mp.get_context("spawn").Event()
    proc = mp.get_context("spawn").Process(target=_hold_lock, args=(str(path), 4.0, ready))
    proc.start()
    assert ready.wait(30)
    with pytest.raises(StorageLockTimeout, match="locked by another process"):
        Warehouse(path, lock_timeout_s=0.5).append_rows("test_outcomes", _rows("buggy_code", "off", 1))
    proc.join()


def test_read_only_on_missing_file_names_the_fix(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="EVALMISLEAD_DB"):
        with Warehouse(tmp_path / "none.duckdb").connect(read_only=True):
            pass


def test_many_threads_first_connect_to_one_new_file(tmp_path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "db.duckdb"

    def write(i: int) -> int:
        return Warehouse(path).append_rows("test_outcomes", _rows("buggy_code", "off", 1, f"t{i}"))

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(write, range(16))) == 16
    assert len(Warehouse(path).read_table("test_outcomes")) == 16
