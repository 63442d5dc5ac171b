"""The analysis plan and pure functions over stored rows: rates, comparisons, matched subset, mentions.

Inputs are DataFrames with the columns of the upstream tables (``test_outcomes``,
``test_generations``, ``generated_tests``); outputs are the rows of the analysis tables
registered below. Nothing here touches DuckDB or Dagster.

Which problems a condition "answered": every task_id with a row for that condition and
thinking mode in any of the three upstream tables. A problem answered with zero tests
(truncated, unimportable, server error) is in the set and adds zero tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalmislead_assets import schema, settings
from evalmislead_assets import statistics as st
from evalmislead_assets.partitions import CONDITION_NAMES, THINKING_MODES
from evalmislead_assets.settings import ConfigError

CELLS = ["misleading", "effective", "both_pass", "both_fail"]
METRICS = {"misleading_rate": "misleading", "effective_rate": "effective"}
SUBSET_CONDITIONS = ("buggy_code", "fixed_code")
KEY = ["condition", "thinking", "task_id"]

# ---------------------------------------------------------------- tables

schema.register_table("condition_rates", [
    ("plan_sha256", "VARCHAR"), ("condition", "VARCHAR"), ("thinking", "VARCHAR"), ("n_problems", "INTEGER"),
    ("n_answers", "INTEGER"), ("n_errors", "INTEGER"), ("n_tests", "INTEGER"), ("n_misleading", "INTEGER"),
    ("n_effective", "INTEGER"), ("n_both_pass", "INTEGER"), ("n_both_fail", "INTEGER"),
    ("misleading_rate", "DOUBLE"), ("effective_rate", "DOUBLE"), ("problems_with_effective", "INTEGER"),
    ("problems_with_misleading", "INTEGER"), ("n_zero_tests", "INTEGER"), ("n_truncated", "INTEGER"),
    ("n_truncated_no_tests", "INTEGER"), ("n_unimportable", "INTEGER"), ("n_tests_collected", "INTEGER"),
    ("misleading_ci_low", "DOUBLE"), ("misleading_ci_high", "DOUBLE"), ("effective_ci_low", "DOUBLE"),
    ("effective_ci_high", "DOUBLE"), ("level", "DOUBLE"), ("n_boot", "INTEGER"), ("seed", "BIGINT"),
])
schema.register_table("bootstrap_comparisons", [
    ("plan_sha256", "VARCHAR"), ("comparison_id", "INTEGER"), ("thinking", "VARCHAR"), ("role", "VARCHAR"),
    ("metric", "VARCHAR"), ("condition_a", "VARCHAR"), ("condition_b", "VARCHAR"), ("rate_a", "DOUBLE"),
    ("rate_b", "DOUBLE"), ("estimate", "DOUBLE"), ("ci_low", "DOUBLE"), ("ci_high", "DOUBLE"), ("level", "DOUBLE"),
    ("n_boot", "INTEGER"), ("seed", "BIGINT"), ("n_problems", "INTEGER"), ("n_tests_a", "INTEGER"),
    ("n_tests_b", "INTEGER"), ("n_zero_denominator", "INTEGER"), ("excludes_zero", "BOOLEAN"), ("verdict", "VARCHAR"),
])
schema.register_table("truncation_matched_subset", [
    ("plan_sha256", "VARCHAR"), ("task_id", "VARCHAR"), ("problem_idx", "INTEGER"),
    ("n_tests_buggy_off", "INTEGER"), ("n_tests_fixed_off", "INTEGER"), ("n_tests_buggy_on", "INTEGER"),
    ("n_tests_fixed_on", "INTEGER"), ("in_subset", "BOOLEAN"),
])
schema.register_table("thinking_comparisons", [
    ("plan_sha256", "VARCHAR"), ("condition", "VARCHAR"), ("metric", "VARCHAR"), ("rate_off", "DOUBLE"),
    ("rate_on", "DOUBLE"), ("estimate", "DOUBLE"), ("ci_low", "DOUBLE"), ("ci_high", "DOUBLE"), ("level", "DOUBLE"),
    ("n_boot", "INTEGER"), ("seed", "BIGINT"), ("n_problems", "INTEGER"), ("n_tests_off", "INTEGER"),
    ("n_tests_on", "INTEGER"), ("n_cell_off", "INTEGER"), ("n_cell_on", "INTEGER"),
    ("n_zero_denominator", "INTEGER"), ("excludes_zero", "BOOLEAN"),
])
schema.register_table("reasoning_mentions", [
    ("plan_sha256", "VARCHAR"), ("keywords_sha256", "VARCHAR"), ("condition", "VARCHAR"), ("thinking", "VARCHAR"),
    ("task_id", "VARCHAR"), ("problem_idx", "INTEGER"), ("has_reasoning", "BOOLEAN"), ("reasoning_chars", "INTEGER"),
    ("mentions", "BOOLEAN"), ("n_matches", "INTEGER"), ("matched_keywords", "VARCHAR"), ("first_snippet", "VARCHAR"),
    ("n_tests", "INTEGER"), ("n_misleading", "INTEGER"), ("has_misleading", "BOOLEAN"),
])
schema.register_table("reasoning_mention_matches", [
    ("plan_sha256", "VARCHAR"), ("keywords_sha256", "VARCHAR"), ("thinking", "VARCHAR"), ("task_id", "VARCHAR"),
    ("keyword", "VARCHAR"), ("match", "VARCHAR"), ("position", "INTEGER"), ("snippet", "VARCHAR"),
])
schema.register_table("reasoning_mention_summary", [
    ("plan_sha256", "VARCHAR"), ("keywords_sha256", "VARCHAR"), ("condition", "VARCHAR"), ("thinking", "VARCHAR"),
    ("mention_group", "VARCHAR"), ("n_problems", "INTEGER"), ("n_problems_with_misleading", "INTEGER"),
    ("n_tests", "INTEGER"), ("n_misleading", "INTEGER"), ("misleading_rate", "DOUBLE"),
])
schema.register_table("spec_label_splits", [
    ("plan_sha256", "VARCHAR"), ("thinking", "VARCHAR"), ("condition", "VARCHAR"), ("category", "VARCHAR"),
    ("n_problems", "INTEGER"), ("n_tests", "INTEGER"), ("n_misleading", "INTEGER"), ("misleading_rate", "DOUBLE"),
    ("n_effective", "INTEGER"), ("effective_rate", "DOUBLE"),
])

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

    def section(self, name: str) -> dict[str, Any]:
        return dict(self.data.get(name, {}))

    def boot_kwargs(self) -> dict[str, Any]:
        return {"n_boot": self.n_boot, "level": self.level, "seed": self.seed, "zero_rate": self.zero_rate}


def plan_path() -> Path:
    """EVALMISLEAD_ANALYSIS_PLAN, else prompts/analysis_plan.json."""
    raw = os.environ.get("EVALMISLEAD_ANALYSIS_PLAN", "").strip()
    return Path(raw) if raw else settings.PROMPTS_DIR / "analysis_plan.json"


def load_plan(path: Path | None = None) -> Plan:
    path = Path(path or plan_path())
    if not path.is_file():
        raise ConfigError(f"analysis plan {path} is missing; restore prompts/analysis_plan.json or fix EVALMISLEAD_ANALYSIS_PLAN")
    raw = path.read_bytes()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"analysis plan {path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
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
    tc = plan.section("thinking_comparisons")
    if tuple(tc.get("subset_conditions", SUBSET_CONDITIONS)) != SUBSET_CONDITIONS:
        raise ConfigError(f"{where}: thinking_comparisons.subset_conditions must be {list(SUBSET_CONDITIONS)}")


# ---------------------------------------------------------------- per-problem counts


def _frame(df: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """The frame, or an empty one with these columns."""
    if df is None or len(df) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return df


def problem_counts(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Per condition x thinking x task_id: n_tests and the four cell counts (only problems with tests)."""
    o = _frame(outcomes, KEY + ["outcome"])
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


