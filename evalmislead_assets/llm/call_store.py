"""The LLM client's rows: `llm_calls` (one per HTTP request, written before it is sent and
completed after), `llm_cache` (good answers only) and `server_props`.

A request's row is inserted with state ``sent`` before the request goes out and updated to
``answered`` / ``error`` when it ends, so a process killed mid-request leaves a row that says
so; an interrupt marks the requests it abandons ``abandoned`` (no error: they were not
answered). Each write is one short transaction (see store/database.py, Warehouse).
"""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timezone
from typing import Any

from evalmislead_assets.llm.errors import Attempt, malformed, usage_int
from evalmislead_assets.llm.types import ChatRequest, canonical_json, response_json
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.hashing import sha256_text

SENT, ANSWERED, ERROR, ABANDONED = "sent", "answered", "error", "abandoned"
# /props fields that change on every server start without changing any answer.
_VOLATILE_PROPS = ("media_marker", "is_sleeping")


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class CallStore:
    """llm_calls / llm_cache / server_props of one DuckDB file; ``lock`` serialises this process's writers."""

    def __init__(self, warehouse: Warehouse, lock: threading.Lock) -> None:
        self.warehouse = warehouse
        self.lock = lock

    def begin(self, req: ChatRequest, cache_key: str, server_url: str) -> str:
        """The row of a request about to be sent (state ``sent``); returns its call_id."""
        call_id = uuid.uuid4().hex
        with self.lock, self.warehouse.connect() as con:
            con.execute(
                "INSERT INTO llm_calls (call_id, ts, asset, condition, thinking, task_id, server_url, cache_key, state) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [call_id, now(), req.asset, req.condition, req.thinking, req.task_id, server_url, cache_key, SENT],
            )
        return call_id

    def finish(
        self, call_id: str, attempt: Attempt, latency_s: float, cache_key: str, request_json: str,
        server_url: str, props_sha: str | None, store: bool = True, replace: bool = False,
    ) -> None:
        """Complete the row; a good answer also goes to llm_cache (unless ``store`` is off), in one transaction.

        ``replace``: the cache holds a bad row for this key (written by an older version): overwrite it.
        """
        usage = (attempt.payload or {}).get("usage") or {}
        with self.lock, self.warehouse.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(
                    "UPDATE llm_calls SET status_code = ?, latency_s = ?, prompt_tokens = ?, completion_tokens = ?, "
                    "error = ?, state = ?, finished_at = ? WHERE call_id = ?",
                    [attempt.status, latency_s, usage_int(usage, "prompt_tokens"),
                     usage_int(usage, "completion_tokens"), attempt.error, ANSWERED if attempt.ok else ERROR,
                     now(), call_id],
                )
                if attempt.ok and store:
                    verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
                    con.execute(
                        f"{verb} INTO llm_cache (cache_key, request_json, response_json, server_url, "
                        "server_props_sha256, latency_s, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [cache_key, request_json, response_json(attempt.payload), server_url, props_sha, latency_s,
                         now()],
                    )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def abandon(self, call_ids: list[str], wait_s: float = 2.0) -> None:
        """Mark requests the client stopped waiting for (an interrupt); skipped if the DB is busy."""
        if not call_ids or not self.lock.acquire(timeout=wait_s):
            return
        try:
            quick = Warehouse(self.warehouse.path, lock_timeout_s=wait_s)
            with quick.connect() as con:
                con.execute(
                    f"UPDATE llm_calls SET state = ?, finished_at = ? WHERE state = ? AND call_id IN "
                    f"({', '.join('?' * len(call_ids))})", [ABANDONED, now(), SENT, *call_ids],
                )
        except Exception:  # best effort while the process stops: the rows stay 'sent' (unfinished)
            pass
        finally:
            self.lock.release()

    def cached(self, keys: list[str]) -> tuple[dict[str, dict[str, Any]], set[str]]:
        """(good stored answers by key, keys whose stored row is not an answer: asked again, then replaced)."""
        out: dict[str, dict[str, Any]] = {}
        bad: set[str] = set()
        unique = sorted(set(keys))
        for i in range(0, len(unique), 500):
            chunk = unique[i:i + 500]
            with self.lock, self.warehouse.connect() as con:
                rows = con.execute(
                    "SELECT c.cache_key, c.response_json, c.server_url, c.server_props_sha256, c.latency_s, "
                    "p.props_json FROM llm_cache c LEFT JOIN server_props p USING (server_props_sha256) "
                    "WHERE c.cache_key = ANY(?)", [chunk],
                ).fetchall()
            for key, resp, url, sha, lat, props_json in rows:
                try:
                    response = json.loads(resp) if resp is not None else None
                except ValueError:
                    response = None
                if malformed(response) is not None:
                    bad.add(key)
                    continue
                out[key] = {"response": response, "server_url": url, "props_sha": sha, "latency_s": lat,
                            "props": json.loads(props_json) if props_json else {}}
        return out, bad

    def record_props(self, url: str, props: dict[str, Any]) -> str:
        stable = {k: v for k, v in props.items() if k not in _VOLATILE_PROPS}
        props_json = canonical_json(stable)
        sha = sha256_text(props_json)
        with self.lock, self.warehouse.connect() as con:
            con.execute(
                "INSERT OR IGNORE INTO server_props (server_props_sha256, server_url, model, props_json, first_seen) "
                "VALUES (?, ?, ?, ?, ?)",
                [sha, url, props.get("model_alias") or props.get("model_path"), props_json, now()],
            )
        return sha
