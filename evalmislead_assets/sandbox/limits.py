"""The runner's resource limits, and how they fit under the limits the host itself was given.

``Limits`` are what one test process may use. Each module process sets them as ``setrlimit`` soft
and hard limits, and an unprivileged process cannot raise a hard limit past the one it inherited:
in a container or on a CI runner with, say, ``ulimit -Hn 64``, asking for 256 open files fails. So
the host fits the limits to its own hard limits before a batch (``fit_to_host``): a limit above the
host's is lowered to it, with a note that the host logs once; a limit lowered below what the runner
needs to run pytest at all (``MINIMUM``) refuses the batch with one line (``TooLow``), before any
test runs, instead of scoring every file as the model's failure. The module process clamps again
(``clamp``), so a ``setrlimit`` there never fails.

Standard library only: the zygote imports it.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, replace

TEST_TIMEOUT_S = 10.0
MAX_TESTS = 5_000  # per test file; more is the file's error ("too many tests: N > 5000"), never a crash
MAX_ID_CHARS = 1_000  # per test id; a longer one is the file's error
MB = 1 << 20
CHAIN_PROCESSES = 4  # the zygote, a chain's supervisor and module process counted with a test's own (user namespace)
# A run that ended on one of the runner's caps rather than on the test's own assertions (verdicts.py): its
# output filled the output cap, memory ran out, a file reached the size cap, a process or thread could not
# be started, the run's disk filled. Plain pytest has none of these caps, so such a status says nothing of
# what the test asserts, and a cell resting on one is never misleading or effective (execution/cells.py).
LIMIT_STATUSES = ("limit:output", "limit:memory", "limit:fsize", "limit:nproc", "limit:disk")


@dataclass(frozen=True)
class Limits:
    timeout_s: float = TEST_TIMEOUT_S
    memory_mb: int = 1024  # RLIMIT_AS per process
    file_mb: int = 16  # RLIMIT_FSIZE: also caps captured output
    open_files: int = 256
    processes: int = 32  # RLIMIT_NPROC for the test's own uid
    detail_chars: int = 600
    cpu_s: int | None = None  # RLIMIT_CPU per test process; None: int(timeout_s) + 2, fixed when the Limits are
    # made, so that dataclasses.replace(limits, timeout_s=shorter) (a mutant run) keeps the same RLIMIT_CPU
    disk_mb: int = 64  # size of the run's writable tmpfs (work folder, test folders, output logs)
    max_tests: int = MAX_TESTS
    max_id_chars: int = MAX_ID_CHARS

    def __post_init__(self) -> None:
        if self.cpu_s is None:
            object.__setattr__(self, "cpu_s", int(self.timeout_s) + 2)


# field -> (resource, bytes per unit, the least the runner accepts, the ulimit option). The least values
# leave room over what a chain was measured to need to import pytest and run a test with tmp_path and
# capsys (12 open files and 96 MiB of address space worked, with the zygote under the same limits).
RLIMITS: dict[str, tuple[int, int, int, str]] = {
    "open_files": (resource.RLIMIT_NOFILE, 1, 32, "-n"),
    "memory_mb": (resource.RLIMIT_AS, MB, 128, "-v"),
    "file_mb": (resource.RLIMIT_FSIZE, MB, 1, "-f"),
    "processes": (resource.RLIMIT_NPROC, 1, 4, "-u"),
    "cpu_s": (resource.RLIMIT_CPU, 1, 2, "-t"),
}
MINIMUM = {field: least for field, (_, _, least, _) in RLIMITS.items()}


class TooLow(RuntimeError):
    """A host hard limit below what the runner needs (one line, naming the limit and the fix)."""


def hard_limit(res: int) -> int | None:
    """This process's hard limit on ``res``; None when unlimited."""
    hard = resource.getrlimit(res)[1]
    return None if hard == resource.RLIM_INFINITY else hard


def fit_to_host(limits: Limits) -> tuple[Limits, list[str]]:
    """``limits`` lowered to this process's hard limits (which the zygotes and their chains inherit), and a
    note per lowered limit; TooLow when one would fall below what the runner needs."""
    changes: dict[str, int] = {}
    notes: list[str] = []
    for field, (res, unit, least, option) in RLIMITS.items():
        hard = hard_limit(res)
        want = getattr(limits, field)
        if want < least:
            raise TooLow(f"the test sandbox needs {field} >= {least}, and {want} was asked for; nothing was run")
        if field == "processes":
            hard = None if hard is None else hard - CHAIN_PROCESSES
        if hard is None or want * unit <= hard:
            continue
        fitted = hard // unit
        if fitted < least:
            raise TooLow(f"the test sandbox needs {field} >= {least} but this process's hard limit allows {fitted} "
                         f"(ulimit {option} -H: {hard_limit(res)}); raise it (e.g. `ulimit -H {option}` in the "
                         "shell or the container's --ulimit) and re-run; nothing was run")
        changes[field] = fitted
        notes.append(f"{field} {want} -> {fitted} (the host's hard limit)")
    return (replace(limits, **changes) if changes else limits), notes


def clamp(res: int, value: int) -> None:
    """setrlimit(res, value) for soft and hard, never above the hard limit this process has (never fails)."""
    hard = hard_limit(res)
    value = value if hard is None else min(value, hard)
    resource.setrlimit(res, (value, value))
