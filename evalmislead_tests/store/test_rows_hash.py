"""rows_sha256: a partition's content hash, the generation assets' data version (what the UI marks stale)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalmislead_assets.store.hashing import rows_sha256

COLUMNS = ("task_id", "cache_key", "response_text")


def test_equal_rows_in_any_order_and_any_missing_mark_hash_equal() -> None:
    a = pd.DataFrame({"task_id": ["Python/1", "Python/0"], "cache_key": ["k1", "k0"], "response_text": [None, "x"],
                      "created_at": ["now", "then"]})  # a column not hashed
    b = pd.DataFrame({"response_text": ["x", np.nan], "cache_key": ["k0", "k1"], "task_id": ["Python/0", "Python/1"]})
    assert rows_sha256(a, COLUMNS) == rows_sha256(b, COLUMNS)


def test_another_answer_key_or_row_changes_the_hash() -> None:
    base = pd.DataFrame({"task_id": ["Python/0"], "cache_key": ["k0"], "response_text": ["x"]})
    before = rows_sha256(base, COLUMNS)
    assert rows_sha256(base.assign(response_text=["y"]), COLUMNS) != before
    assert rows_sha256(base.assign(cache_key=["k9"]), COLUMNS) != before  # another cap, template or model
    assert rows_sha256(base.assign(response_text=[None]), COLUMNS) != before
    more = pd.concat([base, base.assign(task_id=["Python/1"])], ignore_index=True)
    assert rows_sha256(more, COLUMNS) != before
    assert rows_sha256(base.iloc[0:0], COLUMNS) != before
    assert rows_sha256(base, COLUMNS) != rows_sha256(base, ("task_id", "response_text", "cache_key"))
