"""`evalmislead sql "<query>"`: read-only SQL on the study's DuckDB file, safe while runs write to it.

DuckDB lets one process write a file, and a writer cannot open it while another
process has it open at all. So this command never keeps the file: it opens a
read-only connection (retrying while a writer holds the lock), runs the query,
fetches the result and closes, usually within milliseconds; writers retry in the
same way meanwhile (storage.Warehouse). For long queries, --snapshot copies the
file under the read lock and queries the copy, so writers wait only for the copy.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from evalmislead_assets import settings
from evalmislead_assets.settings import ConfigError
from evalmislead_assets.storage import StorageLockTimeout, Warehouse

HELP = "run a read-only SQL query on the DuckDB file (safe during a backfill); prints a table, CSV or JSON"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="SQL, e.g. \"select condition, thinking, count(*) from test_outcomes group by all\"")
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


def run(args: argparse.Namespace) -> int:
    path = Path(args.db).expanduser().resolve() if args.db else settings.db_path()
    if not path.exists():
        raise ConfigError(f"no DuckDB file at {path}; materialize an asset first, or set EVALMISLEAD_DB / --db")
    max_rows = None if (args.csv or args.json) else max(args.limit, 0)
    try:
        columns, rows, more = query(
            path, args.query, max_rows=max_rows, wait_s=args.wait, snapshot=args.snapshot,
            save_snapshot=Path(args.save_snapshot).expanduser().resolve() if args.save_snapshot else None,
        )
    except StorageLockTimeout as exc:
        raise ConfigError(f"{path} stayed locked by a writer for {args.wait:.0f} s; retry, or raise --wait") from exc
    out = sys.stdout
    if args.csv:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_csv(v) for v in r] for r in rows])
    elif args.json:
        json.dump([dict(zip(columns, (_plain(v) for v in r))) for r in rows], out, default=str, ensure_ascii=False)
        out.write("\n")
    else:
        out.write(format_table(columns, rows, args.width))
        shown = f"({len(rows)} row{'s' if len(rows) != 1 else ''}"
        out.write(shown + (", more not shown: use --limit, --csv or --json)\n" if more else ")\n"))
    return 0


def query(
    path: Path, sql: str, max_rows: int | None = None, wait_s: float = 120.0, snapshot: bool = False,
    save_snapshot: Path | None = None,
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """(columns, rows, more_rows_exist) of one read-only query; the file is held only while it runs."""
    wh = Warehouse(path, lock_timeout_s=wait_s)
    if save_snapshot is not None:
        if save_snapshot == path:
            raise ConfigError(f"--save-snapshot {save_snapshot} is the live file; choose another path")
        copy_under_read_lock(wh, save_snapshot)
        return _run_query(Warehouse(save_snapshot), sql, max_rows)
    if snapshot:
        with tempfile.TemporaryDirectory(prefix="evalmislead-snapshot-") as tmp:
            copy = Path(tmp) / path.name
            copy_under_read_lock(wh, copy)
            return _run_query(Warehouse(copy), sql, max_rows)
    return _run_query(wh, sql, max_rows)


def copy_under_read_lock(wh: Warehouse, target: Path) -> None:
    """A consistent copy of the DuckDB file: while we hold the shared read lock no writer has it open."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with wh.connect(read_only=True):
        shutil.copyfile(wh.path, target)
        wal = wh.path.with_name(wh.path.name + ".wal")
        target_wal = target.with_name(target.name + ".wal")
        if wal.exists():
            shutil.copyfile(wal, target_wal)
        elif target_wal.exists():
            target_wal.unlink()


def _run_query(wh: Warehouse, sql: str, max_rows: int | None) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    with wh.connect(read_only=True) as con:
        try:
            con.execute(sql)
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            hint = " (this command is read-only)" if "read-only" in first else ""
            raise ConfigError(f"SQL error: {first}{hint}") from None
        if con.description is None:
            return [], [], False
        columns = [d[0] for d in con.description]
        if max_rows is None:
            return columns, con.fetchall(), False
        rows = con.fetchmany(max_rows + 1)
        return columns, rows[:max_rows], len(rows) > max_rows


def _plain(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v


def _csv(v: Any) -> Any:
    """A CSV cell: a list (e.g. generated_tests.test_ids, VARCHAR[]) as a JSON array."""
    v = _plain(v)
    return json.dumps(v, default=str, ensure_ascii=False) if isinstance(v, (list, dict)) else v


def _cell(v: Any, width: int) -> str:
    text = "NULL" if v is None else str(v)
    text = text.replace("\r", "").replace("\n", "\\n").replace("\t", " ")
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int = 60) -> str:
    """Aligned text table: numbers right-aligned, long cells cut with an ellipsis."""
    if not columns:
        return "(no result set)\n"
    cells = [[_cell(v, width) for v in r] for r in rows]
    numeric = [
        all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) for r in rows if r[i] is not None)
        and any(r[i] is not None for r in rows)
        for i in range(len(columns))
    ]
    widths = [max([len(_cell(c, width))] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return " | ".join(
            (v.rjust(w) if num else v.ljust(w)) for v, w, num in zip(values, widths, numeric)
        ).rstrip() + "\n"

    out = [line([_cell(c, width) for c in columns]), "-+-".join("-" * w for w in widths) + "\n"]
    out += [line(r) for r in cells]
    return "".join(out)