def _rate(num: float, den: float) -> float:
    return float(num) / float(den) if den else float("nan")


def _sha_col(df: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    df.insert(0, "plan_sha256", plan.sha256)
    return df


# ---------------------------------------------------------------- condition_rates


def condition_rates(
    outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, plan: Plan
) -> pd.DataFrame:
    """One row per condition x thinking present: counts, pooled rates with intervals, truncation."""
    gens = _frame(generations, KEY + ["problem_idx", "finish_reason", "error"])
    gt = _frame(generated, KEY + ["problem_idx", "n_tests", "import_ok"])
    counts = problem_counts(outcomes)
    ans = answered(gens, gt, outcomes)
    rows = []
    for condition, thinking in cells_present(gens, gt, outcomes):
        probs = universe(ans, thinking, [condition])
        pp = per_problem(counts, probs, condition, thinking)
        g = gens[(gens["condition"] == condition) & (gens["thinking"] == thinking)]
        t = gt[(gt["condition"] == condition) & (gt["thinking"] == thinking)]
        no_tests = set(pp.loc[pp["n_tests"] == 0, "task_id"])
        truncated = g[g["finish_reason"].astype(object).eq("length")]
        errors = g["error"].astype(object).map(lambda e: isinstance(e, str) and e.strip() != "")
        n_tests = int(pp["n_tests"].sum())
        ivs = st.rate_intervals(
            pp[["n_misleading", "n_effective"]].to_numpy(), np.column_stack([pp["n_tests"]] * 2),
            **plan.boot_kwargs(),
        ) if n_tests else [None, None]
        row = {
            "condition": condition, "thinking": thinking, "n_problems": len(pp), "n_answers": int(g["task_id"].nunique()),
            "n_errors": int(errors.sum()), "n_tests": n_tests,
            **{f"n_{c}": int(pp[f"n_{c}"].sum()) for c in CELLS},
            "misleading_rate": _rate(pp["n_misleading"].sum(), n_tests),
            "effective_rate": _rate(pp["n_effective"].sum(), n_tests),
            "problems_with_effective": int((pp["n_effective"] > 0).sum()),
            "problems_with_misleading": int((pp["n_misleading"] > 0).sum()),
            "n_zero_tests": len(no_tests), "n_truncated": int(truncated["task_id"].nunique()),
            "n_truncated_no_tests": int(truncated["task_id"].isin(no_tests).sum()),
            "n_unimportable": int((t["import_ok"].astype(object) == False).sum()),  # noqa: E712 (NULL is not False)
            "n_tests_collected": int(pd.to_numeric(t["n_tests"], errors="coerce").fillna(0).sum()),
        }
        for name, iv in zip(("misleading", "effective"), ivs):
            row[f"{name}_ci_low"] = iv.ci_low if iv else float("nan")
            row[f"{name}_ci_high"] = iv.ci_high if iv else float("nan")
        row.update({"level": plan.level, "n_boot": plan.n_boot, "seed": plan.seed})
        rows.append(row)
    cols = [c for c, _ in schema.TABLES["condition_rates"] if c != "plan_sha256"]
    return _sha_col(pd.DataFrame(rows, columns=cols), plan)


# ---------------------------------------------------------------- bootstrap_comparisons


def bootstrap_comparisons(
    outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, plan: Plan
) -> tuple[pd.DataFrame, list[str]]:
    """The plan's comparisons per thinking mode, paired over the problems both conditions answered.

    Comparisons sharing a pair of conditions share their resamples (one call, seeded with the
    plan's seed), so each row is reproducible on its own. Returns (rows, notes on what was skipped).
    """
    counts = problem_counts(outcomes)
    ans = answered(generations, generated, outcomes)
    present = set(cells_present(generations, generated, outcomes))
    rows, notes = [], []
    for thinking in plan.comparison_thinking_modes:
        pairs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for c in plan.comparisons:
            pairs.setdefault((c["condition_a"], c["condition_b"]), []).append(c)
        for (a, b), comps in pairs.items():
            missing = [x for x in (a, b) if (x, thinking) not in present]
            if missing:
                notes.append(f"thinking={thinking}: {a} vs {b} skipped, no rows for {', '.join(missing)}")
                continue
            probs = universe(ans, thinking, [a, b])
            pa, pb = per_problem(counts, probs, a, thinking), per_problem(counts, probs, b, thinking)
            cells = [METRICS[c["metric"]] for c in comps]
            ivs = st.paired_differences(
                pa[[f"n_{x}" for x in cells]].to_numpy(), np.column_stack([pa["n_tests"]] * len(cells)),
                pb[[f"n_{x}" for x in cells]].to_numpy(), np.column_stack([pb["n_tests"]] * len(cells)),
                **plan.boot_kwargs(),
            )
            for comp, cell, iv in zip(comps, cells, ivs):
                primary = thinking == plan.primary_thinking
                rows.append({
                    "comparison_id": int(comp["id"]), "thinking": thinking,
                    "role": "primary" if primary else "report-only",
                    "metric": comp["metric"], "condition_a": a, "condition_b": b,
                    "rate_a": _rate(pa[f"n_{cell}"].sum(), pa["n_tests"].sum()),
                    "rate_b": _rate(pb[f"n_{cell}"].sum(), pb["n_tests"].sum()),
                    "estimate": iv.estimate, "ci_low": iv.ci_low, "ci_high": iv.ci_high, "level": iv.level,
                    "n_boot": iv.n_boot, "seed": iv.seed, "n_problems": iv.n_problems,
                    "n_tests_a": int(pa["n_tests"].sum()), "n_tests_b": int(pb["n_tests"].sum()),
                    "n_zero_denominator": iv.n_zero_denominator, "excludes_zero": iv.excludes_zero,
                    "verdict": verdict(iv.excludes_zero, primary, iv.n_problems),
                })
    cols = [c for c, _ in schema.TABLES["bootstrap_comparisons"] if c != "plan_sha256"]
    out = pd.DataFrame(rows, columns=cols).sort_values(["thinking", "comparison_id"], kind="stable")
    return _sha_col(out.reset_index(drop=True), plan), notes


def verdict(excludes_zero: bool, primary: bool, n_problems: int) -> str:
    if n_problems == 0:
        return "no data"
    if not primary:
        return "report-only"
    return "difference (interval excludes 0)" if excludes_zero else "no difference claimed (interval includes 0)"


# ---------------------------------------------------------------- truncation-matched subset


def truncation_matched_subset(
    outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, plan: Plan
) -> pd.DataFrame:
    """One row per problem answered in buggy_code or fixed_code; in_subset when all four cells have tests."""
    counts = problem_counts(outcomes)
    ans = answered(generations, generated, outcomes)
    ans = ans[ans["condition"].isin(SUBSET_CONDITIONS)]
    probs = ans.drop_duplicates("task_id")[["task_id", "problem_idx"]].sort_values(["problem_idx", "task_id"])
    out = probs.reset_index(drop=True)
    for cond, short in zip(SUBSET_CONDITIONS, ("buggy", "fixed")):
        for thinking in ("off", "on"):
            out[f"n_tests_{short}_{thinking}"] = per_problem(counts, out, cond, thinking)["n_tests"].to_numpy()
    cols = ["n_tests_buggy_off", "n_tests_fixed_off", "n_tests_buggy_on", "n_tests_fixed_on"]
    out["in_subset"] = (out[cols] > 0).all(axis=1) if len(out) else pd.Series(dtype=bool)
    out["problem_idx"] = out["problem_idx"].astype("int64")
    return _sha_col(out, plan)


def thinking_comparisons(outcomes: pd.DataFrame, subset: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """Thinking on minus off per condition and metric, paired over the truncation-matched problems."""
    tc = plan.section("thinking_comparisons")
    metrics = tc.get("metrics", list(METRICS))
    counts = problem_counts(outcomes)
    probs = subset[subset["in_subset"].astype(bool)][["task_id", "problem_idx"]] if len(subset) else \
        pd.DataFrame(columns=["task_id", "problem_idx"])
    rows = []
    for cond in tc.get("conditions", list(SUBSET_CONDITIONS)):
        off, on = per_problem(counts, probs, cond, "off"), per_problem(counts, probs, cond, "on")
        cells = [METRICS[m] for m in metrics]
        ivs = st.paired_differences(
            on[[f"n_{x}" for x in cells]].to_numpy(), np.column_stack([on["n_tests"]] * len(cells)),
            off[[f"n_{x}" for x in cells]].to_numpy(), np.column_stack([off["n_tests"]] * len(cells)),
            **plan.boot_kwargs(),
        )
        for metric, cell, iv in zip(metrics, cells, ivs):
            rows.append({
                "condition": cond, "metric": metric,
                "rate_off": _rate(off[f"n_{cell}"].sum(), off["n_tests"].sum()),
                "rate_on": _rate(on[f"n_{cell}"].sum(), on["n_tests"].sum()),
                "estimate": iv.estimate, "ci_low": iv.ci_low, "ci_high": iv.ci_high, "level": iv.level,
                "n_boot": iv.n_boot, "seed": iv.seed, "n_problems": iv.n_problems,
                "n_tests_off": int(off["n_tests"].sum()), "n_tests_on": int(on["n_tests"].sum()),
                "n_cell_off": int(off[f"n_{cell}"].sum()), "n_cell_on": int(on[f"n_{cell}"].sum()),
                "n_zero_denominator": iv.n_zero_denominator, "excludes_zero": iv.excludes_zero,
            })
    cols = [c for c, _ in schema.TABLES["thinking_comparisons"] if c != "plan_sha256"]
    return _sha_col(pd.DataFrame(rows, columns=cols), plan)


# ---------------------------------------------------------------- spec label splits


def spec_label_splits(
    outcomes: pd.DataFrame, generations: pd.DataFrame, generated: pd.DataFrame, labels: pd.DataFrame, plan: Plan
) -> pd.DataFrame:
    """Rates of each split condition's tests grouped by the spec's category (same thinking mode).

    ``labels``: thinking, task_id, category. Problems without a label form the group 'unlabelled'.
    """
    conds = plan.section("spec_labels").get("split_conditions", ["buggy_code"])
    counts = problem_counts(outcomes)
    ans = answered(generations, generated, outcomes)
    lab = _frame(labels, ["thinking", "task_id", "category"])
    rows = []
    for thinking in THINKING_MODES:
        lt = lab[lab["thinking"] == thinking][["task_id", "category"]]
        if lt.empty:
            continue
        for cond in conds:
            probs = universe(ans, thinking, [cond])
            if probs.empty:
                continue
            pp = per_problem(counts, probs, cond, thinking).merge(lt, on="task_id", how="left")
            pp["category"] = pp["category"].astype(object).where(pp["category"].notna(), "unlabelled")
            for cat, g in pp.groupby("category", sort=True):
                rows.append({
                    "thinking": thinking, "condition": cond, "category": cat, "n_problems": len(g),
                    "n_tests": int(g["n_tests"].sum()), "n_misleading": int(g["n_misleading"].sum()),
                    "misleading_rate": _rate(g["n_misleading"].sum(), g["n_tests"].sum()),
                    "n_effective": int(g["n_effective"].sum()),
                    "effective_rate": _rate(g["n_effective"].sum(), g["n_tests"].sum()),
                })
    cols = [c for c, _ in schema.TABLES["spec_label_splits"] if c != "plan_sha256"]
    return _sha_col(pd.DataFrame(rows, columns=cols), plan)


# ---------------------------------------------------------------- reasoning mentions

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S | re.I)


@dataclass(frozen=True)
class Keywords:
    patterns: list[tuple[str, re.Pattern[str]]]
    sha256: str


def keywords_path(plan: Plan) -> Path:
    name = plan.section("reasoning_mentions").get("keywords_file", "reasoning_keywords.txt")
    return plan.path.parent / name


def load_keywords(path: Path) -> Keywords:
    """One case-insensitive regex per line; '#' comments and blank lines ignored."""
    if not Path(path).is_file():
        raise ConfigError(f"keyword file {path} is missing; restore prompts/reasoning_keywords.txt")
    text = Path(path).read_text(encoding="utf-8")
    pats = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            pats.append((line, re.compile(line, re.I)))
        except re.error as exc:
            raise ConfigError(f"keyword file {path} line {n}: {line!r} is not a valid regex ({exc})") from None
    return Keywords(pats, hashlib.sha256(text.encode()).hexdigest())


def reasoning_of(reasoning_text: object, response_text: object) -> str:
    """The stored reasoning, else thoughts inline as <think>...</think> in the answer."""
    if isinstance(reasoning_text, str) and reasoning_text.strip():
        return reasoning_text
    if isinstance(response_text, str):
        return "\n".join(m.group(1) for m in _THINK.finditer(response_text)).strip()
    return ""


def find_mentions(text: str, keywords: Keywords, snippet_chars: int = 80) -> list[dict[str, Any]]:
    """Every keyword match, in text order, with the snippet around it (whitespace collapsed)."""
    found = []
    for raw, pat in keywords.patterns:
        for m in pat.finditer(text):
            lo, hi = max(0, m.start() - snippet_chars), min(len(text), m.end() + snippet_chars)
            snippet = " ".join(text[lo:hi].split())
            found.append({"keyword": raw, "match": m.group(0), "position": m.start(), "snippet": snippet})
    return sorted(found, key=lambda d: (d["position"], d["keyword"]))


def reasoning_mentions(
    generations: pd.DataFrame, outcomes: pd.DataFrame, keywords: Keywords, plan: Plan, max_matches: int = 20
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(per answer, per match, summary) for the plan's condition and thinking mode.

    The summary covers problems whose answer produced at least one test: a problem without
    tests cannot get a misleading test whatever its reasoning says.
    """
    sec = plan.section("reasoning_mentions")
    cond, thinking = sec.get("condition", "buggy_code"), sec.get("thinking", "on")
    snip = int(sec.get("snippet_chars", 80))
    gens = _frame(generations, KEY + ["problem_idx", "reasoning_text", "response_text"])
    g = gens[(gens["condition"] == cond) & (gens["thinking"] == thinking)].drop_duplicates("task_id")
    counts = problem_counts(outcomes)
    probs = answered(g).sort_values(["problem_idx", "task_id"])
    pp = per_problem(counts, probs, cond, thinking)
    merged = pp.merge(g[["task_id", "reasoning_text", "response_text"]], on="task_id", how="left")
    answers, matches = [], []
    for _, c in merged.iterrows():
        text = reasoning_of(c["reasoning_text"], c["response_text"])
        found = find_mentions(text, keywords, snip)
        answers.append({
            "keywords_sha256": keywords.sha256, "condition": cond, "thinking": thinking, "task_id": c["task_id"],
            "problem_idx": int(c["problem_idx"]), "has_reasoning": bool(text), "reasoning_chars": len(text),
            "mentions": bool(found), "n_matches": len(found),
            "matched_keywords": json.dumps(sorted({f["keyword"] for f in found})),
            "first_snippet": found[0]["snippet"] if found else None,
            "n_tests": int(c["n_tests"]), "n_misleading": int(c["n_misleading"]),
            "has_misleading": bool(c["n_misleading"] > 0),
        })
        for f in found[:max_matches]:
            matches.append({"keywords_sha256": keywords.sha256, "thinking": thinking, "task_id": c["task_id"], **f})
    ans_cols = [c for c, _ in schema.TABLES["reasoning_mentions"] if c != "plan_sha256"]
    m_cols = [c for c, _ in schema.TABLES["reasoning_mention_matches"] if c != "plan_sha256"]
    per_answer = pd.DataFrame(answers, columns=ans_cols)
    summary = []
    with_tests = per_answer[per_answer["n_tests"] > 0]
    for group, sel in (("mentions", with_tests["mentions"].astype(bool)),
                       ("no_mention", ~with_tests["mentions"].astype(bool)),
                       ("all_with_tests", pd.Series(True, index=with_tests.index))):
        s = with_tests[sel]
        summary.append({
            "keywords_sha256": keywords.sha256, "condition": cond, "thinking": thinking, "mention_group": group,
            "n_problems": len(s), "n_problems_with_misleading": int(s["has_misleading"].astype(bool).sum()),
            "n_tests": int(s["n_tests"].sum()), "n_misleading": int(s["n_misleading"].sum()),
            "misleading_rate": _rate(s["n_misleading"].sum(), s["n_tests"].sum()),
        })
    s_cols = [c for c, _ in schema.TABLES["reasoning_mention_summary"] if c != "plan_sha256"]
    return (_sha_col(per_answer, plan), _sha_col(pd.DataFrame(matches, columns=m_cols), plan),
            _sha_col(pd.DataFrame(summary, columns=s_cols), plan))
