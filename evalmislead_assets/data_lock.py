"""One writer per data folder and DuckDB file, on every route: `evalmislead run`, `dagster asset
materialize`, UI runs and backfills, so no request is sent twice for one cache key.

The locks are POSIX record locks (``fcntl.lockf``) on small files:

* ``<db>.run.lock`` beside the DuckDB file, keyed by the file's resolved path, so two runs naming
  the same file from two data folders (``EVALMISLEAD_HOME``) meet on it;
* ``evalmislead-run.lock`` in the data folder, which also holds the report, the review CSV and the
  export of a run;
* ``<db>.run-locks/<partition>.lock``: one per partition key a Dagster run works on.

Who takes what:

* ``evalmislead run``: the first two **exclusively**, so it is the only run of the study and of its
  data folder; it refuses at once (exit 2) naming the holder.
* Every Dagster run, whatever launched it, in its ``io_manager``'s setup (resources/io_manager.py):
  the DuckDB file's lock **shared** and its partition's lock exclusively, so backfill runs of
  different partitions still run side by side (``max_concurrent_runs``), two runs of one partition
  never do, and none runs beside an ``evalmislead run``; a run over a partition *range* takes the
  DuckDB file's lock exclusively. The answers (the response cache) live in the DuckDB file, so this
  is what keeps every request to one sending. A Dagster run that finds a lock held waits, logging a
  line naming the holder every 30 s, and starts when it is free.
* The runs ``evalmislead run`` launches itself (through the Dagster instance, in their own processes)
  carry its identity in the tag ``DELEGATE_TAG``: while it holds the DuckDB file's lock they take only
  their partition's, so they work under its lock and every other run still waits for it.

The kernel drops such a lock when its process ends in any way (SIGKILL included), and a forked child
never inherits it, so a lock file left by a dead run is simply taken over; the file itself only says
who took it last (pid, host, start time, command) for the messages. POSIX locks belong to a process:
a process that holds one already takes it again at no cost, and only the code that took a lock gives it back (``release``).
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
# run tag: the `evalmislead run` (``study_holder``) that launched the run and holds the DuckDB file's lock
DELEGATE_TAG = "evalmislead/launched_under_lock"

_HELD: dict[Path, tuple[int, bool]] = {}  # lock file -> (open descriptor, shared), while this process holds it


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



def scope_lock(db: Path, partition: str) -> Path:
    """The lock file of one partition key of the DuckDB file (``*`` for a run of unpartitioned assets)."""
    db = Path(db).expanduser().resolve()
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in partition) or "_"
    return db.with_name(db.name + ".run-locks") / f"{safe}.lock"


def acquire(path: Path, command: str = "evalmislead run", shared: bool = False) -> bool:
    """Hold ``path``'s lock until ``release`` (``shared``: beside other shared holders); True when taken now,
    False when this process held it already.

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
        fcntl.lockf(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        who = holder(path)
        if path.name.endswith(DB_LOCK_SUFFIX):
            what = f"the DuckDB file {path.parent / path.name.removesuffix(DB_LOCK_SUFFIX)}"
        elif path.name == LOCK_NAME:
            what = f"the data folder {path.parent}"
        else:
            what = f"partition {path.stem} of {path.parent.name.removesuffix('.run-locks')}"
        raise LockHeld(f"another evalmislead run ({who}) is using {what} (lock {path}); "
                       "wait for it to finish or stop it, then run again", path, who) from None
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    line = " ".join(command.split())  # one line, whatever the command
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()} {started} {line}\n".encode(), 0)
    _HELD[path] = (fd, shared)
    return True


def release(paths: list[Path]) -> None:
    """Give back the locks in ``paths`` (those this process holds)."""
    for path in paths:
        held = _HELD.pop(Path(path), None)
        if held is None:
            continue
        fd, shared = held
        try:
            if not shared:  # a shared lock's file may name another holder still running
                os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing drops the record lock


