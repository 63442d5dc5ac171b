"""The determinism probe: how much does one generation per problem move the numbers?

llama.cpp is not deterministic at temperature 0 across parallel slots (issue #7052: 8 slots
gave 5 to 8 distinct completions of one prompt; PR #6950: results change with the batch) nor
with its prompt cache. The protocol makes one generation per problem and condition, so the
probe re-sends a seeded sample of the stored test-generation requests, byte for byte, with
the response cache bypassed, scores each new answer with the same extraction and sandbox
path as the execution assets, and reports two shares: answers that came back byte-identical,
and answers whose extracted tests score identically (same test ids, same four-cell outcome
for each).

Sensitivity line (the issue offered (a) "what the interval would be if every changed answer
flipped its cells" or (b) "the spread over k repeated generations of the probe sample"): this
does (b) with k = 2 (the stored generation and the probe's), shown on the number a reader
actually reads (``determinism_sensitivity.py``). For each comparison it takes the probed
answers among the problems that comparison pairs over (thinking on: the truncation-matched
subset), swaps each one's stored test_outcomes counts for those of its re-generation (a
byte-identical answer keeps its stored counts) and recomputes the pooled difference; the line
reports the stored estimate, the swapped one and the shift. Why (b): it reports only what was
observed. (a) needs an assumption about how a changed answer "flips" (its test count changes
too, and a flip to which cell?), and the bound it gives is set by that assumption rather than
by the data. The shift covers only the probed answers (the line says how many of the
comparison's answers were re-drawn), so a full re-run can move the estimate more.

Scoring identity by construction: when the probe's answer text equals the original, the
original's scoring is reused (extraction and collection are functions of the text), so
"identical text but different scoring" cannot occur; the reverse (different text, same
scoring) is common and counted as identical scoring.

No Dagster imports here; the asset is in ``assets/determinism.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from evalmislead_assets.execution.cells import OUTCOMES
from evalmislead_assets.llm.types import ChatRequest, ChatResult
from evalmislead_assets.store.schema import TABLES
from evalmislead_assets.store.values import or_none

TABLE = "determinism_probe"
# what the report section reads: the probe, the comparisons, and what each comparison paired over
ASSET = "determinism_probe"
DEFAULT_SEED = 20260419
COLUMNS = [c for c, _ in TABLES[TABLE]]
_ORIG, _PROBE = "orig", "probe"


# ---------------------------------------------------------------- sampling and requests


def sample(generations: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """A seeded sample of up to ``n`` stored answers (no error, a request body), in a stable order.

    The draw depends only on the stored rows and the seed: rows are ordered by
    (thinking, condition, problem_idx, task_id) before drawing.
    """
    if generations.empty or n <= 0:
        return generations.iloc[0:0].copy()
    ok = generations["request_json"].notna() & generations["response_text"].notna()
    if "error" in generations:
        ok &= generations["error"].isna()
    pool = generations[ok].sort_values(["thinking", "condition", "problem_idx", "task_id"], kind="stable")
    pool = pool.reset_index(drop=True)
    if pool.empty:
        return pool
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(len(pool), size=min(n, len(pool)), replace=False))
    return pool.iloc[picked].reset_index(drop=True)


def probe_requests(drawn: pd.DataFrame) -> list[ChatRequest]:
    """The stored request bodies, to be sent verbatim (same body, hence same cache key)."""
    out = []
    for row in drawn.itertuples(index=False):
        body = json.loads(row.request_json)
        out.append(ChatRequest(
            asset=ASSET, condition=row.condition, thinking=row.thinking, task_id=row.task_id,
            messages=body.get("messages") or [], max_tokens=int(body.get("max_tokens") or 0),
            enable_thinking=bool((body.get("chat_template_kwargs") or {}).get("enable_thinking")),
            raw_body=row.request_json,
        ))
    return out


# ---------------------------------------------------------------- scoring (frames for execution's functions)


def _key(i: int, which: str) -> str:
    return f"{i}/{which}"


def scoring_frame(drawn: pd.DataFrame, results: Sequence[ChatResult]) -> pd.DataFrame:
    """Answers to extract and score, in the shape `build_generated_tests` reads.

    ``task_id`` holds a synthetic key per answer ("<i>/orig", "<i>/probe") so that the two
    answers of one problem stay apart; every original is scored, a probe answer only when
    it arrived and its text differs from the original's (same text: same scoring, reused).
    """
    rows = []
    for i, (g, r) in enumerate(zip(drawn.itertuples(index=False), results)):
        rows.append({"task_id": _key(i, _ORIG), "problem_idx": g.problem_idx, "response_text": g.response_text,
                     "finish_reason": g.finish_reason, "error": None})
        if not r.error and r.text != g.response_text:
            rows.append({"task_id": _key(i, _PROBE), "problem_idx": g.problem_idx, "response_text": r.text,
                         "finish_reason": r.finish_reason, "error": None})
    return pd.DataFrame(rows, columns=["task_id", "problem_idx", "response_text", "finish_reason", "error"])


def problems_for(frame: pd.DataFrame, drawn: pd.DataFrame, problems: pd.DataFrame) -> pd.DataFrame:
    """``problems`` (indexed by task_id) re-indexed by the synthetic keys of ``frame``."""
    real = [drawn["task_id"].iloc[int(k.split("/")[0])] for k in frame["task_id"]]
    present = [t for t in real if t in problems.index]
    out = problems.loc[present].copy()
    out.index = [k for k, t in zip(frame["task_id"], real) if t in problems.index]
    return out


def scored_tests(generated: pd.DataFrame, outcomes: pd.DataFrame) -> dict[str, list[tuple[str, str]]]:
    """Synthetic key -> sorted (test_id, outcome) pairs; an answer with no collected test maps to []."""
    out: dict[str, list[tuple[str, str]]] = {str(k): [] for k in generated["task_id"]}
    for key, test_id, outcome in zip(outcomes["task_id"], outcomes["test_id"], outcomes["outcome"]):
        out.setdefault(str(key), []).append((str(test_id), str(outcome)))
    return {k: sorted(v) for k, v in out.items()}


def _cells(tests: list[tuple[str, str]] | None) -> dict[str, Any]:
    if tests is None:
        return {"n_tests": None, **{c: None for c in OUTCOMES}}
    return {"n_tests": len(tests), **{c: sum(1 for _, o in tests if o == c) for c in OUTCOMES}}


# the error a probe row carries when the probe could not send anything (server down, cannot start): the
# report and the summary say the probe did not run, and why, instead of counting failed requests
NOT_RUN_PREFIX = "probe did not run: "


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def not_run_results(drawn: pd.DataFrame, error: str) -> list[ChatResult]:
    """One failed result per drawn request, each carrying ``error`` (nothing was sent)."""
    return [ChatResult(request_json=str(g.request_json), cache_key=str(g.cache_key), text="", reasoning=None,
                       reasoning_present=False, finish_reason=None, prompt_tokens=None, completion_tokens=None,
                       latency_s=None, server_url=None, server_props_sha256=None, model=None, from_cache=False,
                       error=error) for g in drawn.itertuples(index=False)]


def not_run_reason(probe: pd.DataFrame) -> str | None:
    """Why the probe did not run, when every row says it did not (else None)."""
    if probe.empty or "probe_error" not in probe:
        return None
    errors = [str(e) for e in probe["probe_error"] if isinstance(e, str)]
    if len(errors) != len(probe) or not all(e.startswith(NOT_RUN_PREFIX) for e in errors):
        return None
    return errors[0].removeprefix(NOT_RUN_PREFIX)


def build_rows(
    drawn: pd.DataFrame, results: Sequence[ChatResult], scored: Mapping[str, list[tuple[str, str]]], seed: int,
    now: datetime | None = None,
) -> pd.DataFrame:
    """One `determinism_probe` row per drawn answer: both texts, both cell counts, identity flags, settings."""
    now = now or datetime.now(timezone.utc).replace(tzinfo=None)
    rows = []
    for i, (g, r) in enumerate(zip(drawn.itertuples(index=False), results)):
        original = scored.get(_key(i, _ORIG), [])
        answered = not r.error
        same_text = answered and r.text == g.response_text
        probe = (original if same_text else scored.get(_key(i, _PROBE), [])) if answered else None
        o, p = _cells(original), _cells(probe)
        orig_reasoning = or_none(getattr(g, "reasoning_text", None))
        rows.append({
            "condition": g.condition, "thinking": g.thinking, "task_id": g.task_id, "problem_idx": g.problem_idx,
            "cache_key": g.cache_key, "original_text": g.response_text, "probe_text": r.text if answered else None,
            "identical": same_text if answered else None,
            "reasoning_identical": (orig_reasoning or None) == (r.reasoning or None) if answered else None,
            **{f"original_{k}": v for k, v in o.items()}, **{f"probe_{k}": v for k, v in p.items()},
            "tests_identical": (probe == original) if answered else None,
            "probe_error": r.error, "probe_finish_reason": r.finish_reason,
            "original_total_slots": or_none(getattr(g, "total_slots", None)),
            "original_cache_prompt": or_none(getattr(g, "cache_prompt", None)),
            "original_build_info": or_none(getattr(g, "build_info", None)),
            "probe_total_slots": r.total_slots, "probe_cache_prompt": r.cache_prompt, "probe_build_info": r.build_info,
            "probe_server_url": r.server_url, "sample_seed": seed, "created_at": now,
        })
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in COLUMNS:
        if c.endswith(("n_tests", *OUTCOMES, "total_slots", "problem_idx")):
            df[c] = pd.array(df[c].tolist(), dtype="Int32")
        elif c in ("identical", "reasoning_identical", "tests_identical", "original_cache_prompt",
                   "probe_cache_prompt"):
            df[c] = pd.array([or_none(v) for v in df[c]], dtype="boolean")
    df["sample_seed"] = df["sample_seed"].astype("int64")
    return df


# ---------------------------------------------------------------- figures


@dataclass(frozen=True)
class Summary:
    drawn: int  # requests re-sent
    n: int  # probe answers received (the denominator of both shares)
    errors: int
    identical: int
    tests_identical: int

    @property
    def share_identical(self) -> float | None:
        return self.identical / self.n if self.n else None

    @property
    def share_tests_identical(self) -> float | None:
        return self.tests_identical / self.n if self.n else None


def summarize(probe: pd.DataFrame) -> Summary:
    if probe.empty:
        return Summary(0, 0, 0, 0, 0)
    got = probe[probe["probe_error"].isna()]
    return Summary(
        drawn=len(probe), n=len(got), errors=len(probe) - len(got),
        identical=int(got["identical"].fillna(False).astype(bool).sum()),
        tests_identical=int(got["tests_identical"].fillna(False).astype(bool).sum()),
    )


def by_partition(probe: pd.DataFrame) -> pd.DataFrame:
    """Per condition x thinking: answers, identical text, identical scoring."""
    got = probe[probe["probe_error"].isna()] if len(probe) else probe
    if got.empty:
        return pd.DataFrame(columns=["condition", "thinking", "n", "identical_text", "identical_scoring"])
    g = got.assign(i=got["identical"].astype(bool), t=got["tests_identical"].astype(bool))
    out = g.groupby(["condition", "thinking"], sort=True).agg(n=("i", "size"), identical_text=("i", "sum"),
                                                               identical_scoring=("t", "sum"))
    return out.reset_index().astype({"n": int, "identical_text": int, "identical_scoring": int})
