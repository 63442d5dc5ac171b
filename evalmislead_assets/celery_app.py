"""The Celery app of a worker host in the deploy profile (deploy/dagster.postgres-celery.yaml).

Start a worker with ``celery -A evalmislead_assets.celery_app worker -Q cpu`` (docs/distributed.md). The app is
built from the ``run_launcher`` block of ``$DAGSTER_HOME/dagster.yaml``, the same block the head's
`CeleryRunLauncher` reads, so broker, result backend and transport options agree on both sides; on top of it
the worker keeps the settings of celery_settings.py (a run's message acknowledged when it starts, one run
reserved at a time, fair scheduling, Redis's visibility timeout above the longest run), whatever its command line
says. Its tasks are dagster-celery's ``execute_job`` and ``resume_job``: each executes a
whole run in the worker's pool process with the run's own executor (the project's ``in_process_executor``).
Before a run starts, the run is tagged with the worker's node name (``CELERY_WORKER_TAG``), so the UI and
``evalmislead run``'s stored runs say which worker took it.
"""

from __future__ import annotations

from typing import Any

from celery.signals import task_prerun, worker_init
from dagster import DagsterInstance
from dagster._grpc.types import ExecuteRunArgs, ResumeRunArgs
from dagster._serdes import unpack_value
from dagster_celery.launcher import CeleryRunLauncher
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_execute_job_task, create_resume_job_task

from evalmislead_assets.celery_launcher import CELERY_WORKER_TAG
from evalmislead_assets.celery_settings import fix_worker_scheduling, worker_app_args
from evalmislead_assets.errors import ConfigError


def _launcher_app_args() -> dict[str, Any]:
    """The Celery app arguments of DAGSTER_HOME's run launcher; a one-line error when it is not the Celery one."""
    with DagsterInstance.get() as instance:
        launcher = instance.run_launcher
        if not isinstance(launcher, CeleryRunLauncher):
            raise ConfigError(f"DAGSTER_HOME's dagster.yaml ({instance.root_directory}) sets the run launcher "
                              f"{type(launcher).__name__}; a Celery worker needs dagster_celery.launcher."
                              "CeleryRunLauncher (copy deploy/dagster.postgres-celery.yaml there)")
        return launcher.app_args()


app = make_app(worker_app_args(_launcher_app_args()))
execute_job = create_execute_job_task(app)
resume_job = create_resume_job_task(app)


@worker_init.connect
def _fair_one_run_at_a_time(sender: Any = None, **_: Any) -> None:
    """A worker of this app schedules fairly and reserves one run per process (celery_settings.py)."""
    if sender is not None and getattr(sender, "app", None) is app:
        fix_worker_scheduling(sender)


@task_prerun.connect
def _tag_run_with_worker(sender: Any = None, task: Any = None, kwargs: dict[str, Any] | None = None,
                         **_: Any) -> None:
    """Record the worker's node name on the run that the task is about to execute."""
    packed = (kwargs or {}).get("execute_job_args_packed")
    if task is None or packed is None:
        return
    args = unpack_value(packed)
    if not isinstance(args, (ExecuteRunArgs, ResumeRunArgs)):
        return
    with DagsterInstance.get() as instance:
        instance.add_run_tags(args.run_id, {CELERY_WORKER_TAG: str(task.request.hostname)})
