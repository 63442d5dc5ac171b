"""`evalmislead run`'s runs, made and launched through the Dagster instance as the UI makes and launches them.

The code location is the one in workspace.yaml (the UI's and the daemon's), served by a code server this
process starts. A run is created from the location's asset job for the step's asset selection, with the
partition's own tags (Dagster's, as the UI sets them) and the run's tags, then handed to the instance's run
launcher (dagster.yaml's ``run_launcher``). The run executes in its own
run worker, so a run launcher that starts workers elsewhere takes `evalmislead run`'s runs there too.
The queue is not used: its one-run-per-partition limit could hold this command's step behind a run of the same
partition that waits for this command's lock.

This process follows the run in the instance's event log and run storage until it ends; a stop signal
asks the run launcher to terminate the run and waits for it to end.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError

if TYPE_CHECKING:
    from dagster import AssetKey, DagsterInstance

ASSET_JOB = "__ASSET_JOB"
POLL_S = 0.5
STOP_WAIT_S = 30.0  # after a stop signal: how long the run launcher's termination may take


@dataclass
class Finished:
    """A run that ended: its id, whether it succeeded, and its first failure in one line."""

    run_id: str
    success: bool
    status: str
    failure: str = ""
    stopped: bool = False
    events: list[Any] = field(default_factory=list)


class InstanceRuns:
    """Open with ``with InstanceRuns(instance) as runs:``; ``runs.materialize(...)`` makes one run and waits."""

    def __init__(self, instance: "DagsterInstance", workspace: Path | None = None, log_level: str = "INFO") -> None:
        self.instance = instance
        self.workspace = workspace or settings.PROJECT_ROOT / "workspace.yaml"
        self.log_level = log_level
        self._process: Any = None
        self._plans: dict[tuple[frozenset[Any], str], tuple[Any, Any]] = {}

    def __enter__(self) -> "InstanceRuns":
        import dagster
        from dagster._core.workspace.context import WorkspaceProcessContext
        from dagster._core.workspace.load_target import WorkspaceFileTarget

        self._process = WorkspaceProcessContext(
            self.instance, WorkspaceFileTarget(paths=[str(self.workspace)]), version=dagster.__version__,
            code_server_log_level="WARNING")
        context = self._process.create_request_context()
        names = context.code_location_names
        if not names:
            raise ConfigError(f"{self.workspace} names no code location; it should load evalmislead_assets.definitions")
        self.location_name = names[0]
        if context.has_code_location_error(self.location_name):
            error = context.get_code_location_error(self.location_name)
            text = getattr(error, "message", str(error)).strip().splitlines()
            raise ConfigError(f"the code location {self.location_name} of {self.workspace} does not load: "
                              f"{text[-1] if text else error}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.__exit__(None, None, None)
            self._process = None

    def route(self) -> str:
        """How the runs start, for the run's header."""
        return f"launched by DAGSTER_HOME's run launcher {type(self.instance.run_launcher).__name__}"

    def create(self, keys: Sequence["AssetKey"], partition: str | None, tags: Mapping[str, str],
               run_config: Mapping[str, Any]) -> str:
        """A NOT_STARTED run of ``keys`` (and their checks) for ``partition``; its id."""
        from dagster._core.definitions.selector import JobSubsetSelector
        from dagster._core.utils import make_new_run_id
        from dagster._utils.merger import merge_dicts

        context = self._process.create_request_context()
        location = context.get_code_location(self.location_name)
        repository = next(iter(location.get_repositories().values()))
        # the job subset and its execution plan depend on the selection and the run config, not on the
        # partition: asked of the code server once per selection (two round trips a run saved)
        cache_key = (frozenset(keys), repr(sorted(run_config.items())))
        if cache_key not in self._plans:
            selector = JobSubsetSelector(location_name=self.location_name, repository_name=repository.name,
                                         job_name=ASSET_JOB, op_selection=None, asset_selection=list(keys))
            job = location.get_job(selector)
            self._plans[cache_key] = (job, location.get_execution_plan(
                job, dict(run_config), step_keys_to_execute=None, known_state=None, instance=self.instance))
        job, plan = self._plans[cache_key]
        part_tags: dict[str, str] = {}
        if partition is not None:
            pdefs = {repository.asset_graph.get(k).partitions_def for k in keys}
            pdef = next(iter(pdefs))
            part_tags = dict(pdef.get_tags_for_partition_key(partition)) if pdef is not None else {}
        run = self.instance.create_run(
            job_name=ASSET_JOB, run_id=make_new_run_id(), run_config=dict(run_config),
            resolved_op_selection=None, step_keys_to_execute=plan.execution_plan_snapshot.step_keys_to_execute,
            op_selection=None, status=None, root_run_id=None, parent_run_id=None,
            tags=merge_dicts(job.tags, part_tags, dict(tags)),
            job_snapshot=job.job_snapshot, execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=job.parent_job_snapshot, remote_job_origin=job.get_remote_origin(),
            job_code_origin=job.get_python_origin(), asset_selection=frozenset(keys), asset_check_selection=None,
            asset_graph=repository.asset_graph,
        )
        return run.run_id

    def start(self, run_id: str) -> None:
        """Hand the run to the run launcher (never the queue: see the module's docstring)."""
        self.instance.launch_run(run_id, self._process.create_request_context())

    def wait(self, run_id: str, stop_requested: Callable[[], bool]) -> Finished:
        """Follow the run until it ends. A stop (``stop_requested``, or a signal handler's exception while this
        waits) terminates the run through the run launcher and waits for it to end before going on."""
        try:
            while True:
                finished = self._ended(run_id)
                if finished is not None:
                    return finished
                if stop_requested():
                    return self._stop(run_id)
                time.sleep(POLL_S)
        except (KeyboardInterrupt, SystemExit):
            self._stop(run_id)
            raise

    def _ended(self, run_id: str, stopped: bool = False) -> Finished | None:
        from dagster import DagsterRunStatus

        run = self.instance.get_run_by_id(run_id)
        if run is None or run.status not in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE,
                                              DagsterRunStatus.CANCELED):
            return None
        events = [e for e in self.instance.all_logs(run_id) if e.dagster_event is not None]
        success = run.status == DagsterRunStatus.SUCCESS
        return Finished(run_id, success, run.status.value, "" if success else first_failure(events), stopped, events)

    def _stop(self, run_id: str) -> Finished:
        """Terminate the run and wait for it to end (at most ``STOP_WAIT_S``)."""
        self.terminate(run_id)
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline:
            finished = self._ended(run_id, stopped=True)
            if finished is not None:
                return finished
            time.sleep(POLL_S)
        return Finished(run_id, False, "unknown", f"the run did not end within {STOP_WAIT_S:.0f} s of its "
                        "termination", stopped=True)

    def terminate(self, run_id: str) -> None:
        """Ask the instance's run launcher to end the run (a queued one is simply canceled)."""
        from dagster import DagsterRunStatus

        run = self.instance.get_run_by_id(run_id)
        if run is None:
            return
        if run.status in (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED):
            self.instance.report_run_canceled(run, "canceled by a stop signal to evalmislead run")
            return
        self.instance.report_run_canceling(run, "evalmislead run got a stop signal; terminating the run")
        try:
            self.instance.run_launcher.terminate(run_id)
        except Exception as exc:  # a launcher that cannot terminate: the wait's own limit ends it
            print(f"evalmislead: the run launcher could not terminate run {run_id}: {exc}", flush=True)

    def materialize(self, keys: Sequence["AssetKey"], partition: str | None, tags: Mapping[str, str],
                    run_config: Mapping[str, Any], stop_requested: Callable[[], bool]) -> Finished:
        run_id = self.create(keys, partition, tags, run_config)
        try:
            self.start(run_id)
        except Exception as exc:  # the launcher refused or failed to start it: the run's own failure, one line
            run = self.instance.get_run_by_id(run_id)
            if run is not None and not run.is_finished:
                self.instance.report_run_failed(run, f"the run launcher could not start the run: {exc}")
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return Finished(run_id, False, "FAILURE", f"the run launcher could not start the run: {first}")
        return self.wait(run_id, stop_requested)


def first_failure(events: Sequence[Any]) -> str:
    """One line: the failed step and the innermost error (a user error's own message, not Dagster's wrapper)."""
    for entry in events:
        event = getattr(entry, "dagster_event", entry)
        if event is None:
            continue
        if event.is_step_failure or event.is_resource_init_failure or event.is_run_failure:
            err = getattr(event.event_specific_data, "error", None)
            if err is None:
                if event.is_run_failure and (event.message or "").startswith("Execution of run"):
                    continue  # the generic closing line: a step's own failure says more
                return event.message or "unknown failure"
            while getattr(err, "cause", None) is not None and (err.cls_name or "").startswith("Dagster"):
                err = err.cause
            lines = (err.message or "").strip().splitlines()
            text = re.sub(r"^dagster\.[\w.]+\.Failure: ", "", lines[0]) if lines else str(err)
            step = getattr(event, "step_key", None)
            return f"{step}: {text}" if step else text
    for entry in events:
        event = getattr(entry, "dagster_event", entry)
        if event is not None and event.is_run_failure:
            return event.message or "unknown failure"
    return "unknown failure"
