"""A deeper look at a DuckDB file than its header: open it read-only and read its catalog.

A truncated file (a copy cut short, a disk that filled while it was copied) keeps its header and passes
``config_check``'s magic-bytes test, then fails at the run's first open with DuckDB's "Could not read
enough bytes"; a damaged block says "Corrupt database file". ``check_readable`` finds both before a run
starts and raises ``StorageCorrupt`` (one line naming the file and the fix).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from evalmislead_assets.store import file_format
from evalmislead_assets.store.faults import damaged, damaged_words


def check_readable(path: Path) -> None:
    """Raise ``StorageCorrupt`` when ``path`` cannot be read as a DuckDB database. A file another process
    holds for writing (or that this process holds with other settings) is not checked: the run's own open
    waits for it and would name any damage then."""
    path = Path(path)
    try:
        con = duckdb.connect(str(path), read_only=True, config=file_format.connect_config())
    except duckdb.Error as exc:
        if damaged_words(exc):
            raise damaged(path, exc) from None
        return  # a lock, a clash of settings in this process: not a question of the file's bytes
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()]
        for table in tables:  # each table's row groups are listed from its metadata blocks
            con.execute(f'SELECT count(*) FROM pragma_storage_info(\'"{table}"\')').fetchall()
    except duckdb.Error as exc:
        if damaged_words(exc):
            raise damaged(path, exc) from None
    finally:
        con.close()
