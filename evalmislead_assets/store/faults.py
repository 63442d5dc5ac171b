"""What can go wrong with the DuckDB file, each as one line that names the fix.

* ``StorageLockTimeout``: another process held the lock for longer than the wait allowed
  (while waiting, ``LockWaitReporter`` prints a line at least every 30 s naming the holder).
* ``StorageDiskFull``: the disk filled while writing; DuckDB reports it as a failed commit and
  then "cannot rollback - no transaction is active", which hides the cause: this keeps the OS
  error ("No space left on device") and drops the rollback noise.
* ``StorageCorrupt``: the file is truncated or damaged (it may still pass the header check); DuckDB says
  "Could not read enough bytes" or "Corrupt database file" and the run says which file and what to do.
* ``StorageFileGone`` / ``StorageFileReplaced``: the file this process opened was deleted, moved
  or replaced while it ran. DuckDB would silently create a new empty file at the old path and
  later steps would write into it; ``FileIdentities`` remembers each file's inode and database id
  (``storage_info``) per process and stops at the next open instead.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class StorageError(RuntimeError):
    """A storage fault; the message is one line naming the fix."""


class StorageLockTimeout(StorageError):
    pass


class StorageDiskFull(StorageError, OSError):
    """errno ENOSPC; ``str()`` is the one-line message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.errno = errno.ENOSPC


class StorageFileGone(StorageError):
    pass


class StorageCorrupt(StorageError):
    pass


_DAMAGED = ("Could not read enough bytes", "Corrupt database file", "checksum", "INTERNAL Error")


def damaged_words(exc: BaseException) -> str | None:
    """DuckDB's first line when ``exc`` says the file is truncated or damaged, else None."""
    text = str(exc)
    if not any(marker in text for marker in _DAMAGED):
        return None
    return (text.strip().splitlines() or [type(exc).__name__])[0]


def damaged(path: Path, exc: BaseException) -> StorageCorrupt:
    return StorageCorrupt(
        f"the DuckDB file {path} is truncated or damaged ({damaged_words(exc) or exc}); restore it from a backup, "
        "or move it away and run again to start a new file (its stored answers go with it)"
    )


class StorageFileReplaced(StorageError):
    pass


_DISK_FULL = ("No space left on device", "Disk quota exceeded")


def _disk_full_cause(exc: BaseException) -> tuple[BaseException, str] | None:
    """(the exception that is a full disk, the OS error's words), searching ``exc`` and what it was raised
    from or during (a failed ROLLBACK raised while handling the failed commit), else None."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return e, os.strerror(e.errno)
        text = str(e)
        for marker in _DISK_FULL:
            if marker in text:
                return e, marker
        e = e.__cause__ or e.__context__
    return None


def disk_full_message(exc: BaseException) -> str | None:
    """The OS error's words when ``exc`` (or an exception it was raised from or during) is a full disk."""
    found = _disk_full_cause(exc)
    return found[1] if found else None


def disk_full(path: Path, exc: BaseException, doing: str) -> StorageDiskFull:
    cause, words = _disk_full_cause(exc) or (exc, "No space left on device")
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return StorageDiskFull(
        f"{words} while {doing} {path} ({first}); free space on that disk (or set EVALMISLEAD_DB to another), "
        "then re-run: rows committed before are kept",
    )


_HOLDER = re.compile(r"held in (.+?) \(PID (\d+)\)")


def lock_holder(exc: BaseException) -> str:
    """'pid 123 (/usr/bin/python3)' from DuckDB's lock error, or 'another process'."""
    m = _HOLDER.search(str(exc))
    if m:
        return f"pid {m.group(2)} ({m.group(1)})"
    if "different configuration" in str(exc):
        return "another connection of this process, opened with other settings"
    return "another process"


class LockWaitReporter:
    """Prints 'still waiting for the lock' at most every ``every_s`` seconds while a connect waits."""

    def __init__(self, path: Path, timeout_s: float, every_s: float = 30.0,
                 write: Callable[[str], None] | None = None) -> None:
        self.path, self.timeout_s, self.every_s = path, timeout_s, every_s
        self.write = write or _stderr
        self.start = time.monotonic()
        self.next_at = self.start + every_s

    def waiting(self, exc: BaseException, read_only: bool) -> None:
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + self.every_s
        kind = "read" if read_only else "write"
        self.write(f"evalmislead: waited {now - self.start:.0f} s for the DuckDB lock on {self.path} "
                   f"(to {kind}; held by {lock_holder(exc)}); retrying for up to {self.timeout_s:.0f} s in all")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Identity:
    device: int
    inode: int
    database_id: str | None


class FileIdentities:
    """Per process: the identity of each DuckDB file opened, checked at every later open."""

    def __init__(self) -> None:
        self._known: dict[Path, Identity] = {}
        self._lock = threading.Lock()

    def known(self, path: Path) -> Identity | None:
        with self._lock:
            return self._known.get(path)

    def forget(self, path: Path) -> None:
        """Accept whatever file is at ``path`` next (a deliberate reset, e.g. a new study in a long-lived process)."""
        with self._lock:
            self._known.pop(path, None)

    def check_exists(self, path: Path) -> None:
        """Before an open: a file this process has opened must still be there."""
        seen = self.known(path)
        if seen is not None and not path.exists():
            raise StorageFileGone(
                f"the DuckDB file {path} was deleted or moved while this run used it"
                f"{_id_note(seen)}; put it back (or point EVALMISLEAD_DB at it) and re-run; "
                "nothing was written into a new empty file"
            )

    def check_open(self, path: Path, stat: os.stat_result, read_id: Callable[[], str | None]) -> None:
        """After an open: the same file as before (same inode, or a copy with the same database id)."""
        seen = self.known(path)
        if seen is None or (seen.device, seen.inode) == (stat.st_dev, stat.st_ino):
            return
        now_id = read_id()
        if seen.database_id is not None and now_id == seen.database_id:
            self.record(path, stat, now_id)  # the same database rewritten in place (e.g. a format migration)
            return
        raise StorageFileReplaced(
            f"the DuckDB file {path} was replaced by another file while this run used it{_id_note(seen)}"
            f"{'' if now_id is None else f', now {now_id}'}; put the original back and re-run, "
            "or start a new run to use the new file"
        )

    def record(self, path: Path, stat: os.stat_result, database_id: str | None) -> None:
        with self._lock:
            self._known[path] = Identity(stat.st_dev, stat.st_ino, database_id)


def _id_note(identity: Identity) -> str:
    return f" (database id {identity.database_id})" if identity.database_id else ""
