"""Storage faults, each one clear line: a full disk keeps the OS error, a DB file deleted,
moved or replaced mid-run stops the run, a lock wait says what it waits for, and strings DuckDB cannot
store are escaped and recorded instead of failing the partition."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from evalmislead_assets.store.database import IDENTITIES, StorageFileGone, StorageFileReplaced, Warehouse
from evalmislead_assets.store.text_repair import escape_surrogates

ROOT = Path(__file__).resolve().parents[2]


def _outcomes(n: int, cond: str = "buggy_code", tag: str = "t") -> pd.DataFrame:
    return pd.DataFrame({"condition": cond, "thinking": "off", "task_id": [f"Python/{i}" for i in range(n)],
                         "problem_idx": list(range(n)), "test_id": [f"{tag}_{i}" for i in range(n)],
                         "outcome": "both_pass"})


# ---------------------------------------------------------------- a full disk (item 6)

DISK_FULL = textwrap.dedent("""
    import sys, pandas as pd
    from evalmislead_assets.store.database import StorageDiskFull, Warehouse
    wh = Warehouse(sys.argv[1])
    wh.append_rows("test_outcomes", pd.DataFrame({"condition": ["c"], "test_id": ["t"]}))
    big = pd.DataFrame({"condition": "buggy_code", "thinking": "off",
                        "buggy_detail": [("x%d" % i) * 300 for i in range(20000)]})
    for how in ("replace_partitions", "own transaction"):
        try:
            if how == "replace_partitions":
                wh.replace_rows("test_outcomes", big, {"condition": "buggy_code", "thinking": "off"})
            else:  # the pattern llm_client uses: BEGIN ... COMMIT with a ROLLBACK on any error
                with wh.connect() as con:
                    con.execute("BEGIN TRANSACTION")
                    try:
                        con.register("_big", big)
                        con.execute("INSERT INTO test_outcomes BY NAME SELECT * FROM _big")
                        con.execute("COMMIT")
                    except BaseException:
                        con.execute("ROLLBACK")
                        raise
            print(how, "no error")
        except StorageDiskFull as exc:
            print(how, "|", exc)
    print("rows", len(wh.read_table("test_outcomes", read_only=True)))
""")


def test_a_full_disk_shows_the_os_error_not_the_rollback(tmp_path: Path) -> None:
    """On a 2 MiB tmpfs (a private mount namespace): the write fails with "No space left on device"."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a small tmpfs in a private mount namespace")
    mnt = tmp_path / "small"
    mnt.mkdir()
    script = tmp_path / "fill.py"
    script.write_text(DISK_FULL, encoding="utf-8")
    cmd = (f"mount -t tmpfs -o size=2m tmpfs {mnt} && cd {ROOT} && "
           f"{sys.executable} {script} {mnt / 'db.duckdb'}")
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", cmd],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = dict(line.split(" | ", 1) for line in res.stdout.splitlines() if " | " in line)
    assert set(lines) == {"replace_partitions", "own transaction"}, res.stdout
    for message in lines.values():
        assert message.startswith("No space left on device while writing") and "cannot rollback" not in message
        assert "free space on that disk" in message and "\n" not in message
    assert "rows 1" in res.stdout  # the row committed before is still there


# ---------------------------------------------------------------- the file's identity (item 11)


def test_a_file_deleted_mid_run_stops_the_run_instead_of_writing_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    Warehouse(path).append_rows("test_outcomes", _outcomes(2))
    os.remove(path)
    with pytest.raises(StorageFileGone) as exc:
        Warehouse(path).append_rows("test_outcomes", _outcomes(1))
    assert "deleted or moved while this run used it" in str(exc.value) and "\n" not in str(exc.value)
    assert not path.exists()  # nothing was recreated
    with pytest.raises(StorageFileGone):
        Warehouse(path).read_table("test_outcomes", read_only=True)


