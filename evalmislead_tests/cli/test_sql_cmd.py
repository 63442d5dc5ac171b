"""`evalmislead sql`: output formats, one-line errors, and reads while another process writes."""

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from evalmislead_assets.cli import main
from evalmislead_assets.store.database import Warehouse


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "study.duckdb"
    Warehouse(path).replace_rows("test_outcomes", pd.DataFrame({
        "condition": ["buggy_code", "buggy_code", "fixed_code"],
        "thinking": ["off", "off", "on"],
        "task_id": ["Python/30", "Python/30", "Python/0"],
        "test_id": ["test_a", "test_b[1]", "test_c\nsecond line"],
        "outcome": ["misleading", "both_pass", "effective"],
        "seconds": [0.25, 1.5, float("nan")],
    }))
    return path


def _sql(db: Path, *args: str) -> list[str]:
    return ["sql", "--db", str(db), *args]


def test_table_output(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(_sql(db, "select test_id, outcome, seconds from test_outcomes order by test_id"))
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[0].split(" | ")[0].strip() == "test_id"
    assert out[2].startswith("test_a ") and out[2].endswith("0.25")
    assert "test_c\\nsecond line" in out[4] and out[4].endswith("NULL")
    assert out[-1] == "(3 rows)"


def test_table_limit_and_width(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(_sql(db, "--limit", "1", "--width", "5", "select test_id from test_outcomes order by test_id desc"))
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[2] == "test…"
    assert out[-1].startswith("(1 row, more not shown")


def test_csv_and_json(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_sql(db, "--csv", "select test_id, seconds from test_outcomes order by test_id")) == 0
    frame = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    assert list(frame["test_id"]) == ["test_a", "test_b[1]", "test_c\nsecond line"]
    assert main(_sql(db, "--json", "select condition, count(*) n from test_outcomes group by all order by 1")) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"condition": "buggy_code", "n": 2}, {"condition": "fixed_code", "n": 1}
    ]


def test_views_and_snapshot(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_sql(db, "--snapshot", "--json", "select sum(n_misleading) m from problem_cells")) == 0
    assert json.loads(capsys.readouterr().out) == [{"m": 1}]
    assert sorted(p.name for p in db.parent.iterdir()) == ["study.duckdb"]  # the copy is gone


def test_save_snapshot_keeps_a_copy(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "snap" / "copy.duckdb"
    assert main(_sql(db, "--save-snapshot", str(copy), "--json", "select count(*) n from test_outcomes")) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 3}]
    Warehouse(db).execute("delete from test_outcomes")  # the live file moves on; the copy does not
    assert Warehouse(copy).query_df("select count(*) n from test_outcomes")["n"][0] == 3
    assert main(_sql(db, "--save-snapshot", str(db), "select 1")) == 2
    assert "is the live file" in capsys.readouterr().err


