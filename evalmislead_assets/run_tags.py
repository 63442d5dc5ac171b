"""The study a run worked from, as run tags every run carries whichever route launched it (no Dagster here).

The IO manager's set-up writes them onto the run (resources/io_manager.py), so a run launched by
`evalmislead run`, the UI, `evalmislead backfill` or `dagster asset materialize` names the same study file
(its sha256) and the same settings fingerprint when it used the same settings, and `evalmislead run`'s
up-to-date check (cli/up_to_date.py) can trust a partition whichever route made it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

from evalmislead_assets.variables import NOT_ROW_SETTINGS

SETTINGS_TAG = "evalmislead/settings_sha256"
STUDY_TAG = "evalmislead/study_sha256"


def settings_fingerprint(study_text: str, extra: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str:
    """sha256 of what decides a run's rows besides Dagster's code and data versions: the study file's text, the
    EVALMISLEAD_* values in effect and the run's own choices (``extra``)."""
    env = os.environ if environ is None else environ
    values = {k: v for k, v in env.items() if k.startswith("EVALMISLEAD_") and k not in NOT_ROW_SETTINGS}
    blob = json.dumps({"study": study_text, "env": values, "run": dict(extra)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def study_tags(study_text: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tags naming the study file (sha256 of its text) and the settings fingerprint."""
    return {SETTINGS_TAG: settings_fingerprint(study_text, {}, environ),
            STUDY_TAG: hashlib.sha256(study_text.encode()).hexdigest()}
