"""DuckDB storage: short-lived connections with lock retry, atomic partition writes, views.

DuckDB lets one process at a time hold a file open for writing. Long runs (hours of
generation) therefore never keep a connection: every read or write opens the file,
does one short transaction and closes it, retrying with backoff while another
process holds the lock. No run fails on the lock unless it is held for longer than
``lock_timeout_s`` (default 30 minutes), and each answer is committed as it arrives.

New files are created in a storage version DuckDB 1.x readers open (``file_format``); a file
in DuckDB 2.x's own format is migrated once. Faults (full disk, a file deleted or replaced
mid-run, a long lock wait) are one line each (``faults``); strings DuckDB cannot store
are escaped on write and recorded in ``storage_repairs`` (``text_repair``).
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from evalmislead_assets.store import file_format
from evalmislead_assets.store.faults import (  # re-exported: callers import them from here
    FileIdentities,
    LockWaitReporter,
    StorageCorrupt,
    StorageDiskFull,
    StorageError,
    StorageFileGone,
    StorageFileReplaced,
    StorageLockTimeout,
    damaged,
    damaged_words,
    disk_full,
    disk_full_message,
)
from evalmislead_assets.store.schema import MODEL_COLUMN, PER_MODEL_TABLES, TABLES
from evalmislead_assets.store.text_repair import Repair, sanitise_frame, sanitise_params

__all__ = [
    "IDENTITIES", "StorageCorrupt", "StorageDiskFull", "StorageError", "StorageFileGone", "StorageFileReplaced",
    "ReadOnlyWarehouse", "StorageLockTimeout",
    "StudyConnection", "Warehouse", "ensure_schema", "record_repairs",
]

_LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "database is locked", "lock on file")
# This process already has the file open with the other read_only setting (DuckDB keeps one
# database instance per file and process): a writer waits for the short read to close.
_CONFIG_MARKERS = ("different configuration",)


# One DuckDB database per file per process: threads share it, and two threads creating
# the schema at once would conflict on the catalog, so schema creation is serialised.
_SCHEMA_LOCK = threading.Lock()
_SCHEMA_DONE: dict[Path, int] = {}  # path -> number of tables declared when its schema was made
_FORMAT_LOCK = threading.Lock()
_FORMAT_CHECKED: set[Path] = set()  # files whose storage format this process has checked (and migrated)
# the identity (inode, database id) of every file this process opened: a deleted or replaced file stops the run
IDENTITIES = FileIdentities()


def _is_lock_error(exc: BaseException) -> bool:
    return any(m in str(exc) for m in _LOCK_MARKERS)


def _is_config_clash(exc: BaseException) -> bool:
    return any(m in str(exc) for m in _CONFIG_MARKERS)


class ReadOnlyWarehouse(RuntimeError):
    """A write through a Warehouse opened with ``read_only=True``."""


class Warehouse:
    """One DuckDB file; every method opens, works and closes.

    Every open checks the file is the one this process opened before (``IDENTITIES``); every write
    escapes strings DuckDB cannot store and records the repair; a full disk raises ``StorageDiskFull``
    with the OS error; a lock wait prints a line every ``lock_report_every_s`` seconds.
    """

    def __init__(
        self, path: str | os.PathLike[str], lock_timeout_s: float = 1800.0, lock_report_every_s: float = 30.0,
        report: Callable[[str], None] | None = None, extra_config: Mapping[str, Any] | None = None,
        read_only: bool = False,
    ) -> None:
        """``extra_config``: more DuckDB settings for every connection (e.g. `sql_readonly.SANDBOX_CONFIG`);
        such a connection is never swapped for this process's read-write one.

        ``read_only``: every connection is opened read-only and nothing else: no schema update, no format
        migration, never this process's read-write instance, and a write raises ``ReadOnlyWarehouse``; the
        file's bytes stay as they are (a reader beside a run, e.g. `evalmislead results --check`)."""
        self.path = Path(path).expanduser().resolve()
        self.extra_config = dict(extra_config or {})
        self.read_only = read_only
        self.lock_timeout_s = lock_timeout_s
        self.lock_report_every_s = lock_report_every_s
        self.report = report  # where lock-wait and migration lines go (default: stderr)
        self._schema_ready = False

    def _say(self, line: str) -> None:
        if self.report is not None:
            self.report(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def _open(self, read_only: bool) -> tuple[duckdb.DuckDBPyConnection, bool]:
        """A connection, retrying while another process holds the lock; (connection, opened read-only)."""
        deadline = time.monotonic() + self.lock_timeout_s
        waits = LockWaitReporter(self.path, self.lock_timeout_s, self.lock_report_every_s, self._say)
        delay = 0.02
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only,
                                      config={**file_format.connect_config(), **self.extra_config}), read_only
            except duckdb.Error as exc:
                if read_only and not self.extra_config and not self.read_only and _is_config_clash(exc):
                    # this process holds the file read-write already (and so the lock): reading
                    # through that database instance waits on nobody
                    read_only = False
                    continue
                if disk_full_message(exc):
                    raise disk_full(self.path, exc, "opening") from exc
                if damaged_words(exc):
                    raise damaged(self.path, exc) from None
                if not (_is_lock_error(exc) or _is_config_clash(exc)):
                    raise
                if time.monotonic() > deadline:
                    raise StorageLockTimeout(
                        f"{self.path} stayed locked by another process for {self.lock_timeout_s:.0f} s; "
                        "stop the other writer or raise lock_timeout_s"
                    ) from exc
                waits.waiting(exc, read_only)
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 1.6, 1.0)

    def _migrate_format(self) -> None:
        """Once per process: a file in DuckDB 2.x's own storage format is rewritten in the 1.x-readable one."""
        if self.path in _FORMAT_CHECKED:
            return
        with _FORMAT_LOCK:  # threads of this process wait for one migration (they would share its instance)
            if self.path in _FORMAT_CHECKED:
                return
            if file_format.needs_migration(self.path):
                con, _ = self._open(read_only=False)
                try:  # checked again under the lock: another process may have migrated it meanwhile
                    notice = (file_format.migrate_open_file(con, self.path, TABLES["storage_info"])
                              if file_format.needs_migration(self.path) else None)
                finally:
                    con.close()
                if notice:
                    _SCHEMA_DONE.pop(self.path, None)
                    IDENTITIES.forget(self.path)  # replaced by this process, knowingly: the copy is the file now
                    self._say(notice)
            _FORMAT_CHECKED.add(self.path)

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[StudyConnection]:
        if self.read_only and not read_only:
            raise ReadOnlyWarehouse(f"{self.path} was opened read-only: this command writes nothing to it")
        IDENTITIES.check_exists(self.path)
        if read_only and not self.path.exists():
            raise FileNotFoundError(f"no DuckDB file at {self.path}; materialize an asset first or set EVALMISLEAD_DB")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not read_only:
            self._migrate_format()
        con, read_only = self._open(read_only)
        failed = False
        try:
            IDENTITIES.check_open(self.path, os.stat(self.path), lambda: file_format.database_id(con))
            first = IDENTITIES.known(self.path) is None
            if not read_only and not self._schema_ready:
                with _SCHEMA_LOCK:
                    # again when a module registered more tables since, or the file was replaced
                    if _SCHEMA_DONE.get(self.path) != len(TABLES) or not _table_exists(con, "test_outcomes"):
                        ensure_schema(con)
                        file_format.record_storage_info(con)
                        _SCHEMA_DONE[self.path] = len(TABLES)
                self._schema_ready = True
                first = True  # the database id may have just been written
            if first:
                IDENTITIES.record(self.path, os.stat(self.path), file_format.database_id(con))
            yield StudyConnection(con)
        except (duckdb.Error, OSError) as exc:
            failed = True
            if disk_full_message(exc) and not isinstance(exc, StorageDiskFull):
                raise disk_full(self.path, exc, "writing") from exc
            if damaged_words(exc) and not isinstance(exc, StorageError):
                raise damaged(self.path, exc) from None
            raise
        except BaseException:
            failed = True
            raise
        finally:
            try:
                con.close()  # checkpoints: can hit a full disk too
            except (duckdb.Error, OSError) as exc:
                if not failed:
                    if disk_full_message(exc):
                        raise disk_full(self.path, exc, "closing") from exc
                    raise

    def query_df(self, sql: str, params: list[Any] | None = None, read_only: bool = True) -> pd.DataFrame:
        """Run one query, read-only by default: a shared read lock, never the writer's (see
        ``read_connection``); ``read_only=False`` for a statement that writes."""
        if read_only:
            with self.read_connection() as con:
                return con.execute(sql, params or []).df()
        with self.connect() as con:
            return con.execute(sql, params or []).df()

    def ensure_schema(self) -> None:
        """Create the file and its tables once per process (a short read-write connection)."""
        if self.path.exists() and _SCHEMA_DONE.get(self.path) == len(TABLES):
            return
        with self.connect():
            pass

    @contextlib.contextmanager
    def read_connection(self) -> Iterator[StudyConnection]:
        """A read-only connection: never takes the write lock, so it waits only for a writer's short
        transaction (writers commit row by row), and any number of readers run side by side.

        The schema is made current first (once per process, read-write); a table missing since (dropped
        by hand) falls back to one read-write connection that recreates it. A file deleted or replaced
        since stops with ``StorageFileGone`` / ``StorageFileReplaced`` (see ``connect``).
        """
        if self.read_only:  # the file as it is: a table it lacks fails the query that reads it
            with self.connect(read_only=True) as con:
                yield con
            return
        self.ensure_schema()
        with self.connect(read_only=True) as con:
            if _table_exists(con, "test_outcomes"):
                yield con
                return
        self._schema_ready = False
        _SCHEMA_DONE.pop(self.path, None)
        with self.connect() as con:
            yield con

    def execute(self, sql: str, params: list[Any] | None = None) -> None:
        with self.connect() as con:
            con.execute(sql, params or [])

    def table_exists(self, name: str) -> bool:
        with self.connect() as con:
            return _table_exists(con, name)

    def replace_rows(self, table: str, df: pd.DataFrame, where: Mapping[str, Any] | None = None) -> int:
        """Delete the rows matching ``where`` (all rows if None) and insert ``df``, in one transaction."""
        return self.replace_partitions(table, df, None if where is None else [where])

    def append_rows(self, table: str, df: pd.DataFrame) -> int:
        with self.connect() as con:
            _insert(con, table, df)
        return len(df)

    def replace_partitions(self, table: str, df: pd.DataFrame, wheres: Sequence[Mapping[str, Any]] | None) -> int:
        """Delete the rows of every partition in ``wheres`` (all rows if None) and insert ``df``, in one
        transaction: an empty ``df`` still clears them."""
        with self.connect() as con, con.transaction():
            for where in (wheres if wheres is not None else [None]):
                clause, params = _where(where)
                con.execute(f"DELETE FROM {table}{clause}", params)
            _insert(con, table, df)
        return len(df)

    def name_unnamed_rows(self, model_name: str) -> dict[str, int]:
        """Give rows without a model (from a DuckDB file written before rows named their model) ``model_name``, in one
        transaction; returns the rows named per table (nothing when every row has its model)."""
        counts = {}
        with self.read_connection() as con:
            for table in PER_MODEL_TABLES:
                n = con.execute(f"SELECT count(*) FROM {table} WHERE {MODEL_COLUMN} IS NULL").fetchone()
                if n and n[0]:
                    counts[table] = int(n[0])
        if counts:
            with self.connect() as con, con.transaction():
                for table in counts:
                    con.execute(f"UPDATE {table} SET {MODEL_COLUMN} = ? WHERE {MODEL_COLUMN} IS NULL", [model_name])
        return counts

    def read_table(
        self, table: str, where: Mapping[str, Any] | None = None, order_by: str | None = None,
        read_only: bool = True, columns: list[str] | None = None,
    ) -> pd.DataFrame:
        clause, params = _where(where)
        order = f" ORDER BY {order_by}" if order_by else ""
        cols = ", ".join(columns) if columns else "*"
        return self.query_df(f"SELECT {cols} FROM {table}{clause}{order}", params, read_only=read_only)


