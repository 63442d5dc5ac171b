"""`evalmislead verify`'s consistency check: every derived table of a reproduction package, recomputed from the
package's own stored rows with the analysis functions the assets run, compared with the stored table.

Sums alone say that no file changed since export; they do not say the tables agree with each other. A package
whose ``test_outcomes`` row was edited and whose sums were recomputed passes them while its ``condition_rates``
still count the edited test. Here, per model and language of the package:

1. the cell of every stored test (``outcome``) is recomputed from its stored statuses (execution.cells.outcome);
2. each derived table in ``DERIVED`` is recomputed from the stored ``test_outcomes``, ``test_generations`` and
   ``generated_tests`` (for the spec-label splits and agreement also the stored ``spec_labels``, for the
   reasoning mentions the keyword file in ``prompts/``), each projected to the columns its asset reads
   (analysis/upstream.py), under the package's own plan (``plan/``), and compared with the stored rows: the
   same rows (by the table's key columns) and, column by column, the same values (floats within
   ``TOLERANCE``, NULL and NaN alike). The paired-bootstrap intervals are recomputed too: they are
   seeded with the plan's seed, so the same code and numpy give the same bounds.

The first disagreement is reported (table, row key, column, stored and recomputed value); a derived table of
which the package holds no row for a model and language is not checked there (the study did not compute it).
The cross-model and cross-language tables (model_*, language_comparisons) are not recomputed. No Dagster, no
DuckDB file: DuckDB only reads the package's parquet or JSON lines files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from evalmislead_assets.analysis import problem_level, rates, repetition, secondary
from evalmislead_assets.analysis.plan import Plan, load_plan
from evalmislead_assets.analysis.reasoning_mentions import load_keywords
from evalmislead_assets.analysis.spec_labels import agreement
from evalmislead_assets.analysis.tool_policy import INPUT_COLUMNS as TOOL_POLICY_COLUMNS
from evalmislead_assets.analysis.tool_policy import tool_policy
from evalmislead_assets.analysis.upstream import (
    GENERATED_COLUMNS,
    GENERATION_COLUMNS,
    OUTCOME_COLUMNS,
    REASONING_GENERATION_COLUMNS,
    REPETITION_GENERATED_COLUMNS,
    REPETITION_GENERATION_COLUMNS,
    item_name,
)
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.execution.cells import outcome
from evalmislead_assets.store.schema import LANGUAGE_COLUMN, MODEL_COLUMN
from evalmislead_assets.store.values import is_missing
from evalmislead_assets.study.models import DEFAULT_LANGUAGE

#: relative and absolute tolerance of a float comparison: recomputing with the same code gives the same bits;
#: this only absorbs the last digits a file format or a summation order may change
TOLERANCE = 1e-9

# ---------------------------------------------------------------- what is compared


@dataclass(frozen=True)
class Disagreement:
    """One value of a stored table that its recomputation does not give."""

    table: str
    row: str  # the row's key: "condition=buggy_code, thinking=off" (with model and language in a study of several)
    column: str  # a column, or "row" when the whole row is missing on one side
    stored: Any
    recomputed: Any

    def line(self) -> str:
        return (f"{self.table} row {self.row}: {self.column} stored {show(self.stored)}, "
                f"recomputed {show(self.recomputed)}")


@dataclass
class Consistency:
    """What was compared: rows per table (``test_outcomes``: the tests whose cell was recomputed), the derived
    tables with no stored row, and the first disagreement (None: every compared value agrees)."""

    rows: dict[str, int] = field(default_factory=dict)
    not_stored: list[str] = field(default_factory=list)
    first: Disagreement | None = None

    @property
    def ok(self) -> bool:
        return self.first is None


@dataclass
class Inputs:
    """One model's rows of one language: the stored inputs (every column any analysis reads) and the plan."""

    outcomes: pd.DataFrame
    generations: pd.DataFrame
    generated: pd.DataFrame
    spec_labels: pd.DataFrame
    plan: Plan
    keywords: Path | None = None  # the reasoning-mention keyword file the package holds (prompts/)
    done: dict[str, pd.DataFrame] = field(default_factory=dict)  # recomputed tables a later one builds on

    def upstream(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """The three upstream frames as the analysis assets load them (analysis/upstream.py)."""
        return (_project(self.outcomes, OUTCOME_COLUMNS), _project(self.generations, GENERATION_COLUMNS),
                _project(self.generated, GENERATED_COLUMNS))


def _project(df: pd.DataFrame, items: Sequence[str]) -> pd.DataFrame:
    return df[[item_name(i) for i in items]].reset_index(drop=True)


def _test_repeats(x: Inputs) -> pd.DataFrame:
    return repetition.per_test_repeats(_project(x.outcomes, OUTCOME_COLUMNS),
                                       _project(x.generated, REPETITION_GENERATED_COLUMNS))


def _answer_repeats(x: Inputs) -> pd.DataFrame:
    return repetition.per_answer_repeats(x.done["test_repeats"], _project(x.generations, REPETITION_GENERATION_COLUMNS))


def _reasoning(x: Inputs, part: int) -> pd.DataFrame:
    """One of reasoning_mentions' three tables (per answer, per match, summary), computed once for the three, on
    the plan's condition and thinking mode as the asset filters them."""
    if "reasoning_mentions" not in x.done:
        if x.keywords is None:
            raise ConfigError("the package's reasoning-mention tables hold rows but prompts/ holds no keyword file; "
                              "export the package again")
        sec = x.plan.section("reasoning_mentions")
        cond, thinking = sec.get("condition", "buggy_code"), sec.get("thinking", "on")

        def cell(df: pd.DataFrame) -> pd.DataFrame:
            return df[(df["condition"] == cond) & (df["thinking"] == thinking)].reset_index(drop=True)

        tables = secondary.reasoning_mentions(cell(_project(x.generations, REASONING_GENERATION_COLUMNS)),
                                              cell(_project(x.outcomes, OUTCOME_COLUMNS)), load_keywords(x.keywords),
                                              x.plan)
        x.done.update(zip(REASONING_TABLES, tables))
    return x.done[REASONING_TABLES[part]]


REASONING_TABLES = ("reasoning_mentions", "reasoning_mention_matches", "reasoning_mention_summary")


def _with_plan(df: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    df.insert(0, "plan_sha256", plan.sha256)
    return df


#: (table, key columns, recomputation), in the order they are checked: a table another builds on comes first
DERIVED: tuple[tuple[str, tuple[str, ...], Callable[[Inputs], pd.DataFrame]], ...] = (
    ("condition_rates", ("condition", "thinking"), lambda x: rates.condition_rates(*x.upstream(), x.plan)),
    ("bootstrap_comparisons", ("thinking", "comparison_id"),
     lambda x: rates.bootstrap_comparisons(*x.upstream(), x.plan)[0]),
    ("truncation_matched_subset", ("task_id",), lambda x: rates.truncation_matched_subset(*x.upstream(), x.plan)),
    ("thinking_comparisons", ("condition", "metric"),
     lambda x: rates.thinking_comparisons(x.upstream()[0], rates.truncation_matched_subset(*x.upstream(), x.plan),
                                          x.plan, x.upstream()[1])),
    ("problem_rates", ("condition", "thinking"), lambda x: problem_level.problem_rates(*x.upstream(), x.plan)),
    ("problem_comparisons", ("thinking", "comparison_id"),
     lambda x: problem_level.problem_comparisons(*x.upstream(), x.plan)[0]),
    ("tool_policy", ("condition", "thinking"),
     lambda x: tool_policy(_project(x.outcomes, TOOL_POLICY_COLUMNS), x.plan.level)),
    ("test_repeats", ("condition", "thinking", "task_id", "test_id"), _test_repeats),
    ("answer_repeats", ("condition", "thinking", "task_id"), _answer_repeats),
    ("repetition_rates", ("condition", "thinking"),
     lambda x: repetition.repetition_rates(x.done["test_repeats"], x.done["answer_repeats"], x.plan)),
    ("spec_label_agreement", ("thinking", "label"), lambda x: _with_plan(agreement(x.spec_labels), x.plan)),
    ("spec_label_splits", ("thinking", "condition", "split_by", "category"),
     lambda x: secondary.spec_label_splits(*x.upstream(), x.spec_labels, x.plan)),
    ("reasoning_mentions", ("condition", "thinking", "task_id"), lambda x: _reasoning(x, 0)),
    ("reasoning_mention_matches", ("thinking", "task_id", "keyword", "position"), lambda x: _reasoning(x, 1)),
    ("reasoning_mention_summary", ("condition", "thinking", "mention_group"), lambda x: _reasoning(x, 2)),
)
DERIVED_TABLES = tuple(name for name, _, _ in DERIVED)

# every column any recomputation reads, per stored input table
_OUTCOME_ITEMS = [*OUTCOME_COLUMNS, *TOOL_POLICY_COLUMNS, "buggy_status", "fixed_status"]
_INPUT_ITEMS = {
    "test_outcomes": _OUTCOME_ITEMS,
    "test_generations": [*GENERATION_COLUMNS, *REPETITION_GENERATION_COLUMNS, *REASONING_GENERATION_COLUMNS],
    "generated_tests": [*GENERATED_COLUMNS, *REPETITION_GENERATED_COLUMNS],
}

# ---------------------------------------------------------------- values


def show(value: Any) -> str:
    """A value as the one-line report prints it: NULL, an integer, a float to 6 significant digits, text quoted."""
    if is_missing(value):
        return "NULL"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return str(int(value)) if float(value).is_integer() else f"{float(value):.6g}"
    if isinstance(value, str):
        return repr(value)
    return repr(_plain(value))


def key_text(value: Any) -> str:
    """A key cell as a row's name shows it: text as it is, anything else as ``show`` prints it."""
    return value if isinstance(value, str) else show(value)


def _plain(value: Any) -> Any:
    """A value without its numpy or pandas type (arrays as lists), for comparing and showing."""
    if isinstance(value, (np.ndarray, list, tuple)):
        return [_plain(v) for v in value]
    if is_missing(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def same(stored: Any, recomputed: Any, tolerance: float = TOLERANCE) -> bool:
    """Whether two cells hold the same value: NULL and NaN alike, numbers within ``tolerance`` (relative and
    absolute), booleans as booleans, lists element by element, anything else as text."""
    a, b = _plain(stored), _plain(recomputed)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(same(x, y, tolerance) for x, y in zip(a, b)))
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, (bool, int, float)) and isinstance(b, (bool, int, float)) and bool(a) == bool(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=tolerance, abs_tol=tolerance)
    return str(a) == str(b)


def _key_value(value: Any) -> Any:
    """A key cell normalised so that 3, 3.0 and numpy's int32(3) name the same row."""
    v = _plain(value)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v if v is None or isinstance(v, (int, float)) else str(v)


def compare_table(table: str, key: Sequence[str], stored: pd.DataFrame, recomputed: pd.DataFrame,
                  where: str = "") -> Disagreement | None:
    """The first disagreement between a stored table and its recomputation (None: they agree).

    Rows are matched on ``key``; every column both frames have is compared (model_name and language, which the
    stored rows carry and the recomputation does not, are left out), in the recomputation's column order, row
    by row in its row order; then a stored row that the recomputation does not give. ``where`` (the model and
    language) leads the row's name."""
    skip = {MODEL_COLUMN, LANGUAGE_COLUMN, *key}
    columns = [c for c in recomputed.columns if c in stored.columns and c not in skip]

    def name(values: tuple[Any, ...]) -> str:
        return where + ", ".join(f"{k}={key_text(v)}" for k, v in zip(key, values))

    def rows(df: pd.DataFrame) -> dict[tuple[Any, ...], dict[str, Any]]:
        out: dict[tuple[Any, ...], dict[str, Any]] = {}
        for rec in df.to_dict("records"):
            out.setdefault(tuple(_key_value(rec.get(k)) for k in key), rec)
        return out

    have = rows(stored)
    if len(have) < len(stored):
        seen: set[tuple[Any, ...]] = set()
        for rec in stored.to_dict("records"):
            k = tuple(_key_value(rec.get(c)) for c in key)
            if k in seen:
                return Disagreement(table, name(k), "row", "twice", "once")
            seen.add(k)
    got = rows(recomputed)
    for k, rec in got.items():
        if k not in have:
            return Disagreement(table, name(k), "row", None, "present")
        for c in columns:
            if not same(have[k][c], rec[c]):
                return Disagreement(table, name(k), c, have[k][c], rec[c])
    for k in have:
        if k not in got:
            return Disagreement(table, name(k), "row", "present", None)
    return None


def check_cells(outcomes: pd.DataFrame, where: str = "") -> Disagreement | None:
    """The first stored test whose ``outcome`` is not the cell its stored buggy and fixed statuses give."""
    for rec in outcomes.to_dict("records"):
        cell = outcome(str(rec["buggy_status"]), str(rec["fixed_status"]))
        if cell != rec["outcome"]:
            row = where + ", ".join(f"{k}={key_text(rec[k])}" for k in ("condition", "thinking", "task_id", "test_id"))
            return Disagreement("test_outcomes", row, "outcome", rec["outcome"], cell)
    return None


# ---------------------------------------------------------------- the package


def _group(df: pd.DataFrame) -> pd.Series:
    """Each row's (model, language): a missing model is '' (rows of a file from before rows named their model),
    a missing language Python."""
    model = df[MODEL_COLUMN].map(lambda v: "" if is_missing(v) else str(v)) if MODEL_COLUMN in df.columns else \
        pd.Series("", index=df.index)
    lang = df[LANGUAGE_COLUMN].map(lambda v: DEFAULT_LANGUAGE if is_missing(v) else str(v)) \
        if LANGUAGE_COLUMN in df.columns else pd.Series(DEFAULT_LANGUAGE, index=df.index)
    return pd.Series(list(zip(model, lang)), index=df.index, dtype=object)


def _of(df: pd.DataFrame, group: tuple[str, str]) -> pd.DataFrame:
    if len(df) == 0:
        return df
    return df[_group(df).map(lambda g: g == group).astype(bool)].reset_index(drop=True)


class _Reader:
    """The package's tables, read with DuckDB from tables/<name>.<format>."""

    def __init__(self, folder: Path, fmt: str) -> None:
        self.folder, self.fmt = folder, fmt
        self.con = duckdb.connect()

    def source(self, name: str) -> str | None:
        path = self.folder / "tables" / f"{name}.{self.fmt}"
        if not path.is_file():
            return None
        reader = "read_parquet" if self.fmt == "parquet" else "read_json_auto"
        return f"{reader}('{path.as_posix().replace(chr(39), chr(39) * 2)}')"

    def table(self, name: str, items: Sequence[str] | None = None) -> pd.DataFrame:
        """The stored rows (every column, or the select ``items`` plus model_name and language); a select item
        the stored table cannot give (a column an older package lacks) is NULL. No file: no rows."""
        src = self.source(name)
        if src is None:
            return pd.DataFrame()
        if items is None:
            return self.con.execute(f"SELECT * FROM {src}").df()
        have = {r[0] for r in self.con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}
        chosen: dict[str, str] = {}
        for item in [*items, MODEL_COLUMN, LANGUAGE_COLUMN]:
            alias = item_name(item)
            if alias in chosen:
                continue
            if item == alias and item not in have:
                chosen[alias] = f"NULL AS {alias}"
                continue
            try:
                self.con.execute(f"SELECT {item} FROM {src} LIMIT 0")
                chosen[alias] = item
            except duckdb.Error:
                chosen[alias] = f"NULL AS {alias}"
        return self.con.execute(f"SELECT {', '.join(chosen.values())} FROM {src}").df()

    def close(self) -> None:
        self.con.close()


def package_keywords(folder: Path, plan: Plan) -> Path | None:
    """The reasoning-mention keyword file the plan names, as the package holds it (prompts/, the folder the plan
    was read from); None when it is not there."""
    path = Path(folder) / "prompts" / secondary.keywords_path(plan).name
    return path if path.is_file() else None


def package_plan(folder: Path) -> Plan:
    """The analysis plan the package holds (plan/<name>.json), as the assets read theirs."""
    plans = sorted((Path(folder) / "plan").glob("*.json"))
    if len(plans) != 1:
        found = ", ".join(p.name for p in plans) or "none"
        raise ConfigError(f"{folder}/plan holds {found}; the consistency check needs the one analysis plan "
                          "`evalmislead export` copies there (export the package again)")
    return load_plan(plans[0])


def check_package(folder: Path, fmt: str = "parquet") -> Consistency:
    """Every derived table of the package at ``folder`` recomputed from its stored rows and compared; stops at the
    first disagreement."""
    folder = Path(folder)
    plan = package_plan(folder)
    reader = _Reader(folder, fmt)
    try:
        if reader.source("test_outcomes") is None:
            raise ConfigError(f"{folder / 'tables'} has no test_outcomes file; the package cannot be checked "
                              "without it (export it again)")
        inputs = {name: reader.table(name, items) for name, items in _INPUT_ITEMS.items()}
        labels = reader.table("spec_labels")
        stored = {name: reader.table(name) for name in DERIVED_TABLES}
    finally:
        reader.close()
    return check_tables(inputs, labels, stored, plan, package_keywords(folder, plan))


def check_tables(inputs: dict[str, pd.DataFrame], spec_labels: pd.DataFrame, stored: dict[str, pd.DataFrame],
                 plan: Plan, keywords: Path | None = None) -> Consistency:
    """The check on frames: ``inputs`` (test_outcomes, test_generations, generated_tests with every column of
    ``_INPUT_ITEMS``), the stored spec labels and the stored derived tables, per model and language; ``keywords``:
    the reasoning-mention keyword file."""
    result = Consistency()
    seen: set[tuple[str, str]] = set()
    for df in inputs.values():
        if len(df):
            seen.update(_group(df))
    groups = sorted(seen)
    several = len(groups) > 1
    for group in groups:
        where = f"model={group[0] or 'NULL'}, language={group[1]}, " if several else ""
        outcomes = _of(inputs["test_outcomes"], group)
        result.first = check_cells(outcomes, where)
        result.rows["test_outcomes"] = result.rows.get("test_outcomes", 0) + len(outcomes)
        if result.first:
            return result
        x = Inputs(outcomes, _of(inputs["test_generations"], group), _of(inputs["generated_tests"], group),
                   _of(spec_labels, group), plan, keywords)
        for name, key, recompute in DERIVED:
            mine = _of(stored.get(name, pd.DataFrame()), group)
            needed_later = name in ("test_repeats", "answer_repeats")
            if len(mine) == 0 and not needed_later:
                continue
            x.done[name] = again = recompute(x)
            if len(mine) == 0:
                continue
            result.rows[name] = result.rows.get(name, 0) + len(mine)
            result.first = compare_table(name, key, mine, again, where)
            if result.first:
                return result
    result.not_stored = [n for n in DERIVED_TABLES if n not in result.rows]
    return result
