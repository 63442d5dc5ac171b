"""The DuckDB storage format of the study database: one that DuckDB 1.x readers open.

DuckDB 2.x writes a storage format (header version 69 and up) that no 1.x reader opens: not
the 1.x CLI from a package manager, DBeaver's driver, DuckDB-Wasm, nor the R and Julia bindings
of 1.x. Every file the project creates is therefore written in storage version ``v1.0.0``
(header version 64), the oldest DuckDB 2.x can target that keeps every feature the project uses
(lists, primary keys, ``INSERT OR REPLACE``, ``ALTER COLUMN ... TYPE``, views, the WAL), and it opens
in every DuckDB from 0.10 on. Measured on the project's 2-core machine: a file in it is about 1.4 %
larger than in the 2.x format, and one open-write-close cycle (how every answer is committed) takes
about 20 ms longer (110 vs 91 ms, 80 interleaved writes; v1.2.0: 97 ms, v1.4.0: 91 ms), under a
minute over a full study's answers. DuckDB keeps the version inside the file, so later connections
write it in the same format.

A file from an earlier project version in the 2.x format is migrated once (``migrate_open_file``,
called by ``storage.Warehouse``): under the write lock its whole database is copied into a new
file of the target version, the row counts are compared table by table, the original is kept
beside it as a backup and the copy takes its name. The file's ``storage_info`` table records the version and the migration.

    python -m evalmislead_assets.store.format_check DB      # say which format DB is in
    python -m evalmislead_assets.store.format_check --migrate DB
"""

from __future__ import annotations

import datetime as dt
import os
import struct
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any

import duckdb

# The storage version every new study database is created in, and what opens it.
STORAGE_VERSION = "v1.0.0"
READABLE_BY = "DuckDB 1.0 and later (and 0.10.x): every 1.x CLI, Python, R, Julia, JDBC/DBeaver and Wasm client"
# File-header versions each reader opens: DuckDB 1.5.x reads 64-68; 64 is what v0.10.0-v1.1.x write.
TARGET_HEADER_VERSION = 64
MAX_1X_HEADER_VERSION = 68
_HEADER_MAGIC = b"DUCK"


def connect_config() -> dict[str, Any]:
    """DuckDB connect config for the study database: new files in ``STORAGE_VERSION``; an existing
    file keeps the version stored in it."""
    return {"storage_compatibility_version": STORAGE_VERSION}


def header_version(path: Path) -> int | None:
    """The storage version number in a DuckDB file's header (64 = v0.10-v1.1, 67 = v1.4, 68 = v1.5,
    69+ = 2.x); None when the file is absent, empty or not a DuckDB file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return None
    if len(head) < 20 or head[8:12] != _HEADER_MAGIC:
        return None
    return int(struct.unpack("<Q", head[12:20])[0])


def needs_migration(path: Path) -> bool:
    """True for a DuckDB file that 1.x readers cannot open (written in DuckDB 2.x's own format)."""
    version = header_version(path)
    return version is not None and version > MAX_1X_HEADER_VERSION


def database_storage_version(con: duckdb.DuckDBPyConnection) -> str:
    """The storage version DuckDB reports for the connection's database, e.g. 'v1.0.0+'."""
    rows = con.execute("SELECT tags FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    tags = (rows[0][0] if rows else None) or {}
    return str(tags.get("storage_version", "unknown"))


def readable_by(version: str) -> str:
    """Which readers open a file DuckDB tags ``version`` (e.g. 'v1.0.0+', 'v1.4.0+', 'v2.0.0+')."""
    parts = version.lstrip("v").rstrip("+").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return "unknown"
    if (major, minor) <= (1, 1):
        return READABLE_BY
    return f"DuckDB {major}.{minor} and later only"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _versions() -> str:
    try:
        own = metadata.version("evalmislead")
    except metadata.PackageNotFoundError:
        own = "unknown"
    return f"duckdb {duckdb.__version__}, evalmislead {own}"


def record_storage_info(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the ``storage_info`` table (created by the schema): the database's id (kept across a
    migration, checked at every open), the storage version it is written in, and who created it."""
    have = dict(con.execute("SELECT key, value FROM storage_info").fetchall())
    version = database_storage_version(con)
    rows = {"storage_version": version, "readable_by": readable_by(version)}
    if "database_id" not in have:
        rows.update({"database_id": uuid.uuid4().hex, "created_at": _now(), "created_with": _versions()})
    changed = {k: v for k, v in rows.items() if have.get(k) != v}
    for key, value in changed.items():
        con.execute("INSERT OR REPLACE INTO storage_info (key, value) VALUES (?, ?)", [key, value])


def database_id(con: duckdb.DuckDBPyConnection) -> str | None:
    """The id in ``storage_info`` (None for a file without one)."""
    try:
        rows = con.execute("SELECT value FROM storage_info WHERE key = 'database_id'").fetchall()
    except duckdb.CatalogException:
        return None
    return str(rows[0][0]) if rows else None


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")


def _counts(con: duckdb.DuckDBPyConnection, catalog: str) -> dict[str, int]:
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' ORDER BY 1",
        [catalog]).fetchall()]
    return {n: int(con.execute(f'SELECT count(*) FROM "{catalog}".main."{n}"').fetchall()[0][0]) for n in names}


def backup_path(path: Path) -> Path:
    """Where migration keeps the original: <name>.2x-format-backup[-N] beside it."""
    candidate = path.with_name(path.name + ".2x-format-backup")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.2x-format-backup-{n}")
    return candidate


def migrate_open_file(con: duckdb.DuckDBPyConnection, path: Path, storage_info_columns: list[tuple[str, str]]) -> str:
    """Rewrite the file ``con`` holds read-write (and so locked) in ``STORAGE_VERSION``; returns the
    one-line notice. The caller closes ``con`` afterwards: it then refers to the backup.
    ``storage_info_columns``: the registry's columns of ``storage_info``, for a file that predates it."""
    old_version = database_storage_version(con)
    catalog = con.execute("SELECT current_database()").fetchall()[0][0]
    con.execute("CHECKPOINT")
    tmp = path.with_name(path.name + ".migrating")
    for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
        if leftover.exists():
            leftover.unlink()
    con.execute(f"ATTACH '{_quote(tmp)}' AS _evalmislead_migrate (STORAGE_VERSION '{STORAGE_VERSION}')")
    try:
        con.execute(f'COPY FROM DATABASE "{catalog}" TO _evalmislead_migrate')
        before, after = _counts(con, catalog), _counts(con, "_evalmislead_migrate")
        if before != after:
            raise RuntimeError(f"migration of {path} copied {after} rows, expected {before}; the file is unchanged")
        if "storage_info" not in after:  # a file from before the table existed
            columns = ", ".join(f"{c} {t}" for c, t in storage_info_columns)
            con.execute(f"CREATE TABLE _evalmislead_migrate.storage_info ({columns})")
        con.execute("INSERT OR REPLACE INTO _evalmislead_migrate.storage_info (key, value) VALUES "
                    "('migrated_from', ?), ('migrated_at', ?), ('storage_version', ?)",
                    [old_version, _now(), f"{STORAGE_VERSION}+"])
    finally:
        con.execute("DETACH _evalmislead_migrate")
    backup = backup_path(path)
    # the lock stays with ``con`` (on the original's inode) until both names are in place
    os.replace(path, backup)
    os.replace(tmp, path)
    rows = sum(before.values())
    return (f"evalmislead: migrated {path} from DuckDB storage {old_version} to {STORAGE_VERSION} so DuckDB 1.x "
            f"readers open it ({len(before)} tables, {rows} rows, all copied); the original is kept as {backup}")
