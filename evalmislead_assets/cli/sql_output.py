"""Result output of `evalmislead sql`: an aligned text table, CSV cells, JSON values."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any


def plain(v: Any) -> Any:
    """A JSON-ready value: NaN as null, bytes as hex."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v


def csv_cell(v: Any) -> Any:
    """A CSV cell: a list (e.g. generated_tests.test_ids, VARCHAR[]) as a JSON array."""
    v = plain(v)
    return json.dumps(v, default=str, ensure_ascii=False) if isinstance(v, (list, dict)) else v


def _cell(v: Any, width: int) -> str:
    text = "NULL" if v is None else str(v)
    text = text.replace("\r", "").replace("\n", "\\n").replace("\t", " ")
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int = 60) -> str:
    """Aligned text table: numbers right-aligned, long cells cut with an ellipsis."""
    if not columns:
        return "(no result set)\n"
    cells = [[_cell(v, width) for v in r] for r in rows]
    numeric = [
        all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) for r in rows if r[i] is not None)
        and any(r[i] is not None for r in rows)
        for i in range(len(columns))
    ]
    widths = [max([len(_cell(c, width))] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return " | ".join(
            (v.rjust(w) if num else v.ljust(w)) for v, w, num in zip(values, widths, numeric)
        ).rstrip() + "\n"

    out = [line([_cell(c, width) for c in columns]), "-+-".join("-" * w for w in widths) + "\n"]
    out += [line(r) for r in cells]
    return "".join(out)


def rows_note(n: int, more: bool) -> str:
    shown = f"({n} row{'s' if n != 1 else ''}"
    return shown + (", more not shown: use --limit, --csv or --json)\n" if more else ")\n")
