"""Read-only SQL for `evalmislead sql`: one statement of a reading kind, on a connection that cannot
touch anything but the database file.

Two fences, each enough on its own for what it covers:

* the statement: exactly one, and of a kind that only reads (SELECT, including WITH, FROM-first,
  VALUES, DESCRIBE, SHOW, SUMMARIZE; EXPLAIN; and the catalog PRAGMAs below), checked with
  DuckDB's own parser before anything runs;
* the connection: opened read-only with ``enable_external_access = false`` (no file or network
  access: ``read_text('/etc/shadow')``, ``COPY ... TO``, ``ATTACH``, ``INSTALL`` all fail), extension
  autoloading off, and ``lock_configuration = true`` so no statement can switch any of it back.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import duckdb

from evalmislead_assets.errors import ConfigError
from evalmislead_assets.store.database import Warehouse

ALLOWED_TYPES = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN, duckdb.StatementType.PRAGMA}
# PRAGMAs that only describe the catalog
ALLOWED_PRAGMAS = {"table_info", "show_tables", "show_tables_expanded", "show", "database_size", "version",
                   "storage_info", "database_list", "functions", "collations", "metadata_info"}
KINDS = "SELECT/WITH/FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN or PRAGMA table_info"

SANDBOX_CONFIG: dict[str, Any] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}
# the same, as statements for the DuckDB CLI's -cmd (the CLI takes no config dict)
CLI_SANDBOX_SQL = ("SET enable_external_access = false; SET autoload_known_extensions = false; "
                   "SET autoinstall_known_extensions = false; SET lock_configuration = true;")

_PRAGMA_NAME = re.compile(r"^\s*PRAGMA\s+([A-Za-z_]\w*)", re.IGNORECASE)


_HINTS = ("Did you mean", "Candidate bindings", "HINT")


def _first_line(exc: BaseException) -> str:
    """DuckDB's message in one line, with its own hint ("Did you mean \"condition_rates\"?") kept."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    lines = text.splitlines()
    hints = [ln.strip() for ln in lines[1:] if ln.strip().startswith(_HINTS)]
    return " ".join([lines[0], *hints])


def check_statement(sql: str) -> str:
    """``sql`` when it is one reading statement; else ConfigError with one line naming what is allowed."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise ConfigError(f"SQL error: {_first_line(exc)}") from None
    if not statements:
        raise ConfigError("no SQL statement given; e.g. \"select * from live_rates\"")
    if len(statements) > 1:
        raise ConfigError(f"one statement at a time ({len(statements)} given); run them one by one")
    stmt = statements[0]
    kind = stmt.type
    if kind not in ALLOWED_TYPES:
        name = str(kind).rsplit(".", 1)[-1]
        hint = "; `evalmislead export` writes tables to files" if name in ("COPY", "EXPORT") else ""
        raise ConfigError(f"this command is read-only: {name} statements are refused, only {KINDS}{hint}")
    if kind == duckdb.StatementType.PRAGMA:
        m = _PRAGMA_NAME.match(stmt.query)
        if m is None or m.group(1).lower() not in ALLOWED_PRAGMAS:
            raise ConfigError(f"this command is read-only: PRAGMA {m.group(1) if m else ''} is refused, only {KINDS}")
    return sql


def warehouse(path: Path, wait_s: float = 120.0) -> Warehouse:
    """The file, opened only through read-only sandboxed connections."""
    return Warehouse(path, lock_timeout_s=wait_s, extra_config=SANDBOX_CONFIG)


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


def execute(con: Any, sql: str, max_rows: int | None) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """(columns, rows, more rows exist) of one checked statement on an open sandboxed connection."""
    check_statement(sql)
    try:
        con.execute(sql)
    except duckdb.Error as exc:
        first = _first_line(exc)
        hint = (" (this command is read-only)" if "read-only" in first
                else " (this command has no file or network access)" if "disabled by configuration" in first else "")
        raise ConfigError(f"SQL error: {first}{hint}") from None
    if con.description is None:
        return [], [], False
    columns = [d[0] for d in con.description]
    if max_rows is None:
        return columns, con.fetchall(), False
    rows = con.fetchmany(max_rows + 1)
    more = len(rows) > max_rows
    if hasattr(con, "abort"):
        con.abort()  # DuckDB 2 wants a result fetched to the end or abandoned before the next statement
    return columns, rows[:max_rows], more


def run_query(wh: Warehouse, sql: str, max_rows: int | None) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    with wh.connect(read_only=True) as con:
        return execute(con, sql, max_rows)
