"""`evalmislead sql` with no query: an interactive session on a read-only snapshot of the study file.

The live file is copied under the shared read lock (writers wait only for the copy) into a
temporary folder, and the session runs on the copy, so it never holds the live file open nor asks
for its lock. The client is the DuckDB CLI where one is installed (the bootstrap puts
``duckdb-cli`` in ``.venv/bin``), opened ``-readonly`` with external access off and the
configuration locked; elsewhere, or with ``--repl``, a small prompt that runs each statement
through the same read-only checks as ``evalmislead sql "<query>"``. The copy is deleted at the end.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import duckdb

from evalmislead_assets.cli.sql_output import format_table, rows_note
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.store import sql_readonly
from evalmislead_assets.store.file_format import STORAGE_VERSION, needs_migration

if TYPE_CHECKING:
    from evalmislead_assets.store.database import StudyConnection

HELP_TEXT = (".tables  list tables and views\n.schema TABLE  its columns\n.quit / .exit / end of input  leave\n"
             "Statements end with ';' and may span lines; only reading statements run "
             f"({sql_readonly.KINDS}).\n")


def find_duckdb_cli() -> Path | None:
    """The DuckDB CLI beside this interpreter (``.venv/bin/duckdb``), else the one on PATH."""
    here = Path(sys.executable).parent / "duckdb"
    if here.is_file() and os.access(here, os.X_OK):
        return here
    found = shutil.which("duckdb")
    return Path(found) if found else None


def interactive(path: Path, wait_s: float = 120.0, force_repl: bool = False, width: int = 60,
                limit: int = 200) -> int:
    taken = dt.datetime.now().strftime("%H:%M:%S")
    with tempfile.TemporaryDirectory(prefix="evalmislead-session-") as tmp:
        snap = Path(tmp) / path.name
        sql_readonly.copy_under_read_lock(sql_readonly.warehouse(path, wait_s), snap)
        cli = None if force_repl else find_duckdb_cli()
        note = ""
        if cli is not None and needs_migration(snap):
            note = (f" (the file is in DuckDB 2.x's storage format, which the DuckDB CLI at {cli} may not read: "
                    f"any `evalmislead run` step migrates it to {STORAGE_VERSION})")
            cli = None
        where = f"read-only snapshot of {path} taken at {taken}; the live file is not held"
        if cli is not None:
            print(f"evalmislead: DuckDB CLI {cli} on a {where}; .quit to leave", file=sys.stderr, flush=True)
            return subprocess.call([str(cli), "-readonly", "-cmd", sql_readonly.CLI_SANDBOX_SQL, str(snap)])
        print(f"evalmislead: SQL prompt on a {where}{note}; .help for help, .quit to leave",
              file=sys.stderr, flush=True)
        return repl(snap, sys.stdin, sys.stdout, width=width, limit=limit)


def repl(snapshot: Path, stdin: TextIO, out: TextIO, width: int = 60, limit: int = 200) -> int:
    """Read statements from ``stdin`` until ``.quit`` or end of input; rc 1 when any statement failed."""
    wh = sql_readonly.warehouse(snapshot)
    prompt = stdin.isatty()
    failed = False
    with wh.connect(read_only=True) as con:
        buffer: list[str] = []
        while True:
            if prompt:
                out.write("evalmislead> " if not buffer else "       ...> ")
                out.flush()
            line = stdin.readline()
            if not line:  # end of input: run what is left
                if "".join(buffer).strip():
                    failed |= not _run(con, "".join(buffer), out, width, limit)
                break
            if not buffer and line.strip().startswith("."):
                command = line.strip()
                if command in (".quit", ".exit", ".q"):
                    break
                failed |= not _dot(con, command, out, width, limit)
                continue
            buffer.append(line)
            if line.rstrip().endswith(";"):
                failed |= not _run(con, "".join(buffer), out, width, limit)
                buffer = []
    return 1 if failed else 0


def _dot(con: duckdb.DuckDBPyConnection | StudyConnection, command: str, out: TextIO, width: int, limit: int) -> bool:
    name, _, arg = command.partition(" ")
    if name == ".help":
        out.write(HELP_TEXT)
        return True
    if name == ".tables":
        return _run(con, "SELECT table_name AS name, table_type AS kind FROM information_schema.tables "
                         "WHERE table_schema = 'main' ORDER BY table_name", out, width, limit)
    if name == ".schema" and arg.strip():
        return _run(con, f"DESCRIBE {arg.strip()}", out, width, limit)
    out.write(f"error: unknown command {command}; .help lists them\n")
    return False


def _run(con: duckdb.DuckDBPyConnection | StudyConnection, sql: str, out: TextIO, width: int, limit: int) -> bool:
    try:
        columns, rows, more = sql_readonly.execute(con, sql, max_rows=limit)
    except ConfigError as exc:
        out.write(f"error: {exc}\n")
        out.flush()
        return False
    out.write(format_table(columns, rows, width))
    if columns:
        out.write(rows_note(len(rows), more))
    out.flush()
    return True
