"""The Celery workers' app (evalmislead_assets/celery_app.py) refuses an instance whose run launcher is not Celery's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_worker_on_the_single_machine_instance_stops_with_one_line_naming_the_profile(tmp_path) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    done = subprocess.run([sys.executable, "-c", "import evalmislead_assets.celery_app"], cwd=tmp_path,
                          env={**os.environ, "DAGSTER_HOME": str(home)}, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "sets the run launcher WorkerCheckingRunLauncher" in last and "deploy/dagster.postgres-celery.yaml" in last
