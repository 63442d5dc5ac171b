"""Answer packs: a study's stored answers with their provenance, as files that can be shipped and replayed.

A pack is a folder:

- ``manifest.json``: format, model, provenance the wiring supplies (model file sha256, prompt template
  hashes, settings, git commit, dates) and one entry per shard (file, sha256, answers, first/last time);
- ``server_props.json``: every ``/props`` document an answer names (server build, slots, model path);
- ``study.toml``: the one-model study file the answers were recorded with (`evalmislead run --replay` uses it);
- ``answers-NNNN.jsonl.gz``: the answers, one JSON object a line: the ``llm_cache`` row (cache key,
  exact request body, response body, latency, time) and what its ``llm_calls`` row says (asset,
  condition, thinking, task, token counts). Shards are written once and never changed, so a long
  recording can be committed shard by shard (``append``); gzip without a timestamp, so the same
  answers give the same bytes.

Two requests with the same body have one cache key and one answer (at temperature 0 with one slot, the
model's answer to both): in ``signature_only`` two problems with the same signature, say. The answer is
stored once with the first request's labels; the manifest's ``shared_requests`` lists the other labels
(asset, condition, thinking, task, cache key), so a replay knows those problems are answered too.

Importing fills ``llm_cache`` (and ``server_props``) and nothing else: rows already there are left as they
are, so importing the same pack twice changes nothing. Whether the pack's requests are what the current
prompts and settings would send is the wiring's check (cli/answers_cmd.py), done before anything is written.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.hashing import sha256_text

PACK_FORMAT = 1
MANIFEST = "manifest.json"
PROPS_FILE = "server_props.json"
STUDY_FILE = "study.toml"  # the one-model study file the answers were recorded with (the replay reads it)
SHARD_SIZE = 100  # answers per shard: a shard of the 1.5B's answers is about 100 kB compressed
# the llm_calls columns kept beside each answer (provenance of the request that produced it)
CALL_FIELDS = ("asset", "condition", "thinking", "task_id", "ts", "prompt_tokens", "completion_tokens")
SHARED = "shared_requests"  # manifest key: the other labels of answers whose request body two requests share
LABEL_FIELDS = ("asset", "condition", "thinking", "task_id", "cache_key")


class PackError(ValueError):
    """A pack that cannot be read or does not match: the message is one line naming what and where."""


@dataclass(frozen=True)
class Pack:
    folder: Path
    manifest: dict[str, Any]
    answers: list[dict[str, Any]]
    props: dict[str, dict[str, Any]]  # server_props_sha256 -> /props document

    def labelled(self) -> list[dict[str, Any]]:
        """Every answer once per request it answers: the stored answers, then a copy of an answer for each
        other request with the same body (``shared_requests``) carrying that request's labels."""
        shared = self.manifest.get(SHARED) or []
        if not shared:
            return list(self.answers)
        by_key = {a["cache_key"]: a for a in self.answers}
        return self.answers + [{**by_key[s["cache_key"]], **s} for s in shared if s.get("cache_key") in by_key]


