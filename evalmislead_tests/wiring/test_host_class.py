"""Host classes: the steps that call the model need a GPU host, and a run's Celery queue is its assets' class."""

from __future__ import annotations

from types import SimpleNamespace

from dagster import AssetKey

from evalmislead_assets.celery_launcher import run_queue
from evalmislead_assets.dagster_metadata import HOST_CLASS_TAG
from evalmislead_assets.host_class import run_host_class


def test_a_run_needs_the_most_demanding_class_of_its_assets() -> None:
    assert run_host_class(["cpu", None, "gpu"]) == "gpu"
    assert run_host_class([None, "cpu"]) == "cpu"
    assert run_host_class([None, ""]) is None
    assert run_host_class(["bigmem", "cpu"]) == "cpu"
    assert run_host_class(["bigmem", "arm"]) == "arm"


def test_the_assets_that_call_the_model_and_only_they_are_gpu_class() -> None:
    from evalmislead_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    gpu = {k.path[-1] for k in graph.materializable_asset_keys
           if graph.get(k).tags.get(HOST_CLASS_TAG) == "gpu"}
    assert {"model_specs", "test_generations", "determinism_probe"} <= gpu, gpu
    assert not gpu & {"generated_tests", "test_outcomes", "condition_rates", "problems"}, gpu


class _Graph:
    def __init__(self, tags: dict[AssetKey, dict[str, str]]) -> None:
        self.tags = tags

    def has(self, key: AssetKey) -> bool:
        return key in self.tags

    def get(self, key: AssetKey) -> SimpleNamespace:
        return SimpleNamespace(tags=self.tags[key])


def test_the_queue_of_a_run_is_read_off_its_assets_tags() -> None:
    gen, out = AssetKey("test_generations"), AssetKey("test_outcomes")
    workspace = SimpleNamespace(asset_graph=_Graph({gen: {HOST_CLASS_TAG: "gpu"}, out: {}}))
    chain = SimpleNamespace(asset_selection=frozenset({gen, out}), execution_plan_snapshot_id=None)
    outcomes = SimpleNamespace(asset_selection=frozenset({out}), execution_plan_snapshot_id=None)
    assert run_queue(chain, workspace, None) == "gpu"  # type: ignore[arg-type]
    assert run_queue(outcomes, workspace, None) is None  # type: ignore[arg-type]
    assert run_queue(chain, None, None) is None  # type: ignore[arg-type]


def _health_launcher(monkeypatch, celery_says: str, answers: bool):
    from dagster._core.launcher import CheckRunHealthResult, WorkerStatus
    from dagster_celery.launcher import CeleryRunLauncher

    from evalmislead_assets.celery_launcher import HostClassCeleryRunLauncher

    monkeypatch.setattr(CeleryRunLauncher, "check_run_worker_health",
                        lambda self, run: CheckRunHealthResult(WorkerStatus[celery_says]))
    monkeypatch.setattr(HostClassCeleryRunLauncher, "_answers", lambda self, node: answers)
    return HostClassCeleryRunLauncher(broker="redis://127.0.0.1:1/0", backend="redis://127.0.0.1:1/1",
                                      default_queue="cpu")


def test_a_started_run_whose_worker_answers_no_ping_is_failed(monkeypatch) -> None:
    from dagster._core.launcher import WorkerStatus

    run = SimpleNamespace(tags={"evalmislead/celery_worker": "gpu-1@host-a"})
    gone = _health_launcher(monkeypatch, "RUNNING", answers=False).check_run_worker_health(run)  # type: ignore[arg-type]
    assert gone.status == WorkerStatus.FAILED and "gpu-1@host-a" in (gone.msg or "")
    alive = _health_launcher(monkeypatch, "RUNNING", answers=True).check_run_worker_health(run)  # type: ignore[arg-type]
    assert alive.status == WorkerStatus.RUNNING
    # no worker took it yet (or a re-execution whose worker tags were cleared at launch): nothing to ping
    waiting = _health_launcher(monkeypatch, "RUNNING", answers=False).check_run_worker_health(
        SimpleNamespace(tags={"evalmislead/celery_worker": ""}))  # type: ignore[arg-type]
    assert waiting.status == WorkerStatus.RUNNING
    # Celery's own verdict stands
    done = _health_launcher(monkeypatch, "SUCCESS", answers=False).check_run_worker_health(run)  # type: ignore[arg-type]
    assert done.status == WorkerStatus.SUCCESS


def test_a_started_run_whose_pool_process_on_this_host_is_gone_is_failed(monkeypatch) -> None:
    import socket
    import subprocess
    import sys

    from dagster._core.launcher import WorkerStatus

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    run = SimpleNamespace(tags={"evalmislead/celery_worker": "cpu-1@here",
                                "evalmislead/run_worker": f"{socket.gethostname()}:{child.pid}:"})
    health = _health_launcher(monkeypatch, "RUNNING", answers=True).check_run_worker_health(run)  # type: ignore[arg-type]
    assert health.status == WorkerStatus.FAILED and str(child.pid) in (health.msg or "")
