"""One `evalmislead run` per data folder and DuckDB file: the locks live in `evalmislead_assets.data_lock`
(every Dagster run takes them too, in its io_manager's setup); this name is kept for scripts and tests."""

from __future__ import annotations

from evalmislead_assets.data_lock import (  # re-exported
    LOCK_NAME,
    ConfigError,
    LockHeld,
    acquire,
    hold_data_folder,
    lock_paths,
    release,
    release_all,
)

__all__ = ["LOCK_NAME", "ConfigError", "LockHeld", "acquire", "hold_data_folder", "lock_paths", "release",
           "release_all"]
