"""Stale runs: a run whose worker process is gone is marked failed, so its partition is free again.

Dagster's default run launcher cannot tell whether a STARTED run's worker still lives. The code
server that started a worker reports its death while the code server itself lives; a run whose
code server died too (a crash, an OOM kill of the group) and a run executed in its own process
(`evalmislead run`, `dagster asset materialize`) killed with SIGKILL stay STARTED for good, and the
one-run-per-partition limit in dagster.yaml never lets their partition run again. Every run of
this project records its worker (the process that sets up the `io_manager`) in the run tag
``evalmislead/run_worker`` (`tag_run_worker`); every job here runs its steps in the run's own
process (``in_process_executor`` in definitions.py and jobs.py), so that process is the run worker
(a multiprocess executor would record a step process instead, which ends before its run does).
Two places read it back:

* `WorkerCheckingRunLauncher` (dagster.yaml's ``run_launcher``): the default launcher plus a
  worker health check, so the dagster-daemon's run monitoring fails a STARTED run whose worker
  is gone (every ``run_monitoring.poll_interval_seconds``);
* `fail_stale_runs`, called by `evalmislead run` before its first run (no daemon needed).

A run without the tag (killed before its resources were set up, or older than this) and a worker
on another host are left alone: nothing here can tell whether they live.
"""

from __future__ import annotations

from dataclasses import dataclass

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus
from dagster._core.storage.dagster_run import DagsterRun

from evalmislead_assets.run_worker import WORKER_TAG, this_worker, worker_state

PARTITION_TAG = "dagster/partition"


def tag_run_worker(instance: DagsterInstance, run_id: str) -> None:
    """Record this process as the run's worker (idempotent; the latest setter wins)."""
    run = instance.get_run_by_id(run_id)
    me = this_worker()
    if run is not None and run.tags.get(WORKER_TAG) != me:
        instance.add_run_tags(run_id, {WORKER_TAG: me})


def _health(run: DagsterRun) -> CheckRunHealthResult:
    state, why = worker_state(run.tags.get(WORKER_TAG))
    if state == "dead":
        return CheckRunHealthResult(WorkerStatus.FAILED, why)
    return CheckRunHealthResult(WorkerStatus.RUNNING, why)  # alive, or nothing we can tell


class WorkerCheckingRunLauncher(DefaultRunLauncher):
    """Dagster's default run launcher, plus a worker health check from the run's worker tag."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        return _health(run)


@dataclass(frozen=True)
class StaleRun:
    run_id: str
    job_name: str
    partition: str | None
    why: str

    def line(self) -> str:
        where = f" (partition {self.partition})" if self.partition else ""
        return f"run {self.run_id} of {self.job_name}{where} was still STARTED but {self.why}; marked failed"


def fail_stale_runs(instance: DagsterInstance) -> list[StaleRun]:
    """Mark every STARTED run whose worker process is gone as failed; returns what was marked."""
    out: list[StaleRun] = []
    for record in instance.get_run_records(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED])):
        run = record.dagster_run
        health = _health(run)
        if health.status != WorkerStatus.FAILED:
            continue
        current = instance.get_run_by_id(run.run_id)
        if current is None or current.status != DagsterRunStatus.STARTED:
            continue  # it finished meanwhile
        stale = StaleRun(run.run_id, run.job_name, run.tags.get(PARTITION_TAG), health.msg or "its worker is gone")
        instance.report_run_failed(current, f"Run worker gone: {stale.why}. Marked failed so its partition "
                                            "can run again; stored rows are kept, re-run to resume.")
        out.append(stale)
    return out