def _take(locks: list[tuple[Path, bool]], command: str) -> list[Path]:
    """Take each (lock, shared), all or none; returns the locks taken now."""
    taken: list[Path] = []
    try:
        for path, shared in locks:
            if acquire(path, command, shared):
                taken.append(path)
    except ConfigError:
        release(taken)
        raise
    return taken


def hold_data_folder(db: Path, command: str = "evalmislead run") -> list[Path]:
    """The whole study: the DuckDB file's and the data folder's locks, exclusively, all or none (``LockHeld``
    naming the holder); returns the locks taken now (those this process held already are left out)."""
    return _take([(path, False) for path in lock_paths(db)], command)


def holder_id(path: Path) -> str:
    """'PID HOST STARTED' of the process that took ``path`` last, as its file says ('' when unreadable).

    A lock this process holds is read through its own descriptor: opening and closing the file again would
    drop the process's POSIX lock on it (a record lock belongs to the process and the file, not the descriptor)."""
    try:
        held = _HELD.get(Path(path))
        if held is not None:
            text = os.pread(held[0], 4096, 0).decode("utf-8", errors="replace")
        else:
            text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    fields = text.split(maxsplit=3)
    return " ".join(fields[:3]) if len(fields) >= 3 else ""


def study_holder(db: Path) -> str:
    """Who holds the DuckDB file's lock (``holder_id``): `evalmislead run` passes it to the runs it launches,
    which then work under its lock instead of waiting for it (``hold_partition``'s ``delegated_by``)."""
    return holder_id(lock_paths(db)[0])


def _held_by(path: Path, who: str) -> bool:
    """``path``'s lock is held now, exclusively, by the process ``who`` (``holder_id``) names. Never probed where
    this process holds the lock itself (closing the probe's descriptor would drop it)."""
    if not who or Path(path) in _HELD or holder_id(path) != who:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True  # someone holds it exclusively, and its file names ``who``
    finally:
        os.close(fd)  # a shared lock taken by the probe goes with the descriptor
    return False


def hold_partition(db: Path, partition: str | None, command: str, delegated_by: str = "") -> list[Path]:
    """A Dagster run's locks: the DuckDB file's exclusively for ``partition`` None (a partition range), else
    the DuckDB file's shared and the partition's own exclusively ('*': unpartitioned assets).

    ``delegated_by``: the run was launched by the `evalmislead run` that holds the DuckDB file's lock
    (``study_holder``); while that process holds it, the run takes only its partition's lock (a run of the
    whole study's range none), so the study's own runs work beside it and every other run still waits."""
    db_lock = lock_paths(db)[0]
    if delegated_by and _held_by(db_lock, delegated_by):
        return [] if partition is None else _take([(scope_lock(db, partition), False)], command)
    if partition is None:
        return _take([(db_lock, False)], command)
    return _take([(db_lock, True), (scope_lock(db, partition), False)], command)


def wait_and_hold(db: Path, command: str, say: Callable[[str], None], every_s: float = 30.0,
                         poll_s: float = 0.5, timeout_s: float | None = None, partition: str | None = None,
                         delegated_by: str = "") -> list[Path]:
    """``hold_partition``, waiting while another process holds a lock: ``say`` names the holder at once and
    every ``every_s`` seconds. ``timeout_s`` (None: no limit) ends the wait with the last ``LockHeld``."""
    start = time.monotonic()
    last_said = -every_s
    while True:
        try:
            taken = hold_partition(db, partition, command, delegated_by)
        except LockHeld as exc:
            waited = time.monotonic() - start
            if timeout_s is not None and waited >= timeout_s:
                raise
            if waited - last_said >= every_s:
                say(f"waiting for {exc.path} (held by {exc.holder}): no two runs of one partition, and none beside "
                    f"an `evalmislead run`, use one DuckDB file; this run starts when that one ends "
                    f"(waited {waited:.0f} s)")
                last_said = waited
            time.sleep(poll_s)
            continue
        if last_said >= 0:
            say(f"the run locks are free after {time.monotonic() - start:.0f} s; starting")
        return taken


def release_all() -> None:
    """Give every lock back (the process's end does the same)."""
    release(list(_HELD))
