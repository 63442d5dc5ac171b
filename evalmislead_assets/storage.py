"""DuckDB storage: short-lived connections with lock retry, atomic partition writes, views.

DuckDB lets one process at a time hold a file open for writing. Long runs (hours of
generation) therefore never keep a connection: every read or write opens the file,
does one short transaction and closes it, retrying with backoff while another
process holds the lock. No run fails on the lock unless it is held for longer than
``lock_timeout_s`` (default 30 minutes), and each answer is committed as it arrives.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from evalmislead_assets.schema import TABLES

_LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "database is locked", "lock on file")
# This process already has the file open with the other read_only setting (DuckDB keeps one
# database instance per file and process): a writer waits for the short read to close.
_CONFIG_MARKERS = ("different configuration",)


# One DuckDB database per file per process: threads share it, and two threads creating
# the schema at once would conflict on the catalog, so schema creation is serialised.
_SCHEMA_LOCK = threading.Lock()
_SCHEMA_DONE: dict[Path, int] = {}  # path -> number of tables declared when its schema was made


class StorageLockTimeout(RuntimeError):
    pass


def _is_lock_error(exc: BaseException) -> bool:
    return any(m in str(exc) for m in _LOCK_MARKERS)


def _is_config_clash(exc: BaseException) -> bool:
    return any(m in str(exc) for m in _CONFIG_MARKERS)


class Warehouse:
    """One DuckDB file; every method opens, works and closes."""

    def __init__(self, path: str | os.PathLike[str], lock_timeout_s: float = 1800.0) -> None:
        self.path = Path(path).expanduser().resolve()
        self.lock_timeout_s = lock_timeout_s
        self._schema_ready = False

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        if read_only and not self.path.exists():
            raise FileNotFoundError(f"no DuckDB file at {self.path}; materialize an asset first or set EVALMISLEAD_DB")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.02
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=read_only)
                break
            except duckdb.Error as exc:
                if read_only and _is_config_clash(exc):
                    # this process holds the file read-write already (and so the lock): reading
                    # through that database instance waits on nobody
                    read_only = False
                    continue
                if not (_is_lock_error(exc) or _is_config_clash(exc)):
                    raise
                if time.monotonic() > deadline:
                    raise StorageLockTimeout(
                        f"{self.path} stayed locked by another process for {self.lock_timeout_s:.0f} s; "
                        "stop the other writer or raise lock_timeout_s"
                    ) from exc
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 1.6, 1.0)
        try:
            if not read_only and not self._schema_ready:
                with _SCHEMA_LOCK:
                    # again when a module registered more tables since, or the file was replaced
                    if _SCHEMA_DONE.get(self.path) != len(TABLES) or not _table_exists(con, "test_outcomes"):
                        ensure_schema(con)
                        _SCHEMA_DONE[self.path] = len(TABLES)
                self._schema_ready = True
            yield con
        finally:
            con.close()

    def query_df(self, sql: str, params: list[Any] | None = None, read_only: bool = False) -> pd.DataFrame:
        """Run one query. ``read_only``: a shared read lock, never the writer's (see ``read_connection``)."""
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
    def read_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection: never takes the write lock, so it waits only for a writer's short
        transaction (writers commit row by row), and any number of readers run side by side.

        The schema is made current first (once per process, read-write); a file replaced since, or a
        table missing, falls back to one read-write connection that recreates the schema.
        """
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

    def replace_partitions(self, table: str, df: pd.DataFrame, wheres: list[Mapping[str, Any]] | None) -> int:
        """Delete the rows of every partition in ``wheres`` (all rows if None) and insert ``df``, in one
        transaction: an empty ``df`` still clears them."""
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                for where in (wheres if wheres is not None else [None]):
                    clause, params = _where(where)
                    con.execute(f"DELETE FROM {table}{clause}", params)
                _insert(con, table, df)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return len(df)

    def read_table(
        self, table: str, where: Mapping[str, Any] | None = None, order_by: str | None = None,
        read_only: bool = False, columns: list[str] | None = None,
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


def _insert(con: duckdb.DuckDBPyConnection, table: str, df: pd.DataFrame) -> None:
    if df is None or len(df) == 0:
        return
    known = [c for c, _ in TABLES.get(table, [])]
    if known:
        extra = [c for c in df.columns if c not in known]
        if extra:
            raise ValueError(f"columns {extra} are not in table {table}; add them to schema.TABLES")
    con.register("_incoming", df)
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _incoming")
    finally:
        con.unregister("_incoming")


def _table_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
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
    from evalmislead_assets.views import VIEWS  # views may reference any table above

    for name, sql in VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
