"""The deploy profile's run launcher: dagster-celery's `CeleryRunLauncher`, each run sent to its host class's queue.

`CeleryRunLauncher` sends a run to the queue in its run tag ``dagster-celery/queue``, else to its
``default_queue``. `HostClassCeleryRunLauncher` sets that tag, when the run does not carry one already, from the
host classes of the run's assets (the asset tag ``evalmislead/host_class``, host_class.py): a run with a
generation step goes to ``gpu``, one of execution or analysis steps only to the default queue. It does so at
launch, so the runs of `evalmislead run`, the UI, a backfill and a schedule are routed alike; a queue tag set by
hand (the launchpad, a backfill's tags) wins. Workers subscribe to their class's queue (``celery ... worker -Q
gpu``, docs/distributed.md).

It also tells run monitoring (the dagster-daemon) when a run's worker is gone. dagster-celery reads the Celery
task's state only: a worker host that dies mid-run (or a worker killed with SIGKILL) leaves its task STARTED in
the result backend for good. Here a STARTED run whose worker (the node name in ``evalmislead/celery_worker``,
written as the task starts) answers no ping is reported failed, and so is one whose pool process on this host
(``evalmislead/run_worker``) is gone; run monitoring then marks the run failed and run retries re-execute it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, WorkerStatus
from dagster_celery.launcher import CeleryRunLauncher
from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG

from evalmislead_assets.dagster_metadata import HOST_CLASS_TAG
from evalmislead_assets.host_class import run_host_class
from evalmislead_assets.run_worker import WORKER_TAG, worker_state

if TYPE_CHECKING:
    from dagster import AssetKey
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster._core.workspace.context import BaseWorkspaceRequestContext

QUEUE_TAG = DAGSTER_CELERY_QUEUE_TAG
CELERY_WORKER_TAG = "evalmislead/celery_worker"
# a worker's main process answers pings while its pool process runs a run; a few tries ride out a busy broker
PING_TIMEOUT_S = 2.0
PING_TRIES = 3


def _run_asset_keys(run: "DagsterRun", instance: object) -> Iterable["AssetKey"]:
    """The assets the run materializes: its asset selection, else its execution plan's (a whole asset job)."""
    if run.asset_selection:
        return run.asset_selection
    snapshot_id = run.execution_plan_snapshot_id
    if snapshot_id is None:
        return ()
    return instance.get_execution_plan_snapshot(snapshot_id).asset_selection  # type: ignore[attr-defined]


def run_queue(run: "DagsterRun", workspace: "BaseWorkspaceRequestContext | None", instance: object) -> str | None:
    """The host class of the run's assets, read from the workspace's asset graph; None without one."""
    if workspace is None:
        return None
    graph = workspace.asset_graph
    return run_host_class(graph.get(key).tags.get(HOST_CLASS_TAG) for key in _run_asset_keys(run, instance)
                          if graph.has(key))


class HostClassCeleryRunLauncher(CeleryRunLauncher):
    """`CeleryRunLauncher` that tags each run with its assets' host class as its Celery queue."""

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        tags: dict[str, str] = {}
        if QUEUE_TAG not in run.tags:
            queue = run_queue(run, context.workspace, self._instance)
            if queue is not None:
                tags[QUEUE_TAG] = queue
        # a re-execution (run retries) copies its parent's tags: the parent's worker and pool process, gone, must
        # not stand for this run's until its own worker writes them
        tags.update({tag: "" for tag in (CELERY_WORKER_TAG, WORKER_TAG) if run.tags.get(tag)})
        if tags:
            self._instance.add_run_tags(run.run_id, tags)
            tagged = self._instance.get_run_by_id(run.run_id)
            if tagged is not None:
                context = LaunchRunContext(dagster_run=tagged, workspace=context.workspace)
        super().launch_run(context)

    def _answers(self, node: str) -> bool:
        for _ in range(PING_TRIES):
            if self.celery.control.ping(destination=[node], timeout=PING_TIMEOUT_S):
                return True
        return False

    def check_run_worker_health(self, run: "DagsterRun") -> CheckRunHealthResult:
        health = super().check_run_worker_health(run)
        if health.status in (WorkerStatus.SUCCESS, WorkerStatus.FAILED):
            return health
        node = run.tags.get(CELERY_WORKER_TAG)
        if node and not self._answers(node):
            return CheckRunHealthResult(WorkerStatus.FAILED, f"the Celery worker {node} that took the run answers no "
                                        f"ping ({PING_TRIES} x {PING_TIMEOUT_S:.0f} s): its process or host is gone")
        state, why = worker_state(run.tags.get(WORKER_TAG))
        if state == "dead":
            return CheckRunHealthResult(WorkerStatus.FAILED, f"the run's pool process is gone: {why}")
        return health
