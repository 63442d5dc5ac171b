"""The worker's side of execution/dask_pool.py: a task runs the sandbox on a Dask worker.

Each task is ``on_worker``: ``Sandbox.run``/``collect`` on its items in a ``WarmSandbox`` (sandbox/host.py) that the
worker process keeps between tasks, one per set of limits (``Spec``): its zygotes, warmed up once, serve task
after task where the OS isolation allows it. ``SandboxPlugin`` (registered by the head on every worker) ends those
zygotes and removes their folder when the worker closes. A worker needs the project package and
``distributed``, never DuckDB or Dagster: this module imports neither.

Imported by the head only when a study names a scheduler (dask_pool.py), and by the worker when it unpickles
a task.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from distributed import WorkerPlugin, get_worker

from evalmislead_assets.sandbox.host import Limits, WarmSandbox


class Spec:
    """What a task's sandbox is made of (pickled to the worker): the head's limits and settings."""

    def __init__(self, limits: Limits, workers: int | None, os_isolation: bool, base_dir: str | None,
                 static_scan: bool) -> None:
        self.limits, self.workers, self.os_isolation = limits, workers, os_isolation
        self.base_dir, self.static_scan = base_dir, static_scan

    def key(self) -> tuple[Any, ...]:
        return (self.limits, self.workers, self.os_isolation, self.base_dir, self.static_scan)


_sandboxes: dict[tuple[Any, ...], WarmSandbox] = {}  # in a worker process: kept between tasks
_lock = threading.Lock()


def worker_sandbox(spec: Spec, threads: Callable[[], int]) -> WarmSandbox:
    """This process's sandbox for ``spec``, made on its first task: ``spec.workers`` zygotes, else the host's CPUs
    over the worker's threads (``threads()``)."""
    with _lock:
        sandbox = _sandboxes.get(spec.key())
        if sandbox is None:
            if not _sandboxes:
                atexit.register(close_sandboxes)
            workers = spec.workers or max(1, (os.cpu_count() or 1) // max(1, threads()))
            sandbox = WarmSandbox(spec.limits, workers=workers, os_isolation=spec.os_isolation,
                                  base_dir=spec.base_dir, static_scan=spec.static_scan)
            _sandboxes[spec.key()] = sandbox
        return sandbox


def close_sandboxes() -> None:
    """End this process's waiting zygotes and remove their folders."""
    with _lock:
        for sandbox in _sandboxes.values():
            sandbox.close()
        _sandboxes.clear()


def _threads() -> int:
    """The threads (tasks at a time) of the Dask worker this runs in; 1 outside one."""
    try:
        return int(get_worker().state.nthreads)
    except (ValueError, AttributeError):
        return 1


def on_worker(kind: str, items: list[Any], spec: Spec, coverage: bool) -> tuple[list[Any], dict[str, Any] | None]:
    """One task: (its results in order, the isolation its worker's sandbox got so far)."""
    sandbox = worker_sandbox(spec, _threads)
    results: list[Any] = sandbox.collect(items) if kind == "collect" else sandbox.run(items, coverage)
    return results, (asdict(sandbox.isolation) if sandbox.isolation is not None else None)


class SandboxPlugin(WorkerPlugin):
    """Closes the worker's sandboxes (their waiting zygotes and folders) when the worker closes."""

    name = "evalmislead-sandbox"
    idempotent = True  # a head that connects later leaves it as it is (re-registering would close the sandboxes)

    def teardown(self, worker: Any) -> None:
        close_sandboxes()