def _json_default(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def stored_answers(wh: Warehouse, model: str | None = None) -> list[dict[str, Any]]:
    """Every llm_cache answer (of ``model``: the request body's model name), with its answered call's fields.

    Ordered by asset, condition, thinking and problem, so a pack lists a study in reading order."""
    df = wh.query_df(
        "WITH calls AS (SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY cache_key "
        "ORDER BY finished_at DESC NULLS LAST) AS rn FROM llm_calls WHERE state = 'answered') WHERE rn = 1) "
        "SELECT c.cache_key, c.request_json, c.response_json, c.server_props_sha256, c.latency_s, c.created_at, "
        "k.asset, k.condition, k.thinking, k.task_id, k.ts, k.prompt_tokens, k.completion_tokens "
        "FROM llm_cache c LEFT JOIN calls k USING (cache_key) "
        "WHERE ? IS NULL OR json_extract_string(c.request_json, '$.model') = ? "
        "ORDER BY k.asset NULLS LAST, k.condition NULLS FIRST, k.thinking, "
        "try_cast(split_part(k.task_id, '/', 2) AS INTEGER), c.cache_key",
        [model, model], read_only=True,
    )
    rows = []
    for rec in df.to_dict("records"):
        rows.append({k: (None if _missing(v) else v) for k, v in rec.items()})
    return rows


def _missing(value: Any) -> bool:
    try:
        return value is None or value != value  # NaN / NaT
    except (TypeError, ValueError):
        return False


def props_documents(wh: Warehouse, shas: Iterable[str | None]) -> dict[str, dict[str, Any]]:
    wanted = sorted({s for s in shas if s})
    if not wanted:
        return {}
    df = wh.query_df("SELECT server_props_sha256, props_json FROM server_props WHERE server_props_sha256 = ANY(?)",
                     [wanted], read_only=True)
    return {sha: json.loads(doc) for sha, doc in zip(df["server_props_sha256"], df["props_json"])}


def _shard_bytes(answers: list[dict[str, Any]]) -> bytes:
    text = "".join(json.dumps(a, sort_keys=True, ensure_ascii=False, default=_json_default) + "\n" for a in answers)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8", "surrogatepass"))
    return buf.getvalue()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PackError(f"{path} is not valid JSON ({exc}); restore it from the repository") from None
    if manifest.get("format") != PACK_FORMAT:
        raise PackError(f"{path}: pack format {manifest.get('format')!r}, this version reads {PACK_FORMAT}")
    return manifest


def write_pack(
    folder: Path, answers: list[dict[str, Any]], props: Mapping[str, dict[str, Any]], provenance: Mapping[str, Any],
    append: bool = False, shared: list[dict[str, Any]] | None = None,
) -> tuple[int, int]:
    """Write ``answers`` as a pack (``append``: only those not in the folder's pack yet, as new shards; with none
    new, no file is written, so the manifest's commit and time stay those of its last answers).

    ``shared``: the labels of requests answered by another request's answer (``shared_requests``).
    Returns (answers written now, answers in the pack). The manifest is written last, so a pack
    interrupted mid-write still reads as its previous state."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(folder) if append else None
    if manifest is None:
        for old in folder.glob("answers-*.jsonl.gz"):
            old.unlink()
        manifest = {"format": PACK_FORMAT, "shards": []}
    have: set[str] = set()
    if manifest["shards"]:
        have = {a["cache_key"] for a in read_pack(folder, check_model=False).answers}
    new = [a for a in answers if a["cache_key"] not in have]
    old_props = read_props(folder) if append else {}
    shared = sorted(shared or [], key=lambda s: [str(s.get(f)) for f in LABEL_FIELDS])
    if (append and manifest["shards"] and not new and props.keys() <= old_props.keys()
            and manifest.get(SHARED, []) == shared):
        return 0, sum(s["answers"] for s in manifest["shards"])  # nothing new: the pack's files stay as they are
    shards = list(manifest["shards"])
    for i in range(0, len(new), SHARD_SIZE):
        chunk = new[i:i + SHARD_SIZE]
        name = f"answers-{len(shards) + 1:04d}.jsonl.gz"
        data = _shard_bytes(chunk)
        _write_atomic(folder / name, data)
        times = sorted(str(a.get("created_at") or "") for a in chunk)
        shards.append({"file": name, "sha256": hashlib.sha256(data).hexdigest(), "answers": len(chunk),
                       "first_created_at": times[0], "last_created_at": times[-1]})
    all_props = {**old_props, **props}
    _write_atomic(folder / PROPS_FILE, (json.dumps(all_props, sort_keys=True, indent=1) + "\n").encode())
    total = sum(s["answers"] for s in shards)
    manifest.update(provenance)
    manifest.update({"format": PACK_FORMAT, "shards": shards, "answers": total})
    if shared:
        manifest[SHARED] = shared
    else:
        manifest.pop(SHARED, None)
    _write_atomic(folder / MANIFEST, (json.dumps(manifest, sort_keys=True, indent=1, default=_json_default) + "\n")
                  .encode())
    return len(new), total


def read_props(folder: Path) -> dict[str, dict[str, Any]]:
    path = Path(folder) / PROPS_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PackError(f"{path} is not valid JSON ({exc})") from None


def read_pack(folder: Path, check_model: bool = True) -> Pack:
    """Read and verify a pack: every shard's sha256, every answer's cache key (the sha256 of its body)."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        raise PackError(f"{folder} holds no answer pack ({MANIFEST} missing)")
    answers: list[dict[str, Any]] = []
    for shard in manifest.get("shards", []):
        path = folder / shard["file"]
        if not path.is_file():
            raise PackError(f"pack shard {path} is missing; restore it from the repository")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != shard["sha256"]:
            raise PackError(f"pack shard {path} does not match its sha256 in {MANIFEST}; restore it")
        try:
            lines = gzip.decompress(data).decode("utf-8", "surrogatepass").splitlines()
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise PackError(f"pack shard {path} cannot be read ({type(exc).__name__})") from None
        for n, line in enumerate(lines, 1):
            answer = json.loads(line)
            if sha256_text(answer["request_json"]) != answer["cache_key"]:
                raise PackError(f"{path} line {n}: the cache key is not the sha256 of the request body")
            answers.append(answer)
    model = manifest.get("model")
    if check_model and model:
        other = next((a for a in answers if json.loads(a["request_json"]).get("model") != model), None)
        if other is not None:
            raise PackError(f"pack {folder} is for model {model!r} but holds a request for "
                            f"{json.loads(other['request_json']).get('model')!r} ({other.get('task_id')})")
    return Pack(folder, manifest, answers, read_props(folder))


def import_answers(wh: Warehouse, pack: Pack) -> tuple[int, int]:
    """Fill llm_cache and server_props from ``pack``; rows already stored are kept. (added, already there)."""
    keys = [a["cache_key"] for a in pack.answers]
    there = set(wh.query_df("SELECT cache_key FROM llm_cache WHERE cache_key = ANY(?)", [keys],
                            read_only=True)["cache_key"]) if keys else set()
    new = [a for a in pack.answers if a["cache_key"] not in there]
    with wh.connect() as con:
        con.execute("BEGIN TRANSACTION")
        try:
            for sha, doc in pack.props.items():
                con.execute(
                    "INSERT OR IGNORE INTO server_props (server_props_sha256, server_url, model, props_json, first_seen)"
                    " VALUES (?, ?, ?, ?, now())",
                    [sha, "answer-pack", doc.get("model_alias") or doc.get("model_path"),
                     json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)],
                )
            for a in new:
                con.execute(
                    "INSERT OR IGNORE INTO llm_cache (cache_key, request_json, response_json, server_url, "
                    "server_props_sha256, latency_s, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [a["cache_key"], a["request_json"], a["response_json"], f"answer-pack:{pack.folder.name}",
                     a.get("server_props_sha256"), a.get("latency_s"), a.get("created_at")],
                )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return len(new), len(there)


def first_difference(pack_body: str, current_body: str) -> str:
    """Where two request bodies first differ, in words: the field, and a few characters of each side."""
    a, b = json.loads(pack_body), json.loads(current_body)
    path, x, y = _diff(a, b, "")
    if isinstance(x, str) and isinstance(y, str):
        i = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
        return (f"{path or 'body'} differs at character {i}: pack {x[max(0, i - 20):i + 30]!r} "
                f"vs now {y[max(0, i - 20):i + 30]!r}")
    return f"{path or 'body'}: pack {_short(x)} vs now {_short(y)}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if value is not _ABSENT else "(absent)"
    return text if len(text) <= 60 else text[:57] + "..."


_ABSENT = object()


def _diff(a: Any, b: Any, path: str) -> tuple[str, Any, Any]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k, _ABSENT) != b.get(k, _ABSENT):
                return _diff(a.get(k, _ABSENT), b.get(k, _ABSENT), f"{path}.{k}" if path else k)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (p, q) in enumerate(zip(a, b)):
            if p != q:
                return _diff(p, q, f"{path}[{i}]")
    return path, a, b
