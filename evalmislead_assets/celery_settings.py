"""The Celery settings a run worker keeps whatever its dagster.yaml or command line says (celery_app.py applies them).

A Celery task here is a whole Dagster run: minutes to hours. Three Celery defaults suit short tasks and go wrong
for such long ones, so the worker's app fixes them:

* **Acknowledged when it starts** (``task_acks_late = False``): the message of a run is acknowledged as the worker
  starts the run, so Redis never hands a running run to a second worker. A worker killed mid-run therefore leaves
  its run to Dagster's run monitoring (the daemon marks it failed; docs/distributed.md), never to a silent second
  execution by Redis.
* **One run reserved at a time** (``worker_prefetch_multiplier = 1``, ``worker_disable_prefetch``, ``-O fair``):
  with Celery's defaults a busy worker reserves further runs from the queue (4 per process) and hands a reserved
  run to whichever pool process frees first; those runs wait behind a long run while another worker is idle.
  Here a worker takes a run only when a pool process is free, and gives it to a free process.
* **Redis's visibility timeout above the longest run** (``broker_transport_options.visibility_timeout``, 48 h
  unless the profile sets one): Redis hands a message that is not acknowledged within it to another worker. A
  message a worker has taken but not yet started is not acknowledged; with a timeout shorter than a run, a run
  waiting there would be delivered a second time and executed twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VISIBILITY_TIMEOUT_S = 48 * 3600
RUN_WORKER_CONFIG: dict[str, Any] = {
    "task_acks_late": False,
    "worker_prefetch_multiplier": 1,
    "worker_disable_prefetch": True,
}
SCHEDULING = "fair"


def worker_app_args(launcher_app_args: Mapping[str, Any]) -> dict[str, Any]:
    """The Celery app arguments of a run worker: the run launcher's, with ``RUN_WORKER_CONFIG`` and a visibility
    timeout (``VISIBILITY_TIMEOUT_S`` where the launcher's config names none)."""
    config = dict(launcher_app_args.get("config_source") or {})
    config.update(RUN_WORKER_CONFIG)
    transport = dict(config.get("broker_transport_options") or {})
    transport.setdefault("visibility_timeout", VISIBILITY_TIMEOUT_S)
    config["broker_transport_options"] = transport
    return {**launcher_app_args, "config_source": config}


def fix_worker_scheduling(worker: Any) -> None:
    """Fair scheduling and a prefetch multiplier of 1 on a Celery worker being set up (its ``worker_init``), over
    the worker's command line (``-O default``, ``--prefetch-multiplier 4``)."""
    worker.optimization = SCHEDULING
    worker.prefetch_multiplier = RUN_WORKER_CONFIG["worker_prefetch_multiplier"]
