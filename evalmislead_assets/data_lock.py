"""One writer per data folder and DuckDB file, on every route: `evalmislead run`, `dagster asset
materialize`, UI runs and backfills (issue 27, item 5).

Two lock files, both POSIX record locks (``fcntl.lockf``):

* ``<db>.run.lock`` beside the DuckDB file, keyed by the file's resolved path, so two runs naming
  the same file from two data folders (``EVALMISLEAD_HOME``) exclude each other;
* ``evalmislead-run.lock`` in the data folder, which also holds the report, the review CSV and the
  export of the run.

The kernel drops such a lock when its process ends in any way (SIGKILL included), and a forked child
never inherits it, so a lock file left by a dead run is simply taken over; the file itself only says
who holds it (pid, host, start time, command) for the messages. POSIX locks belong to a process:
a process that holds them already (``evalmislead run`` executing its Dagster runs in process) takes
them again at no cost, and only the code that took a lock gives it back (``release``).

Who takes them: ``evalmislead run`` before anything starts (refuses at once, exit 2, naming the
holder); every Dagster run when its ``io_manager`` is set up (resources/io_manager.py), whatever
launched it: it waits, logging a line naming the holder every 30 s, and goes on once the lock is free.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError

LOCK_NAME = "evalmislead-run.lock"
DB_LOCK_SUFFIX = ".run.lock"

_HELD: dict[Path, int] = {}  # lock file -> open descriptor, while this process holds it


class LockHeld(ConfigError):
    """Another process holds a lock; the message (one line) names it and the fix."""

    def __init__(self, message: str, path: Path, holder: str) -> None:
        super().__init__(message)
        self.path, self.holder = path, holder


def lock_paths(db: Path) -> list[Path]:
    """The DuckDB file's lock (beside it, by its resolved path), then the data folder's."""
    db = Path(db).expanduser().resolve()
    home = settings.project_data_dir().expanduser().resolve()
    return [db.with_name(db.name + DB_LOCK_SUFFIX), home / LOCK_NAME]


def holder(path: Path) -> str:
    """Who holds ``path`` as its file says: 'pid N on HOST (COMMAND), started T'."""
    try:
        fields = path.read_text(encoding="utf-8", errors="replace").split(maxsplit=3)
    except OSError:
        fields = []
    if len(fields) >= 3:
        command = f" ({fields[3].strip()})" if len(fields) > 3 else ""
        return f"pid {fields[0]} on {fields[1]}{command}, started {fields[2]}"
    return "pid unknown (it is just starting)"


def held_here(path: Path) -> bool:
    return Path(path) in _HELD


def acquire(path: Path, command: str = "evalmislead run") -> bool:
    """Hold ``path``'s lock until ``release``; True when taken now, False when this process held it already.

    Raises ``LockHeld`` naming the holder when another process has it, ConfigError when the file cannot be made."""
    path = Path(path)
    if path in _HELD:
        return False
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
        who = holder(path)
        what = "DuckDB file " + path.name.removesuffix(DB_LOCK_SUFFIX) if path.name.endswith(DB_LOCK_SUFFIX) \
            else "data folder"
        raise LockHeld(f"another evalmislead run ({who}) is using the {what} in {path.parent} (lock {path}); "
                       "wait for it to finish or stop it, then run again", path, who) from None
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    line = " ".join(command.split())  # one line, whatever the command
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()} {started} {line}\n".encode(), 0)
    _HELD[path] = fd
    return True


def release(paths: list[Path]) -> None:
    """Give back the locks in ``paths`` (those this process holds)."""
    for path in paths:
        fd = _HELD.pop(Path(path), None)
        if fd is None:
            continue
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing drops the record lock


def hold_data_folder(db: Path, command: str = "evalmislead run") -> list[Path]:
    """Take every lock of the DuckDB file and the data folder, all or none (``LockHeld`` naming the holder);
    returns the locks taken now (those this process held already are left out)."""
    taken: list[Path] = []
    try:
        for path in lock_paths(db):
            if acquire(path, command):
                taken.append(path)
    except ConfigError:
        release(taken)
        raise
    return taken


def wait_for_data_folder(db: Path, command: str, say: Callable[[str], None], every_s: float = 30.0,
                         poll_s: float = 0.5, timeout_s: float | None = None) -> list[Path]:
    """``hold_data_folder``, waiting while another process holds a lock: ``say`` names the holder at once and
    every ``every_s`` seconds. ``timeout_s`` (None: no limit) ends the wait with the last ``LockHeld``."""
    start = time.monotonic()
    last_said = -every_s
    while True:
        try:
            taken = hold_data_folder(db, command)
        except LockHeld as exc:
            waited = time.monotonic() - start
            if timeout_s is not None and waited >= timeout_s:
                raise
            if waited - last_said >= every_s:
                say(f"waiting for {exc.path} (held by {exc.holder}): one run writes this DuckDB file and data "
                    f"folder at a time; this run starts when that one ends (waited {waited:.0f} s)")
                last_said = waited
            time.sleep(poll_s)
            continue
        if time.monotonic() - start > poll_s:
            say(f"got {', '.join(map(str, taken)) or 'the run locks'} after {time.monotonic() - start:.0f} s; "
                "starting")
        return taken


def release_all() -> None:
    """Give every lock back (the process's end does the same)."""
    release(list(_HELD))
