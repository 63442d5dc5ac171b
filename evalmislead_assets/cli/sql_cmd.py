"""`evalmislead sql "<query>"`: read-only SQL on the study's DuckDB file, safe while runs write to it.

DuckDB lets one process write a file, and a writer cannot open it while another
process has it open at all. So this command never keeps the file: it opens a
read-only connection (retrying while a writer holds the lock), runs the query,
fetches the result and closes, usually within milliseconds; writers retry in the
same way meanwhile (store/database.py, Warehouse). For long queries, --snapshot copies the
file under the read lock and queries the copy, so writers wait only for the copy.

Read-only for real (`sql_readonly`): one statement of a reading kind, on a connection with
external access off and its configuration locked. With no query: an interactive session on a
read-only snapshot (`cli/sql_session.py`).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from evalmislead_assets import settings
from evalmislead_assets.cli.sql_output import csv_cell, format_table, plain, rows_note
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.store import sql_readonly
from evalmislead_assets.store.database import StorageError, StorageLockTimeout

HELP = ("run a read-only SQL query on the DuckDB file (safe during a backfill); prints a table, CSV or JSON; "
        "with no query, opens an interactive session on a read-only snapshot")

__all__ = ["add_arguments", "run", "query", "format_table"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="?", default=None,
                        help="one SQL statement, e.g. \"select condition, thinking, count(*) from test_outcomes group "
                             "by all\"; leave out for an interactive session")
    parser.add_argument("--db", default="", help="DuckDB file (default: EVALMISLEAD_DB or data/evalmislead.duckdb)")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="print CSV with a header row")
    fmt.add_argument("--json", action="store_true", help="print a JSON array of row objects")
    parser.add_argument("--snapshot", action="store_true",
                        help="copy the file under the read lock and query the copy (for long queries)")
    parser.add_argument("--save-snapshot", default="", metavar="PATH",
                        help="like --snapshot, but keep the copy at PATH (e.g. for an interactive duckdb session)")
    parser.add_argument("--wait", type=float, default=120.0, metavar="S",
                        help="seconds to keep retrying while a writer holds the lock (default 120)")
    parser.add_argument("--limit", type=int, default=200, metavar="N",
                        help="rows shown in table output (default 200; CSV/JSON print all)")
    parser.add_argument("--width", type=int, default=60, metavar="N", help="widest column in table output")
    parser.add_argument("--repl", action="store_true",
                        help="with no query: the built-in prompt even where the DuckDB CLI is installed")


def run(args: argparse.Namespace) -> int:
    path = Path(args.db).expanduser().resolve() if args.db else settings.db_path()
    if not path.exists():
        raise ConfigError(f"no DuckDB file at {path}; materialize an asset first, or set EVALMISLEAD_DB / --db")
    try:
        if args.query is None:
            from evalmislead_assets.cli.sql_session import interactive

            return interactive(path, wait_s=args.wait, force_repl=args.repl, width=args.width, limit=args.limit)
        max_rows = None if (args.csv or args.json) else max(args.limit, 0)
        columns, rows, more = query(
            path, args.query, max_rows=max_rows, wait_s=args.wait, snapshot=args.snapshot,
            save_snapshot=Path(args.save_snapshot).expanduser().resolve() if args.save_snapshot else None,
        )
    except StorageLockTimeout as exc:
        raise ConfigError(f"{path} stayed locked by a writer for {args.wait:.0f} s; retry, or raise --wait") from exc
    except StorageError as exc:
        raise ConfigError(str(exc)) from exc
    out = sys.stdout
    if args.csv:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[csv_cell(v) for v in r] for r in rows])
    elif args.json:
        json.dump([dict(zip(columns, (plain(v) for v in r))) for r in rows], out, default=str, ensure_ascii=False)
        out.write("\n")
    else:
        out.write(format_table(columns, rows, args.width))
        out.write(rows_note(len(rows), more))
    return 0


def query(
    path: Path, sql: str, max_rows: int | None = None, wait_s: float = 120.0, snapshot: bool = False,
    save_snapshot: Path | None = None,
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """(columns, rows, more_rows_exist) of one read-only query; the file is held only while it runs."""
    sql_readonly.check_statement(sql)  # refused before any file is opened or copied
    wh = sql_readonly.warehouse(path, wait_s)
    if save_snapshot is not None:
        if save_snapshot == path:
            raise ConfigError(f"--save-snapshot {save_snapshot} is the live file; choose another path")
        sql_readonly.copy_under_read_lock(wh, save_snapshot)
        return sql_readonly.run_query(sql_readonly.warehouse(save_snapshot), sql, max_rows)
    if snapshot:
        with tempfile.TemporaryDirectory(prefix="evalmislead-snapshot-") as tmp:
            copy = Path(tmp) / path.name
            sql_readonly.copy_under_read_lock(wh, copy)
            return sql_readonly.run_query(sql_readonly.warehouse(copy), sql, max_rows)
    return sql_readonly.run_query(wh, sql, max_rows)
