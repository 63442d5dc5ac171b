"""What the analysis assets and the cross-model assets (models.py) both read: the three upstream tables,
projected to the columns an analysis needs, and the code version that ties each asset to the plan.

Shared inputs (like problem_inputs.py), so that no group's module imports another group's assets module.
"""

import hashlib
import re
from collections.abc import Callable, Iterable

import pandas as pd
from dagster import AssetIn

from evalmislead_assets import settings
from evalmislead_assets.analysis.plan import Plan, load_plan
from evalmislead_assets.analysis.upstream import OUTCOME_COLUMNS as OUTCOME_COLUMNS
from evalmislead_assets.analysis.upstream import UPSTREAM_COLUMNS

# The three upstream tables every analysis reads, all partitions (the assets are unpartitioned),
# projected to the columns the analysis needs (analysis/upstream.py: `evalmislead verify` reads the same).
UPSTREAM = {table: AssetIn(metadata={"columns": list(columns)}) for table, columns in UPSTREAM_COLUMNS.items()}
# covers: zero-test rules, matched comparisons, verified rates, provenance, MC error and tested-problem counts
CODE_VERSION = "analysis-5"


def study_plan() -> Plan:
    """The analysis plan every analysis asset reads: EVALMISLEAD_ANALYSIS_PLAN, else prompts/analysis_plan.json."""
    return load_plan(settings.analysis_plan_path())


def plan_code_version(template: str | None = None, plan_file: str | None = None) -> str:
    """Code version + plan hash (+ the hash of the file an asset reads besides the plan): a change marks it
    stale. ``template``: a prompt template, read from the prompts folder (EVALMISLEAD_PROMPTS_DIR) as the
    asset reads it; ``plan_file``: a file beside the plan (the reasoning keywords)."""
    try:
        plan = study_plan()
        parts = [f"plan-{plan.sha256[:12]}"]
        for folder, name in ((settings.prompts_dir(), template), (plan.path.parent, plan_file)):
            if name:
                parts.append(f"{name.split('.')[0]}-{hashlib.sha256((folder / name).read_bytes()).hexdigest()[:12]}")
    except Exception:  # an unreadable plan or prompt fails the run itself, with its own error
        parts = ["plan-unreadable"]
    return "+".join([CODE_VERSION, *parts])


def say_notes(warn: Callable[[str], object], info: Callable[[str], object], notes: Iterable[str],
              answers: pd.DataFrame) -> None:
    """Each note as a warning, except one naming only thinking modes (``thinking=on``) with no stored answer at
    all: a mode the study did not run is nothing missing, so that note goes to ``info``."""
    ran = set(answers["thinking"]) if len(answers) and "thinking" in answers.columns else set()
    for note in notes:
        modes = set(re.findall(r"thinking=(\w+)", note))
        (info if modes and not modes & ran else warn)(note)
