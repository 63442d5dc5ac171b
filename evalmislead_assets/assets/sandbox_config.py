"""What every asset that runs tests in the sandbox shares: its launchpad settings, the sandbox built from them,
and how it reports the isolation a batch got (the problem columns it reads: problem_inputs.py).

Used by generated_tests, test_outcomes and test_coverage (assets/execution.py, assets/coverage.py),
determinism_probe and mutation_scores. The settings stay per-asset run config (``ops: {test_outcomes:
{config: {workers: 4, timeout_s: 10}}}``), not a resource, so each asset is tuned on its own in the launchpad.
"""

from typing import Optional

from dagster import AssetExecutionContext, Config
from pydantic import Field

from evalmislead_assets import settings
from evalmislead_assets.resources import StudySettingsResource
from evalmislead_assets.sandbox.host import TEST_TIMEOUT_S, Isolation, Limits, Sandbox


class ExecutionConfig(Config):
    """Launchpad settings for running generated tests (the probe's and mutation_scores' configs extend it)."""

    workers: Optional[int] = Field(
        default=None, ge=1,
        description="Parallel test-runner processes. Empty: EVALMISLEAD_SANDBOX_WORKERS, else the number of CPUs.")
    timeout_s: float = Field(default=TEST_TIMEOUT_S, gt=0, description="Seconds per test and version.")


def make_sandbox(config: ExecutionConfig, study: StudySettingsResource, fan_out: bool = False) -> Sandbox:
    """The sandbox an asset runs its tests in: the local pool, or, for an asset that can ``fan_out`` and a study
    file with ``[execution] dask_scheduler``, the Dask cluster there (execution/dask_pool.py; docs/distributed.md).
    On the cluster ``workers`` is the zygotes per task on a worker (empty: the worker host's CPUs over the worker's
    threads)."""
    limits = Limits(timeout_s=config.timeout_s)
    if fan_out:
        execution = settings.execution_settings()
        if execution.dask_scheduler:
            from evalmislead_assets.execution.dask_pool import DaskSandbox  # imports distributed when first used

            return DaskSandbox(execution.dask_scheduler, limits, workers=config.workers,
                               answers_per_task=execution.answers_per_task, setting=settings.dask_scheduler_source())
    workers = config.workers if config.workers is not None else study.value("sandbox_workers")
    return Sandbox(limits, workers=workers)


def warn_if_degraded(context: AssetExecutionContext, sandbox: Sandbox) -> None:
    """One warning per step that ran tests without part of the OS isolation (shared by every sandbox asset)."""
    if sandbox.isolation is not None and sandbox.isolation.missing():
        context.log.warning(f"sandbox ran {isolation_note(sandbox.isolation)}; time, memory, file, process and "
                            "output limits still applied")


def isolation_note(iso: Optional[Isolation]) -> str:
    """The isolation a batch got, for the UI metadata."""
    if iso is None:
        return "no test ran"
    missing = iso.missing()
    return "full (no network, read-only filesystem, PID namespace, own uid)" if not missing else \
        "without " + ", ".join(missing) + (f" ({'; '.join(iso.notes)})" if iso.notes else "")
