"""The work folder as the test module's import left it, restored before each test.

The module process takes ``Snapshot.take(workdir)`` right after the import (before any test runs) and
calls ``restore()`` after each test: whatever appeared since is removed (child.py's ``_remove_new``
does that part), and every file, folder and link that existed after the import gets back its kind,
mode and content, or is made again where a test deleted it. The snapshot lives in the module
process's memory, which no test can reach (the processes are not dumpable; ``ptrace`` and
``process_vm_writev`` are filtered: kernel_state.py), so a test cannot change what is restored.

A snapshot larger than ``MAX_BYTES`` (the work folder is a tmpfs of ``Limits.disk_mb``) keeps only the
first ``MAX_BYTES`` of content; ``complete`` says whether it got everything.

Standard library only: the zygote imports it.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass

MAX_BYTES = 32 << 20


@dataclass(frozen=True)
class Entry:
    kind: str  # "dir", "file" or "link"
    mode: int
    data: bytes | str | None  # a file's bytes, a link's target


class Snapshot:
    def __init__(self, top: str, entries: dict[str, Entry], complete: bool) -> None:
        self.top, self.entries, self.complete = top, entries, complete

    @classmethod
    def take(cls, top: str) -> "Snapshot":
        entries: dict[str, Entry] = {}
        budget, complete = MAX_BYTES, True
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                    if stat.S_ISLNK(st.st_mode):
                        entries[path] = Entry("link", 0, os.readlink(path))
                    elif stat.S_ISDIR(st.st_mode):
                        entries[path] = Entry("dir", stat.S_IMODE(st.st_mode), None)
                    elif stat.S_ISREG(st.st_mode):
                        if st.st_size > budget:
                            complete = False
                            continue
                        with open(path, "rb") as fh:
                            data = fh.read(budget + 1)
                        budget -= len(data)
                        entries[path] = Entry("file", stat.S_IMODE(st.st_mode), data)
                except OSError:
                    complete = False
        return cls(top, entries, complete)

    def restore(self) -> None:
        """Put back every entry that a test changed or removed (parents first)."""
        for path in sorted(self.entries, key=lambda p: p.count(os.sep)):
            entry = self.entries[path]
            try:
                if not _same(path, entry):
                    _remove(path)
                    _make(path, entry)
            except OSError:
                pass


def _same(path: str, entry: Entry) -> bool:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if entry.kind == "link":
        return stat.S_ISLNK(st.st_mode) and os.readlink(path) == entry.data
    if entry.kind == "dir":
        if not stat.S_ISDIR(st.st_mode):
            return False
        if stat.S_IMODE(st.st_mode) != entry.mode:
            os.chmod(path, entry.mode)
        return True
    if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != entry.mode or st.st_size != len(entry.data or b""):
        return False
    os.chmod(path, entry.mode | stat.S_IRUSR)
    try:
        with open(path, "rb") as fh:
            return fh.read(st.st_size + 1) == entry.data
    finally:
        os.chmod(path, entry.mode)


def _remove(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        os.chmod(path, 0o700)
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.unlink(path)


def _make(path: str, entry: Entry) -> None:
    if entry.kind == "link":
        os.symlink(str(entry.data), path)
    elif entry.kind == "dir":
        os.mkdir(path, 0o700)
        os.chmod(path, entry.mode)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(entry.data or b"")  # type: ignore[arg-type]
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.chmod(path, entry.mode)