@pytest.mark.parametrize(("query", "message"), [
    ("delete from test_outcomes", "read-only"),
    ("select * from no_such_table", "no_such_table"),
])
def test_errors_are_one_line(db: Path, query: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_sql(db, query)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert Warehouse(db).query_df("select count(*) n from test_outcomes")["n"][0] == 3


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sql", "--db", str(tmp_path / "none.duckdb"), "select 1"]) == 2
    assert "no DuckDB file" in capsys.readouterr().err
    assert not (tmp_path / "none.duckdb").exists()


def _hold_write_lock(db: Path, seconds: float) -> subprocess.Popen:
    code = (f"import duckdb, sys, time; c = duckdb.connect({str(db)!r}); print('locked', flush=True); "
            f"time.sleep({seconds}); c.close()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_waits_for_a_writer_then_reads(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    holder = _hold_write_lock(db, 1.5)
    start = time.monotonic()
    rc = main(_sql(db, "--json", "select count(*) n from test_outcomes"))
    waited = time.monotonic() - start
    holder.wait(timeout=30)
    assert rc == 0 and json.loads(capsys.readouterr().out) == [{"n": 3}]
    assert waited > 0.5, "the query should have waited for the writer's lock"


def test_gives_up_after_wait(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    holder = _hold_write_lock(db, 5)
    try:
        assert main(_sql(db, "--wait", "0.5", "select 1")) == 2
        assert "stayed locked" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()


WRITER = textwrap.dedent("""
    import sys, pandas as pd
    from evalmislead_assets.store.database import Warehouse
    wh = Warehouse(sys.argv[1], lock_timeout_s=60)
    for i in range(1, int(sys.argv[2]) + 1):
        df = pd.DataFrame({"condition": "model_spec", "thinking": "on", "test_id": [f"w{i}_{j}" for j in range(i)]})
        wh.replace_rows("test_outcomes", df, where={"condition": "model_spec", "thinking": "on"})
    print("done", flush=True)
""")


@pytest.mark.slow
def test_reads_during_writes_see_whole_partitions(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A writer replaces one partition 60 times while we read it: every read succeeds and sees one whole write."""
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), "60"], stdout=subprocess.PIPE, text=True)
    seen = []
    while writer.poll() is None:
        q = ("select count(*) n, count(distinct split_part(test_id, '_', 1)) versions, "
             "max(split_part(test_id, '_', 1)) v from test_outcomes where condition = 'model_spec'")
        rc = main(_sql(db, "--json", "--wait", "300", q))  # a wait sized for a loaded 2-core machine
        out = capsys.readouterr()
        assert rc == 0, out.err
        seen.append(json.loads(out.out)[0])
    assert writer.wait(timeout=60) == 0 and writer.stdout.read().strip() == "done"
    assert len(seen) >= 2
    for row in seen:
        assert row["versions"] <= 1
        assert row["n"] == (int(row["v"][1:]) if row["v"] else 0)  # write i has exactly i rows
    final = Warehouse(db).query_df("select count(*) n from test_outcomes where condition = 'model_spec'")
    assert final["n"][0] == 60


# ---------------------------------------------------------------- read-only for real


@pytest.mark.parametrize(("make_query", "message"), [
    (lambda t: f"copy test_outcomes to '{t / 'out.csv'}'", "COPY statements are refused"),
    (lambda t: f"attach '{t / 'other.duckdb'}' as o (read_write)", "ATTACH statements are refused"),
    (lambda t: "install httpfs", "LOAD statements are refused"),
    (lambda t: "set enable_external_access = true", "SET statements are refused"),
    (lambda t: "call checkpoint()", "CALL statements are refused"),
    (lambda t: "pragma enable_profiling", "PRAGMA enable_profiling is refused"),
    (lambda t: "select 1; select 2", "one statement at a time (2 given)"),
    # a SELECT passes the statement check; the connection has no file access
    (lambda t: "select * from read_text('/etc/hostname')", "no file or network access"),
    (lambda t: f"select * from read_csv('{t / 'other.csv'}')", "no file or network access"),
])
def test_writes_files_and_external_access_are_refused(
    db: Path, tmp_path: Path, make_query, message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    other = Warehouse(tmp_path / "other.duckdb")
    other.append_rows("test_outcomes", pd.DataFrame({"condition": ["x"], "test_id": ["kept"]}))
    (tmp_path / "other.csv").write_text("a\n1\n", encoding="utf-8")
    assert main(_sql(db, make_query(tmp_path))) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out.csv").exists()
    assert other.query_df("select count(*) n from test_outcomes")["n"][0] == 1


@pytest.mark.parametrize("query", [
    "with t as (select * from test_outcomes) select count(*) n from t",
    "from test_outcomes select count(*) n",
    "describe test_outcomes",
    "show tables",
    "summarize test_outcomes",
    "explain select * from test_outcomes",
    "pragma table_info('test_outcomes')",
    "select * from storage_info",
])
def test_reading_statements_run(db: Path, query: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_sql(db, "--json", query)) == 0
    assert json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- interactive session


def _session(db: Path, stdin: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "sql", "--db", str(db), *extra],
                          input=stdin, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_no_query_opens_the_duckdb_cli_on_a_read_only_snapshot(db: Path) -> None:
    from evalmislead_assets.cli.sql_session import find_duckdb_cli

    assert find_duckdb_cli() is not None, "scripts/bootstrap.sh installs duckdb-cli into .venv/bin"
    res = _session(db, "select condition, count(*) as n from test_outcomes group by 1 order by 1;\n"
                       "select sum(n_misleading) as m from problem_cells;\n.quit\n")
    assert res.returncode == 0, res.stderr
    assert "DuckDB CLI" in res.stderr and "read-only snapshot" in res.stderr
    assert "buggy_code" in res.stdout and "fixed_code" in res.stdout
    assert sorted(p.name for p in db.parent.iterdir()) == ["study.duckdb"]  # no copy left, nothing written
    # the session cannot reach files nor change the snapshot
    res = _session(db, "select * from read_text('/etc/hostname');\ndelete from test_outcomes;\n")
    assert "disabled by configuration" in res.stderr and "read-only" in res.stderr
    assert Warehouse(db).query_df("select count(*) n from test_outcomes")["n"][0] == 3


def test_no_query_with_repl_runs_the_built_in_prompt(db: Path) -> None:
    res = _session(db, ".tables\nselect condition,\n  count(*) as n from test_outcomes\n  group by 1 order by 1;\n"
                       "copy test_outcomes to 'x.csv';\nselect 42 as answer;\n", "--repl")
    assert "SQL prompt" in res.stderr
    out = res.stdout
    assert "test_outcomes" in out and "live_rates" in out  # .tables lists tables and views
    assert "buggy_code |" in out and "(2 rows)" in out
    assert "error: this command is read-only: COPY statements are refused" in out
    assert "42" in out.splitlines()[-2]  # the session goes on after an error
    assert res.returncode == 1  # a statement failed


def test_duckdbs_own_hints_reach_the_user_in_one_line(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_sql(db, "select * from test_outcome")) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and 'Did you mean "test_outcomes"' in err
    assert main(_sql(db, "select outcomes from test_outcomes")) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Candidate bindings" in err and "outcome" in err
