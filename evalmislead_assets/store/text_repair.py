"""Strings made storable before they reach DuckDB: lone surrogates escaped, each repair counted.

DuckDB stores UTF-8, and a Python string can hold code points UTF-8 cannot encode: the
surrogates U+D800-U+DFFF, which JSON's ``"\\ud800"`` escape yields when a server sends half of
a pair. DuckDB refuses such a string ("cannot encode str as UTF-8"), and a deterministic server
sends it on every retry, so one answer would block its partition for good. ``escape_surrogates``
replaces each one with the six characters ``\\udXXX`` (what JSON would write), and the callers
(``Warehouse`` on every write) record what they changed in the ``storage_repairs`` table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

_SURROGATE = re.compile("[\ud800-\udfff]")
REPAIR_SURROGATE = "lone surrogate escaped as \\uXXXX"
# columns that identify a row in the repair record, where a table has them
_KEY_COLUMNS = ("condition", "thinking", "task_id", "cache_key", "test_id")


@dataclass(frozen=True)
class Repair:
    table: str
    column: str
    n_values: int
    first_row: str  # JSON of the first repaired row's key columns (or its parameter position)
    repair: str = REPAIR_SURROGATE


def _escape_match(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def escape_surrogates(text: str) -> str:
    """``text`` with every surrogate code point written as ``\\udXXX``; other text unchanged."""
    return _SURROGATE.sub(_escape_match, text)


def _clean(value: Any) -> tuple[Any, bool]:
    """(storable value, whether it changed) for a string or a list/tuple of strings; others as they are."""
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value, False
        return escape_surrogates(value), True
    if isinstance(value, (list, tuple)):
        changed = False
        out = []
        for item in value:
            new, ch = _clean(item)
            out.append(new)
            changed |= ch
        return (type(value)(out) if changed else value), changed
    return value, False


def sanitise_frame(table: str, df: pd.DataFrame) -> tuple[pd.DataFrame, list[Repair]]:
    """``df`` with its strings made storable (a copy only when something changed), and the repairs."""
    repairs: list[Repair] = []
    out = df
    for column in df.columns:
        series = df[column]
        if series.dtype != object:  # numbers, bools, datetimes; pandas' str dtype cannot hold a surrogate
            continue
        changed_at: list[int] = []
        values = series.tolist()
        for i, value in enumerate(values):
            new, ch = _clean(value)
            if ch:
                values[i] = new
                changed_at.append(i)
        if not changed_at:
            continue
        if out is df:
            out = df.copy()
        out[column] = pd.Series(values, index=df.index, dtype=object)
        first = df.iloc[changed_at[0]]
        key = {k: _plain(first[k]) for k in _KEY_COLUMNS if k in df.columns and k != column}
        repairs.append(Repair(table, str(column), len(changed_at), json.dumps(key, default=str)))
    return out, repairs


def _plain(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and v != v) else v


_INSERT_TABLE = re.compile(r"^\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+([A-Za-z_][\w.]*)", re.IGNORECASE)
_COLUMN_LIST = re.compile(r"^\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+[\w.]+\s*\(([^)]*)\)", re.IGNORECASE)


def sanitise_params(sql: str, params: Sequence[Any] | None) -> tuple[Any, list[Repair]]:
    """The statement's parameters made storable, and the repairs (named by the INSERT's table and column)."""
    if not params or isinstance(params, dict):
        return params, []
    table_m = _INSERT_TABLE.match(sql)
    cols_m = _COLUMN_LIST.match(sql)
    columns = [c.strip() for c in cols_m.group(1).split(",")] if cols_m else []
    out = list(params)
    repairs: list[Repair] = []
    for i, value in enumerate(params):
        new, ch = _clean(value)
        if ch:
            out[i] = new
            column = columns[i] if i < len(columns) else f"parameter {i + 1}"
            key = {c: out[j] for j, c in enumerate(columns) if c in _KEY_COLUMNS and j < len(out) and j != i}
            repairs.append(Repair(table_m.group(1) if table_m else "(statement)", column, 1,
                                  json.dumps(key, default=str)))
    return (out if repairs else params), repairs


def text_column(values: Sequence[str | None]) -> pd.Series:
    """A column of model-written text as plain Python strings (object dtype): pandas' ``str`` dtype (Arrow)
    refuses a lone surrogate outright, so an answer holding one would fail before the write could escape it."""
    return pd.Series(list(values), dtype=object)
