"""The analysis plan and the per-problem counts every analysis is built on (no DuckDB, no Dagster).

Inputs are DataFrames with the columns of the upstream tables (``test_outcomes``,
``test_generations``, ``generated_tests``). Which problems a condition "answered": every
task_id with a row for that condition and thinking mode in any of the three upstream
tables. A problem answered with zero tests (truncated, unimportable, server error, empty
model spec) is in the set and adds zero tests.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalmislead_assets.errors import ConfigError
from evalmislead_assets.execution.cells import CATEGORIES
from evalmislead_assets.store import schema
from evalmislead_assets.store.values import is_missing
from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES

CELLS = list(CATEGORIES)  # the four cells and ``limit`` (a test that ended on a runner cap; in n_tests)
METRICS = {"misleading_rate": "misleading", "effective_rate": "effective"}
SUBSET_CONDITIONS = ("buggy_code", "fixed_code")
SUBSETS = ("all", "truncation_matched")
KEY = ["condition", "thinking", "task_id"]

# ---------------------------------------------------------------- plan


@dataclass(frozen=True)
class Plan:
    """The analysis plan file, parsed, with the sha256 of its bytes."""

    data: dict[str, Any]
    sha256: str
    path: Path

    @property
    def version(self) -> str:
        return str(self.data["version"])

    @property
    def n_boot(self) -> int:
        return int(self.data["bootstrap"]["n_boot"])

    @property
    def level(self) -> float:
        return float(self.data["bootstrap"]["level"])

    @property
    def seed(self) -> int:
        return int(self.data["bootstrap"]["seed"])

    @property
    def zero_rate(self) -> float:
        return float(self.data["bootstrap"].get("zero_denominator_rate", 0.0))

    @property
    def primary_thinking(self) -> str:
        return str(self.data["primary_thinking"])

    @property
    def comparisons(self) -> list[dict[str, Any]]:
        return list(self.data["primary_comparisons"])

    @property
    def comparison_thinking_modes(self) -> list[str]:
        return list(self.data.get("comparison_thinking_modes", THINKING_MODES))

    def comparison_subset(self, thinking: str) -> str:
        """The problems a mode's primary comparisons pair over: 'all' answered, or 'truncation_matched'."""
        return str(self.data.get("comparison_subsets", {}).get(thinking, "all"))

    def section(self, name: str) -> dict[str, Any]:
        return dict(self.data.get(name, {}))

    def boot_kwargs(self) -> dict[str, Any]:
        return {"n_boot": self.n_boot, "level": self.level, "seed": self.seed, "zero_rate": self.zero_rate}


def load_plan(path: Path) -> Plan:
    """The analysis plan at ``path`` (settings.analysis_plan_path() in the wiring), checked; one-line errors."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"analysis plan {path} is missing; restore prompts/analysis_plan.json or fix EVALMISLEAD_ANALYSIS_PLAN")
    raw = path.read_bytes()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"analysis plan {path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"analysis plan {path} is not UTF-8 JSON text (byte {exc.start}); restore "
                          "prompts/analysis_plan.json or fix EVALMISLEAD_ANALYSIS_PLAN") from None
    if not isinstance(data, dict):
        raise ConfigError(f"analysis plan {path} holds a JSON {type(data).__name__}, not an object; "
                          "compare it with the shipped prompts/analysis_plan.json")
    plan = Plan(data, hashlib.sha256(raw).hexdigest(), path)
    _validate_plan(plan)
    return plan


def _validate_plan(plan: Plan) -> None:
    where = f"analysis plan {plan.path}"
    try:
        level, n_boot, _ = plan.level, plan.n_boot, plan.seed
        comparisons, modes = plan.comparisons, plan.comparison_thinking_modes
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where} lacks or mistypes {exc}; compare it with the shipped prompts/analysis_plan.json") from None
    if not 0 < level < 1:
        raise ConfigError(f"{where}: bootstrap.level={level} must be between 0 and 1 (e.g. 0.9875)")
    if n_boot < 100:
        raise ConfigError(f"{where}: bootstrap.n_boot={n_boot} is too few; use at least 100 (the plan uses 10000)")
    for c in comparisons:
        if c.get("metric") not in METRICS:
            raise ConfigError(f"{where}: comparison {c} has metric {c.get('metric')!r}; use one of {list(METRICS)}")
        for side in ("condition_a", "condition_b"):
            if c.get(side) not in CONDITION_NAMES:
                raise ConfigError(f"{where}: comparison {c} has {side}={c.get(side)!r}; use one of {CONDITION_NAMES}")
    bad = [m for m in modes + [plan.primary_thinking] if m not in THINKING_MODES]
    if bad:
        raise ConfigError(f"{where}: thinking modes {bad} unknown; use {THINKING_MODES}")
    subsets = plan.data.get("comparison_subsets", {})
    bad_subsets = {m: s for m, s in subsets.items() if m not in THINKING_MODES or s not in SUBSETS}
    if bad_subsets:
        raise ConfigError(f"{where}: comparison_subsets {bad_subsets} invalid; map a thinking mode to one of {SUBSETS}")
    tc = plan.section("thinking_comparisons")
    if tuple(tc.get("subset_conditions", SUBSET_CONDITIONS)) != SUBSET_CONDITIONS:
        raise ConfigError(f"{where}: thinking_comparisons.subset_conditions must be {list(SUBSET_CONDITIONS)}")


# ---------------------------------------------------------------- per-problem counts


def frame(df: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """The frame, or an empty one with these columns."""
    if df is None or len(df) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return df


def problem_counts(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Per condition x thinking x task_id: n_tests and the four cell counts (only problems with tests)."""
    o = frame(outcomes, KEY + ["outcome"])
    cols = KEY + ["n_tests"] + [f"n_{c}" for c in CELLS]
    if len(o) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object if c in KEY else "int64") for c in cols})
    dummies = pd.DataFrame({f"n_{c}": (o["outcome"] == c).astype("int64") for c in CELLS})
    dummies["n_tests"] = 1
    g = pd.concat([o[KEY].reset_index(drop=True), dummies.reset_index(drop=True)], axis=1)
    return g.groupby(KEY, as_index=False, sort=True).sum()[cols]


