"""One `evalmislead run` per data folder: a lock file the second run finds held, naming the first's pid.

The lock is a POSIX record lock (``fcntl.lockf``) on ``evalmislead-run.lock`` in the data folder
(EVALMISLEAD_HOME), and on ``<db>.run.lock`` beside the DuckDB file when that lies elsewhere.
The kernel drops such a lock when its process ends in any way (SIGKILL included), and a forked
child never inherits it, so a lock file left by a dead run is simply taken over; the file itself
only says who holds it (pid, host, start time) for the refusal message.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import socket
from pathlib import Path

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError

LOCK_NAME = "evalmislead-run.lock"

_HELD: dict[Path, int] = {}  # lock file -> open descriptor, kept for the life of the process


def lock_paths(db: Path) -> list[Path]:
    """The data folder's lock file, and one beside the DB file when the DB is outside the data folder."""
    home = settings.project_data_dir().expanduser().resolve()
    paths = [home / LOCK_NAME]
    db = Path(db).expanduser().resolve()
    if db.parent != home:
        paths.append(db.with_name(db.name + ".run.lock"))
    return paths


def _holder(path: Path) -> str:
    try:
        fields = path.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        fields = []
    if len(fields) >= 3:
        return f"pid {fields[0]} on {fields[1]}, started {fields[2]}"
    return "pid unknown (it is just starting)"


def acquire(path: Path) -> None:
    """Hold ``path``'s lock for the rest of this process, or raise ConfigError naming its holder."""
    path = Path(path)
    if path in _HELD:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot create the run lock {path} ({exc.strerror}); make {path.parent} writable "
                          "or set EVALMISLEAD_HOME to a writable folder") from None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise ConfigError(
            f"another evalmislead run ({_holder(path)}) is using {path.parent} (lock {path}); "
            "wait for it to finish or stop it, then run again"
        ) from None
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()} {started}\n".encode(), 0)
    _HELD[path] = fd


def hold_data_folder(db: Path) -> list[Path]:
    """Take every lock of this data folder (and DB file); returns the lock files held."""
    paths = lock_paths(db)
    for path in paths:
        acquire(path)
    return paths


def release_all() -> None:
    """Give the locks back (the process's end does the same)."""
    for path, fd in list(_HELD.items()):
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
            del _HELD[path]
