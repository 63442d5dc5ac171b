"""sha256 of text, files and rows: the provenance hashes stored in every row, and a partition's content hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from evalmislead_assets.store.values import is_missing

if TYPE_CHECKING:
    import pandas as pd


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def rows_sha256(rows: "pd.DataFrame", columns: Sequence[str]) -> str:
    """sha256 of ``columns`` of ``rows`` whatever their order (rows are sorted by their text); a column the
    frame lacks and a missing value (None, NaN, NA) read the same. Equal content, equal hash."""
    frame = rows.reindex(columns=list(columns))
    lines = sorted(json.dumps([None if is_missing(v) else str(v) for v in record], ensure_ascii=False)
                   for record in frame.itertuples(index=False, name=None))
    return sha256_text("\n".join([json.dumps(list(columns)), *lines]))