def _where(where: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
    if not where:
        return "", []
    parts: list[str] = []
    params: list[Any] = []
    for k, v in where.items():
        if isinstance(v, (list, tuple, set, frozenset)):  # any of these values
            values = sorted(v)
            parts.append(f"{k} IN ({', '.join('?' * len(values))})" if values else "false")
            params.extend(values)
        else:
            parts.append(f"{k} = ?")
            params.append(v)
    return " WHERE " + " AND ".join(parts), params


def _insert(con: StudyConnection | duckdb.DuckDBPyConnection, table: str, df: pd.DataFrame) -> None:
    if df is None or len(df) == 0:
        return
    known = [c for c, _ in TABLES.get(table, [])]
    if known:
        extra = [c for c in df.columns if c not in known]
        if extra:
            raise ValueError(f"columns {extra} are not in table {table}; add them to schema.TABLES")
    df, repairs = sanitise_frame(table, df)
    con.register("_incoming", df)
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _incoming")
    finally:
        con.unregister("_incoming")
    record_repairs(con, repairs)


def record_repairs(con: StudyConnection | duckdb.DuckDBPyConnection, repairs: Sequence[Repair]) -> None:
    """One ``storage_repairs`` row per repaired column, in the caller's transaction."""
    raw = con.raw if isinstance(con, StudyConnection) else con
    for r in repairs:
        raw.execute("INSERT INTO storage_repairs (ts, table_name, column_name, n_values, repair, first_row) "
                    "VALUES (now()::TIMESTAMP, ?, ?, ?, ?, ?)", [r.table, r.column, r.n_values, r.repair, r.first_row])


class StudyConnection:
    """A DuckDB connection whose ``execute`` makes string parameters storable (``storage_text``) and records
    the repair; everything else is the connection's own. ``transaction()``: BEGIN ... COMMIT, and on an
    error a ROLLBACK that never hides the error (after a failed commit DuckDB has no transaction left)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.raw = con

    def execute(self, query: str, parameters: Any = None) -> duckdb.DuckDBPyConnection:
        if parameters is None:
            return self.raw.execute(query)
        params, repairs = sanitise_params(query, parameters)
        result = self.raw.execute(query, params)
        if repairs:
            record_repairs(self.raw, repairs)
        return result

    def executemany(self, query: str, parameters: Any = None) -> duckdb.DuckDBPyConnection:
        if not parameters:
            return self.raw.executemany(query, parameters or [])
        cleaned = [sanitise_params(query, row) for row in parameters]
        result = self.raw.executemany(query, [p for p, _ in cleaned])
        record_repairs(self.raw, [r for _, rs in cleaned for r in rs])
        return result

    @contextlib.contextmanager
    def transaction(self) -> Iterator[StudyConnection]:
        self.raw.execute("BEGIN TRANSACTION")
        try:
            yield self
            self.raw.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # "cannot rollback - no transaction is active" after a
                self.raw.execute("ROLLBACK")          # failed commit: the original error is the one to see
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def _table_exists(con: duckdb.DuckDBPyConnection | StudyConnection, name: str) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'main' AND table_name = ?", [name]
        ).fetchall()[0][0]
    )


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create missing tables, append missing columns, (re)create views."""
    for name, columns in TABLES.items():
        cols = ", ".join(f"{c} {t}" for c, t in columns)
        con.execute(f"CREATE TABLE IF NOT EXISTS {name} ({cols})")
        have = {r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema='main' AND table_name = ?", [name]
        ).fetchall()}
        for c, t in columns:
            if c not in have:
                con.execute(f"ALTER TABLE {name} ADD COLUMN {c} {t.replace(' PRIMARY KEY', '')}")
    from evalmislead_assets.store.views import VIEWS  # views may reference any table above

    for name, sql in VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
