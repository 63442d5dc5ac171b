"""The sandbox's batches on a Dask cluster: ``DaskSandbox`` sends them to the workers of a ``distributed`` scheduler.

A ``DaskSandbox`` is a ``Sandbox`` (host.py) whose ``run`` and ``collect`` cut their requests into tasks of a
few answer files each (every request of one answer file, both versions, in one task: one module process per
file and version, as on the local pool), submit them to the scheduler and put the results back in request
order. Each task runs ``Sandbox.run``/``collect`` on its worker (dask_worker.py), in a ``WarmSandbox``
(sandbox/host.py) the worker process keeps between tasks: its zygotes, warmed up once, serve task after task
where the OS isolation allows it, so a task does not pay for starting them. The results come back to the head,
which alone writes the warehouse: a worker needs the project package, not DuckDB or Dagster.

A worker that dies mid-task (killed, its host gone) leaves its tasks to the scheduler, which runs them on
another worker; a run is a pure function of the answer file, the code under test and the limits, so the
rows are the same. A task whose workers die ``distributed.scheduler.allowed-failures`` times (3) fails the
batch with one line, as a sandbox that cannot start does (``SandboxUnavailable``): nothing is recorded.

Why a task is a few answer files and never one run: each task costs a round trip to the scheduler and,
on the worker, a batch folder and the hand-over to warm zygotes (``Sandbox._execute``); benchmarks/bench_dask_pool.py
measures that against the runs' own time, and ``DEFAULT_ANSWERS_PER_TASK`` (study/models.py) is chosen
from it (docs/distributed.md).

``distributed`` is imported only here and in dask_worker.py, and only when a ``DaskSandbox`` first talks to its
scheduler: a study without ``[execution] dask_scheduler`` never imports it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from evalmislead_assets.errors import ConfigError
from evalmislead_assets.sandbox.host import Collected, Isolation, Limits, Module, Ran, Sandbox, SandboxUnavailable
from evalmislead_assets.study.models import DEFAULT_ANSWERS_PER_TASK

CONNECT_TIMEOUT_S = 10.0

_clients: dict[str, Any] = {}  # scheduler address -> distributed.Client, one per process (the head's)
_clients_lock = threading.Lock()


class DaskSandbox(Sandbox):
    """A sandbox whose batches run on the workers of the Dask scheduler at ``address``.

    ``workers``: zygotes per task on a worker (None: the worker host's CPUs over the worker's threads, so one a
    task for a worker with a thread per CPU, ``dask worker``'s default: it runs that many tasks at a time).
    ``setting`` names where the address was set, for the one-line errors (e.g. "[execution] dask_scheduler in
    the study file study.toml")."""

    def __init__(self, address: str, limits: Limits | None = None, workers: int | None = None,
                 os_isolation: bool = True, base_dir: str | None = None, static_scan: bool = True, *,
                 answers_per_task: int = DEFAULT_ANSWERS_PER_TASK, setting: str = "dask_scheduler",
                 connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        super().__init__(limits, workers=workers, os_isolation=os_isolation, base_dir=base_dir,
                         static_scan=static_scan)
        self.address = address
        self.task_workers = workers
        self.answers_per_task = answers_per_task
        self.setting = setting
        self.connect_timeout_s = connect_timeout_s
        self.tasks = 0  # tasks submitted by this sandbox (every batch together)

    def with_limits(self, limits: Limits) -> DaskSandbox:
        """The same cluster and settings with other limits (a mutant run's shorter time limit)."""
        return DaskSandbox(self.address, limits, self.task_workers, self.os_isolation, self.base_dir,
                           self.static_scan, answers_per_task=self.answers_per_task, setting=self.setting,
                           connect_timeout_s=self.connect_timeout_s)

    def collect(self, modules: Sequence[Module]) -> list[Collected]:
        return self._fan_out("collect", list(modules), [m.tests for m in modules], False)

    def run(self, requests: Sequence[tuple[Module, str]], coverage: bool = False) -> list[Ran]:
        return self._fan_out("run", list(requests), [m.tests for m, _ in requests], coverage)

    def _fan_out(self, kind: str, items: list[Any], files: list[str], coverage: bool) -> list[Any]:
        if not items:
            return []
        client = self._client()
        from evalmislead_assets.execution.dask_worker import Spec, on_worker  # the tasks' side (imports distributed)

        slots = sum(int(w.get("nthreads", 1)) for w in client.scheduler_info()["workers"].values())
        groups = task_groups(files, self.answers_per_task, max(1, slots))
        spec = Spec(self.limits, self.task_workers, self.os_isolation, self.base_dir, self.static_scan)
        futures = [client.submit(on_worker, kind, [items[i] for i in group], spec, coverage, pure=False)
                   for group in groups]
        self.tasks += len(futures)
        try:
            replies = client.gather(futures)
        except SandboxUnavailable:
            raise
        except Exception as exc:
            raise SandboxUnavailable(self._lost(exc)) from None
        finally:
            client.cancel(futures)
        out: list[Any] = [None] * len(items)
        for group, (results, iso) in zip(groups, replies):
            if iso is not None:
                self._note_isolation(Isolation(**iso))
            for i, r in zip(group, results):
                out[i] = r
        return out

    def _lost(self, exc: Exception) -> str:
        name = type(exc).__name__
        text = " ".join(str(exc).split())[:300]
        if name == "KilledWorker":
            return (f"the Dask cluster at {self.address} lost every worker that ran one task of this batch ({text}); "
                    "nothing was recorded for this batch: see the workers' logs (memory, the host) and re-run")
        return (f"the batch on the Dask cluster at {self.address} failed ({name}: {text}); nothing was recorded for "
                f"this batch: check the scheduler and its workers (each needs this project's package), or remove "
                f"{self.setting} to run the tests on this machine")

    def _client(self) -> Any:
        with _clients_lock:
            client = _clients.get(self.address)
            if client is not None and client.status == "running":
                return client
            client = connect(self.address, self.setting, self.connect_timeout_s)
            _clients[self.address] = client
            return client


def connect(address: str, setting: str, timeout_s: float = CONNECT_TIMEOUT_S) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address`` with at least one worker; ConfigError, one line
    naming ``setting``, when no scheduler answers there or it has no worker within ``timeout_s``."""
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError(f"{setting} names a Dask scheduler, but the package distributed is not installed; "
                          "pip install 'evalmislead[distributed]' (or remove the setting)") from None
    try:
        client = Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"no Dask scheduler answers at {address} ({setting}; {type(exc).__name__}); start it "
                          "(dask scheduler) or remove the setting to run the tests on this machine") from None
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except (OSError, TimeoutError):
        client.close()
        raise ConfigError(f"the Dask scheduler at {address} ({setting}) has no worker after {timeout_s:g} s; start "
                          f"one on each test host (dask worker {address} --nthreads 1)") from None
    from evalmislead_assets.execution.dask_worker import SandboxPlugin

    client.register_plugin(SandboxPlugin(), name=SandboxPlugin.name)  # every worker, and each that joins later
    return client


def close_clients() -> None:
    """Close this process's scheduler connections (a test, a benchmark between clusters)."""
    with _clients_lock:
        for client in _clients.values():
            client.close()
        _clients.clear()


def task_groups(files: Sequence[str], per_task: int, n_workers: int) -> list[list[int]]:
    """The item indices of each task: every item of one answer file (``files[i]``, its test source) in the same
    task, at most ``per_task`` answer files a task, fewer when that leaves one of the cluster's ``n_workers``
    threads idle (a small batch is split so every thread gets a share); the answer files in order of first
    appearance."""
    by_file: dict[str, list[int]] = {}
    for i, f in enumerate(files):
        by_file.setdefault(f, []).append(i)
    order = list(by_file.values())
    size = max(1, min(per_task, math.ceil(len(order) / max(1, n_workers))))
    return [[i for idx in order[k:k + size] for i in idx] for k in range(0, len(order), size)]
