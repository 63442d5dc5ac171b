"""A run worker's Celery settings (celery_settings.py): acknowledged at start, one run reserved, fair, and a
visibility timeout above the longest run, from the deploy profile's run launcher block and over a worker's command
line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml
from dagster_celery.make_app import make_app

from evalmislead_assets.celery_launcher import HostClassCeleryRunLauncher
from evalmislead_assets.celery_settings import VISIBILITY_TIMEOUT_S, fix_worker_scheduling, worker_app_args

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "deploy" / "dagster.postgres-celery.yaml"


def _launcher(config_source: dict) -> HostClassCeleryRunLauncher:
    return HostClassCeleryRunLauncher(broker="redis://127.0.0.1:1/0", backend="redis://127.0.0.1:1/1",
                                      default_queue="cpu", config_source=config_source)


def test_the_worker_app_from_the_profile_acks_at_start_reserves_one_run_and_outlasts_the_longest_run() -> None:
    block = yaml.safe_load(PROFILE.read_text())["run_launcher"]
    assert block["class"] == HostClassCeleryRunLauncher.__name__
    conf = make_app(worker_app_args(_launcher(block["config"]["config_source"]).app_args())).conf
    assert conf.task_acks_late is False
    assert conf.worker_prefetch_multiplier == 1
    assert conf.worker_disable_prefetch is True
    assert conf.broker_transport_options["visibility_timeout"] == 48 * 3600


def test_a_profile_without_the_settings_gets_them_and_keeps_its_own_visibility_timeout() -> None:
    plain = make_app(_launcher({"worker_prefetch_multiplier": 8, "task_acks_late": True}).app_args()).conf
    assert (plain.worker_prefetch_multiplier, plain.task_acks_late, plain.worker_disable_prefetch) == (8, True, False)
    assert "visibility_timeout" not in plain.broker_transport_options  # Redis's own default: 1 h
    conf = make_app(worker_app_args(_launcher({"worker_prefetch_multiplier": 8, "task_acks_late": True}).app_args())).conf
    assert (conf.worker_prefetch_multiplier, conf.task_acks_late, conf.worker_disable_prefetch) == (1, False, True)
    assert conf.broker_transport_options["visibility_timeout"] == VISIBILITY_TIMEOUT_S
    own = worker_app_args({"config_source": {"broker_transport_options": {"visibility_timeout": 7 * 86400}}})
    assert own["config_source"]["broker_transport_options"]["visibility_timeout"] == 7 * 86400


def test_a_worker_being_set_up_schedules_fairly_with_one_run_reserved_over_its_command_line() -> None:
    worker = SimpleNamespace(optimization="default", prefetch_multiplier=4)
    fix_worker_scheduling(worker)
    assert (worker.optimization, worker.prefetch_multiplier) == ("fair", 1)
