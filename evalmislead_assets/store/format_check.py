"""Say which DuckDB storage format a file is in, and migrate a 2.x-format one to the 1.x-readable format.

    python -m evalmislead_assets.store.format_check DB            # e.g. "storage header version 64 (opens in DuckDB 1.x readers)"
    python -m evalmislead_assets.store.format_check --migrate DB  # what the next run would do anyway, now

Migration is ``Warehouse``'s own (``file_format.migrate_open_file``): under the write lock,
row counts compared, the original kept as ``<file>.2x-format-backup``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.file_format import STORAGE_VERSION, header_version, needs_migration


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evalmislead_assets.store.format_check", description=__doc__.splitlines()[0])
    p.add_argument("db", help="DuckDB file")
    p.add_argument("--migrate", action="store_true", help=f"rewrite a 2.x-format file in {STORAGE_VERSION}")
    args = p.parse_args(argv)
    path = Path(args.db).expanduser().resolve()
    version = header_version(path)
    if version is None:
        print(f"evalmislead: {path} is not a DuckDB file", file=sys.stderr)
        return 2
    if args.migrate and needs_migration(path):
        Warehouse(path).ensure_schema()  # migrates on the first read-write open and prints the notice
        version = header_version(path)
    state = "2.x only: run with --migrate" if needs_migration(path) else "opens in DuckDB 1.x readers"
    print(f"{path}: storage header version {version} ({state})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