def answered(*frames: pd.DataFrame | None) -> pd.DataFrame:
    """Distinct (condition, thinking, task_id, problem_idx) seen in any of the frames."""
    parts = []
    for df in frames:
        if df is None or len(df) == 0:
            continue
        cols = KEY + (["problem_idx"] if "problem_idx" in df.columns else [])
        parts.append(df[cols])
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in KEY + ["problem_idx"]})
    out = pd.concat(parts, ignore_index=True)
    if "problem_idx" not in out.columns:
        out["problem_idx"] = np.nan
    out["problem_idx"] = out["problem_idx"].fillna(out["task_id"].map(_task_number))
    return out.drop_duplicates(KEY).reset_index(drop=True)


def _task_number(task_id: object) -> float:
    m = re.search(r"(\d+)$", str(task_id))
    return float(m.group(1)) if m else np.nan


def cells_present(*frames: pd.DataFrame | None) -> list[tuple[str, str]]:
    """(condition, thinking) pairs with any row, in CONDITION_NAMES x THINKING_MODES order."""
    seen: set[tuple[str, str]] = set()
    for df in frames:
        if df is not None and len(df):
            seen.update(map(tuple, df[["condition", "thinking"]].drop_duplicates().to_numpy().tolist()))
    order = {c: i for i, c in enumerate(CONDITION_NAMES)}
    return sorted(seen, key=lambda ct: (THINKING_MODES.index(ct[1]) if ct[1] in THINKING_MODES else 9,
                                        order.get(ct[0], 99), ct[0]))


def per_problem(counts: pd.DataFrame, problems: pd.DataFrame, condition: str, thinking: str) -> pd.DataFrame:
    """Counts of one condition x thinking over the given problems (task_id, problem_idx), zero-filled."""
    sub = counts[(counts["condition"] == condition) & (counts["thinking"] == thinking)]
    cols = ["n_tests"] + [f"n_{c}" for c in CELLS]
    out = problems[["task_id", "problem_idx"]].merge(sub[["task_id"] + cols], on="task_id", how="left")
    out[cols] = out[cols].fillna(0).astype("int64")
    return out.reset_index(drop=True)


def universe(ans: pd.DataFrame, thinking: str, conditions: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """Problems answered in every one of the conditions (same thinking mode), sorted by problem_idx."""
    sets = []
    for c in conditions:
        a = ans[(ans["condition"] == c) & (ans["thinking"] == thinking)][["task_id", "problem_idx"]]
        sets.append(a)
    if not sets:
        return pd.DataFrame(columns=["task_id", "problem_idx"])
    out = sets[0]
    for s in sets[1:]:
        out = out[out["task_id"].isin(s["task_id"])]
    return out.drop_duplicates("task_id").sort_values(["problem_idx", "task_id"]).reset_index(drop=True)


def rate(num: float, den: float) -> float:
    return float(num) / float(den) if den else float("nan")


def sha_col(df: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    df.insert(0, "plan_sha256", plan.sha256)
    return df


def columns(table: str) -> list[str]:
    """An analysis table's columns as its builder fills them: the schema's, less plan_sha256 (``sha_col``)."""
    return [c for c in schema.column_names(table) if c != "plan_sha256"]


# ---------------------------------------------------------------- what an answer without tests was


def is_false(value: object) -> bool:
    """False (Python, numpy or 0), but not NULL/NaN."""
    if is_missing(value):
        return False
    return not bool(value)


def is_error(error: object) -> bool:
    return isinstance(error, str) and error.strip() != ""


def has_code(generated: pd.DataFrame) -> pd.Series:
    """Per generated_tests row: did the answer yield a test file (code) at all?

    From ``has_code`` or ``source`` (NULL when no code was found, the answer was a server
    error or an empty-spec row); a frame with neither counts every row as having code.
    """
    if "has_code" in generated.columns:
        return generated["has_code"].map(lambda v: not is_false(v) and not is_missing(v)).astype(bool)
    if "source" in generated.columns:
        return generated["source"].map(lambda s: isinstance(s, str) and s.strip() != "").astype(bool)
    return pd.Series(True, index=generated.index)