def test_a_file_moved_away_stops_the_run(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    wh = Warehouse(path)
    wh.append_rows("test_outcomes", _outcomes(2))
    os.rename(path, tmp_path / "elsewhere.duckdb")
    with pytest.raises(StorageFileGone):
        wh.replace_rows("test_outcomes", _outcomes(1), {"condition": "buggy_code", "thinking": "off"})
    assert not path.exists()


def test_a_file_replaced_mid_run_stops_the_run(tmp_path: Path) -> None:
    path, other = tmp_path / "db.duckdb", tmp_path / "other.duckdb"
    Warehouse(path).append_rows("test_outcomes", _outcomes(2))
    Warehouse(other).append_rows("test_outcomes", _outcomes(5))
    os.replace(other, path)
    with pytest.raises(StorageFileReplaced) as exc:
        Warehouse(path).append_rows("test_outcomes", _outcomes(1))
    assert "replaced by another file" in str(exc.value)
    with duckdb.connect(str(path), read_only=True) as con:  # the replacement was not written to
        assert con.execute("SELECT count(*) FROM test_outcomes").fetchall()[0][0] == 5
    IDENTITIES.forget(path)  # a deliberate switch to the new file
    Warehouse(path).append_rows("test_outcomes", _outcomes(1, "fixed_code"))


def test_the_same_database_rewritten_in_place_is_accepted(tmp_path: Path) -> None:
    """A copy of the same database (same id in storage_info) under the name, e.g. after a format migration."""
    path = tmp_path / "db.duckdb"
    Warehouse(path).append_rows("test_outcomes", _outcomes(2))
    shutil.copyfile(path, tmp_path / "copy.duckdb")
    os.replace(tmp_path / "copy.duckdb", path)  # new inode, same database
    Warehouse(path).append_rows("test_outcomes", _outcomes(1, "fixed_code"))
    assert len(Warehouse(path).read_table("test_outcomes")) == 3


# ---------------------------------------------------------------- lock waits say what they wait for (item 9)


def test_a_lock_wait_prints_what_it_waits_for(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    Warehouse(path).append_rows("test_outcomes", _outcomes(1))
    code = (f"import duckdb, time; c = duckdb.connect({str(path)!r}); print('locked', flush=True); "
            "time.sleep(1.5); c.close()")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        lines: list[str] = []
        Warehouse(path, lock_report_every_s=0.3, report=lines.append).append_rows("test_outcomes", _outcomes(1))
    finally:
        holder.wait(timeout=30)
    assert lines, "no progress line while waiting for the lock"
    assert all(str(path) in line and "DuckDB lock" in line and "to write" in line for line in lines)
    assert f"held by pid {holder.pid}" in lines[0]


# ---------------------------------------------------------------- strings DuckDB cannot store (item 10)


def test_a_lone_surrogate_is_escaped_and_recorded_as_a_repair(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "db.duckdb")
    frame = pd.DataFrame({
        "condition": "buggy_code", "thinking": "off", "task_id": ["Python/1", "Python/2"], "problem_idx": [1, 2],
        "response_text": pd.Series(["ok \ud800 half", "fine"], dtype=object),
    })
    wh.replace_rows("test_generations", frame, {"condition": "buggy_code", "thinking": "off"})
    stored = wh.read_table("test_generations", order_by="task_id")["response_text"].tolist()
    assert stored == ["ok \\ud800 half", "fine"]
    lists = pd.DataFrame({"condition": ["c"], "thinking": ["off"], "task_id": ["Python/3"],
                          "test_ids": [["test_\udfff", "test_b"]]})
    wh.append_rows("generated_tests", lists)
    assert wh.read_table("generated_tests")["test_ids"].iloc[0].tolist() == ["test_\\udfff", "test_b"]
    repairs = wh.read_table("storage_repairs", order_by="ts")
    assert repairs[["table_name", "column_name", "n_values"]].values.tolist() == [
        ["test_generations", "response_text", 1], ["generated_tests", "test_ids", 1]]
    assert json.loads(repairs["first_row"].iloc[0]) == {"condition": "buggy_code", "thinking": "off",
                                                        "task_id": "Python/1"}


def test_a_surrogate_in_statement_parameters_is_escaped_in_the_callers_transaction(tmp_path: Path) -> None:
    """The way llm.client stores an answer: parameters of an INSERT inside BEGIN ... COMMIT."""
    wh = Warehouse(tmp_path / "db.duckdb")
    body = json.dumps({"choices": [{"message": {"content": "x\ud800"}}]}, ensure_ascii=False)
    with wh.connect() as con:
        con.execute("BEGIN TRANSACTION")
        con.execute("INSERT INTO llm_cache (cache_key, request_json, response_json) VALUES (?, ?, ?)",
                    ["k1", "{}", body])
        con.execute("COMMIT")
    stored = wh.read_table("llm_cache")["response_json"].iloc[0]
    assert stored == body.replace("\ud800", "\\ud800")
    assert json.loads(stored)["choices"][0]["message"]["content"] == "x\ud800"  # the JSON still says what came
    repair = wh.read_table("storage_repairs").iloc[0]
    assert (repair["table_name"], repair["column_name"]) == ("llm_cache", "response_json")
    assert json.loads(repair["first_row"]) == {"cache_key": "k1"}


def test_escape_leaves_valid_text_alone() -> None:
    text = "naïve 😀 \\ud800 already escaped"
    assert escape_surrogates(text) == text
    assert escape_surrogates("\ud83d\ude00") == "\\ud83d\\ude00"  # a pair that was never joined


def test_an_answer_with_a_lone_surrogate_is_stored_as_a_test_generations_row(tmp_path: Path) -> None:
    """The whole answer path: the server's JSON (``"\\ud800"``) -> ChatResult -> the asset's rows -> DuckDB."""
    from evalmislead_assets.assets.generation import _rows
    from evalmislead_assets.llm.prompts import Rendered
    from evalmislead_assets.llm.types import result_from_response

    response = json.loads('{"choices": [{"message": {"content": "def test_a():\\n    assert f() == \\"\\ud800\\""},'
                          ' "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 7}}')
    result = result_from_response('{"model": "m"}', "k1", response, latency_s=0.1, server_url="http://x",
                                  props_sha=None, from_cache=False)
    problems = pd.DataFrame({"task_id": ["Python/30"], "problem_idx": [30]})
    rows = _rows(problems, [Rendered("prompt", "test_generation.md", "t" * 64, "p" * 64)], [result])
    rows.insert(0, "condition", "buggy_code")
    rows.insert(1, "thinking", "off")
    wh = Warehouse(tmp_path / "db.duckdb")
    wh.replace_rows("test_generations", rows, {"condition": "buggy_code", "thinking": "off"})
    stored = wh.read_table("test_generations")["response_text"].iloc[0]
    assert stored == 'def test_a():\n    assert f() == "\\ud800"'
    assert wh.read_table("storage_repairs")["column_name"].tolist() == ["response_text"]
