"""Spec labels: the judge's prompt and strict parsing, the human-review CSV, agreement, final labels.

Each model-written spec gets two labels (PROTOCOL.md, "Spec labels"):
``transcribes_bug`` (it states the bug's behaviour as intended) and ``states_correct`` (it
states the correct behaviour of the part the bug changed). A judge model labels every spec
from the buggy/fixed diff; an answer that does not follow the two-line format leaves the
label NULL with the reason in ``judge_error`` (never guessed). A second judge needs no model:
it runs the examples the spec states against both versions (``spec_examples``) and labels only
where they side with one version. A person labels a seeded random sample in a CSV. Per label the
human's value wins, then the execution judge's where it has evidence, then the LLM judge's.

Category (one per spec): ``transcribes_bug`` if (a) is yes; else ``restores_correct`` if
(b) is yes; else ``neither``; NULL while a needed label is missing.
"""

from __future__ import annotations

import csv
import difflib
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalmislead_assets.analysis import bootstrap
from evalmislead_assets.analysis import plan as analysis_plan
from evalmislead_assets.analysis.spec_examples import EXEC_COLUMNS
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.llm.prompts import Template
from evalmislead_assets.llm.reasoning import strip_think
from evalmislead_assets.store.hashing import sha256_text
from evalmislead_assets.store.values import is_missing

JUDGE_TEMPLATE = "spec_judge"
LABELS = ("transcribes_bug", "states_correct")
SOURCES = ("human", "execution", "judge")  # a label's source, first given wins
CATEGORIES = ("transcribes_bug", "restores_correct", "neither")
REVIEW_COLUMNS = [
    "thinking", "task_id", "entry_point", "spec_sha256", "spec_text", "diff",
    "human_transcribes_bug", "human_states_correct", "human_note",
]


JUDGE_CALL_FAILED = "judge call failed"  # judge_error prefix of a server error (not a parse error)


def bug_diff(buggy_code: str, fixed_code: str) -> str:
    """Unified diff buggy -> fixed with the whole function as context."""
    a, b = buggy_code.splitlines(), fixed_code.splitlines()
    lines = difflib.unified_diff(a, b, "buggy", "fixed", lineterm="", n=max(len(a), len(b)))
    return "\n".join(lines)


# ---------------------------------------------------------------- judge prompt and parsing


def judge_prompt(template: Template, entry_point: str, diff: str, spec: str) -> tuple[str, str]:
    """(prompt text, its sha256)."""
    r = template.render(entry_point=entry_point, diff=diff, spec=spec.strip())
    return r.text, r.prompt_sha256


@dataclass(frozen=True)
class JudgeLabels:
    transcribes_bug: bool | None
    states_correct: bool | None
    error: str | None


_DECOR = r"[\s*_`>#-]*"
# the prompt shows the format as "LABEL: <yes|no>"; an answer may keep the angle brackets ("<no>"),
# an echo of the placeholder itself ("<yes|no>") matches nothing and stays NULL
_LINE = re.compile(
    rf"^{_DECOR}(TRANSCRIBES_BUG|STATES_CORRECT){_DECOR}:{_DECOR}<?(yes|no)>?(?![|\w])[\s*_`.]*$", re.I | re.M
)


def parse_judge_answer(text: str | None) -> JudgeLabels:
    """Exactly one 'LABEL: yes|no' line per label (markdown emphasis, <yes> tolerated); anything else is NULL."""
    if not text or not text.strip():
        return JudgeLabels(None, None, "empty answer")
    body = strip_think(text)
    values: dict[str, set[bool]] = {"TRANSCRIBES_BUG": set(), "STATES_CORRECT": set()}
    for m in _LINE.finditer(body):
        values[m.group(1).upper()].add(m.group(2).lower() == "yes")
    out: dict[str, bool | None] = {}
    errors = []
    for key, seen in values.items():
        if len(seen) == 1:
            out[key] = next(iter(seen))
        else:
            out[key] = None
            errors.append(f"{key}: {'conflicting yes and no' if seen else 'no line ' + key + ': yes|no'}")
    return JudgeLabels(out["TRANSCRIBES_BUG"], out["STATES_CORRECT"], "; ".join(errors) or None)


def _chat_request(**fields: Any) -> Any:
    from evalmislead_assets.llm.types import ChatRequest

    return ChatRequest(**fields)


def judge_specs(
    specs: pd.DataFrame, problems: pd.DataFrame, judge: Any, warehouse: Any, *,
    template: Template, max_tokens: int, log: Any = None,
) -> pd.DataFrame:
    """Judge rows (one per spec) through ``judge.run_batch``; specs without text are not sent.

    ``template``: the judge prompt (``load_template(JUDGE_TEMPLATE, ...)``); ``max_tokens``: the judge's
    output cap (EVALMISLEAD_JUDGE_MAX_TOKENS in the wiring).
    """
    probs = problems.set_index("task_id")
    rows: list[dict[str, Any]] = []
    requests, pending = [], []
    for _, s in specs.iterrows():
        task = s["task_id"]
        spec = s.get("spec_text")
        p = probs.loc[task] if task in probs.index else None
        row = {
            "thinking": s["thinking"], "task_id": task,
            "problem_idx": int(p["problem_idx"]) if p is not None else s.get("problem_idx"),
            "entry_point": p["entry_point"] if p is not None else None,
            "spec_sha256": sha256_text(spec) if isinstance(spec, str) else None,
            "judge_template_sha256": template.sha256,
        }
        rows.append(row)
        if p is None:
            row["judge_error"] = "problem not stored; materialize problems"
            continue
        if not isinstance(spec, str) or not spec.strip():
            row["judge_error"] = "no spec text" + (f" (spec error: {s.get('error')})" if s.get("error") else "")
            continue
        text, prompt_sha = judge_prompt(template, p["entry_point"], bug_diff(p["buggy_code"], p["fixed_code"]), spec)
        row["judge_prompt_sha256"] = prompt_sha
        requests.append(_chat_request(
            asset="spec_labels", condition=None, thinking=s["thinking"], task_id=task,
            messages=[{"role": "user", "content": text}], max_tokens=max_tokens, enable_thinking=False,
        ))
        pending.append(row)
    results = judge.run_batch(warehouse, requests, log=log) if requests else []
    for row, res in zip(pending, results):
        row["judge_model"] = getattr(res, "model", None)
        row["judge_cache_key"] = getattr(res, "cache_key", None)
        row["judge_finish_reason"] = getattr(res, "finish_reason", None)
        row["judge_text"] = getattr(res, "text", None)
        if getattr(res, "error", None):
            row["judge_error"] = f"{JUDGE_CALL_FAILED}: {res.error}"
            continue
        parsed = parse_judge_answer(res.text)
        row["judge_transcribes_bug"], row["judge_states_correct"] = parsed.transcribes_bug, parsed.states_correct
        if parsed.error:
            cut = " (answer hit the token cap)" if row["judge_finish_reason"] == "length" else ""
            row["judge_error"] = f"unparseable: {parsed.error}{cut}"
    cols = ["thinking", "task_id", "problem_idx", "entry_point", "spec_sha256", "judge_model",
            "judge_template_sha256", "judge_prompt_sha256", "judge_cache_key", "judge_finish_reason", "judge_text",
            "judge_transcribes_bug", "judge_states_correct", "judge_error"]
    return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------- human review CSV


def review_sample(specs: pd.DataFrame, size: int, seed: int) -> pd.DataFrame:
    """Per thinking mode, a seeded random sample (without replacement) of specs that have text."""
    parts = []
    # a bool mask even when empty: an empty object Series would select columns (KeyError: 'thinking')
    has_text = specs["spec_text"].map(lambda t: isinstance(t, str) and bool(t.strip())).astype(bool)
    for thinking, g in sorted(specs[has_text].groupby("thinking"), key=lambda kv: kv[0]):
        g = g.sort_values("task_id", key=lambda s: s.map(_task_sort_key)).reset_index(drop=True)
        # seeded per mode by its name: one mode's sample does not depend on which others exist
        rng = np.random.default_rng([seed, zlib.crc32(str(thinking).encode())])
        take = rng.choice(len(g), size=min(size, len(g)), replace=False)
        parts.append(g.iloc[np.sort(take)])
    if not parts:
        return specs.iloc[0:0]
    return pd.concat(parts, ignore_index=True)


def _task_sort_key(task_id: str) -> tuple[int, str]:
    m = re.search(r"(\d+)$", str(task_id))
    return (int(m.group(1)) if m else 10**9, str(task_id))


def write_review_csv(path: Path, sample: pd.DataFrame, problems: pd.DataFrame) -> int:
    """Add the sample's rows for thinking modes not yet in the CSV; existing rows (and labels) are kept.

    Returns the number of rows added. The judge's labels are not in the file: the review is blind.
    """
    path = Path(path)
    existing = read_review_rows(path) if path.exists() else []
    have_modes = {r["thinking"] for r in existing}
    probs = problems.set_index("task_id")
    new = []
    for _, s in sample.iterrows():
        if s["thinking"] in have_modes or s["task_id"] not in probs.index:
            continue
        p = probs.loc[s["task_id"]]
        new.append({
            "thinking": s["thinking"], "task_id": s["task_id"], "entry_point": p["entry_point"],
            "spec_sha256": sha256_text(s["spec_text"]), "spec_text": s["spec_text"].strip(),
            "diff": bug_diff(p["buggy_code"], p["fixed_code"]),
            "human_transcribes_bug": "", "human_states_correct": "", "human_note": "",
        })
    if not new:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=REVIEW_COLUMNS)
        w.writeheader()
        for r in existing + new:
            w.writerow({c: r.get(c, "") for c in REVIEW_COLUMNS})
    os.replace(tmp, path)
    return len(new)


def read_review_rows(path: Path) -> list[dict[str, str]]:
    return [row for _, row in _review_records(path)]


def _review_records(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(line number in the file where the record ends, i.e. where its label columns are, row) per record;
    a file that is not UTF-8 CSV text is a one-line error naming it."""
    fix = "fix it or delete it to have it written again"
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            try:
                missing = [c for c in ("thinking", "task_id", "human_transcribes_bug", "human_states_correct")
                           if c not in (reader.fieldnames or [])]
                if missing:
                    raise ConfigError(f"review file {path} lacks columns {missing}; delete it to have it written again")
                return [(reader.line_num, dict(r)) for r in reader]
            except csv.Error as exc:
                raise ConfigError(f"review file {path} line {reader.line_num + 1}: not CSV ({exc}); {fix}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"review file {path} is not UTF-8 text (byte {exc.start}); {fix}") from None


_YES = {"yes", "y", "true", "1"}
_NO = {"no", "n", "false", "0"}


def parse_yes_no(value: str | None, where: str) -> bool | None:
    v = (value or "").strip().lower()
    if not v:
        return None
    if v in _YES:
        return True
    if v in _NO:
        return False
    raise ConfigError(f"{where}: {value!r} is not yes/no; write yes, no, or leave it empty")


def read_review_csv(path: Path) -> pd.DataFrame:
    """Human labels from the CSV (blank = not labelled), one row per sampled spec."""
    rows = []
    for n, r in _review_records(path):
        where = f"review file {path} line {n}"
        rows.append({
            "thinking": r["thinking"], "task_id": r["task_id"], "review_spec_sha256": r.get("spec_sha256") or None,
            "human_transcribes_bug": parse_yes_no(r.get("human_transcribes_bug"), where),
            "human_states_correct": parse_yes_no(r.get("human_states_correct"), where),
            "human_note": (r.get("human_note") or "").strip() or None,
        })
    return pd.DataFrame(rows, columns=["thinking", "task_id", "review_spec_sha256", "human_transcribes_bug",
                                       "human_states_correct", "human_note"])


# ---------------------------------------------------------------- final labels and agreement


def category(transcribes_bug: bool | None, states_correct: bool | None) -> str | None:
    if transcribes_bug is True:
        return "transcribes_bug"
    if transcribes_bug is False and states_correct is True:
        return "restores_correct"
    if transcribes_bug is False and states_correct is False:
        return "neither"
    return None


def _opt(v: Any) -> bool | None:
    return None if is_missing(v) else bool(v)


def _exec_label(category_: Any, lab: str) -> bool | None:
    """The execution judge's value of one label: (a) from either category, (b) only where it restores."""
    if is_missing(category_):
        return None
    if lab == "transcribes_bug":
        return category_ == "transcribes_bug"
    return True if category_ == "restores_correct" else None


def combine(judged: pd.DataFrame, human: pd.DataFrame | None,
            executed: pd.DataFrame | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Judge rows + execution rows + human rows -> final labels. Returns (rows, notes).

    Per label the human's value wins, then the execution judge's where it has evidence
    (``spec_examples.execution_labels``: thinking, task_id, exec_* columns), then the LLM judge's.
    A human row whose spec_sha256 differs from the stored spec (the spec was regenerated) is
    ignored and noted.
    """
    notes: list[str] = []
    out = judged.copy()
    if executed is not None and len(executed):
        ex = executed.drop_duplicates(["thinking", "task_id"])
        out = out.merge(ex[["thinking", "task_id", *EXEC_COLUMNS]], on=["thinking", "task_id"], how="left")
    for c in EXEC_COLUMNS:
        if c not in out.columns:
            out[c] = None
    for c in ("in_review_sample",):
        out[c] = False
    for c in ("human_transcribes_bug", "human_states_correct", "human_note"):
        out[c] = None
    if human is not None and len(human):
        idx = {(t, k): i for i, (t, k) in enumerate(zip(out["thinking"], out["task_id"]))}
        for _, h in human.iterrows():
            i = idx.get((h["thinking"], h["task_id"]))
            if i is None:
                notes.append(f"review row {h['thinking']}/{h['task_id']} has no stored spec; ignored")
                continue
            out.iat[i, out.columns.get_loc("in_review_sample")] = True
            stored = out.iloc[i]["spec_sha256"]
            if h["review_spec_sha256"] and stored and h["review_spec_sha256"] != stored:
                notes.append(f"review row {h['thinking']}/{h['task_id']} is for an older spec; its labels are ignored")
                continue
            for c in ("human_transcribes_bug", "human_states_correct", "human_note"):
                out.iat[i, out.columns.get_loc(c)] = h[c]
    finals: dict[str, list[Any]] = {lab: [] for lab in LABELS}
    sources, cats = [], []
    agree = []
    for _, r in out.iterrows():
        vals, src = {}, []
        for lab in LABELS:
            given = (("human", _opt(r[f"human_{lab}"])), ("execution", _exec_label(r["exec_category"], lab)),
                     ("judge", _opt(r[f"judge_{lab}"])))
            source, value = next(((k, v) for k, v in given if v is not None), (None, None))
            vals[lab] = value
            src.append(source)
            finals[lab].append(value)
        known = [k for k in SOURCES if k in src]
        sources.append("+".join(known) if known else None)
        cats.append(category(vals["transcribes_bug"], vals["states_correct"]))
        llm = category(_opt(r["judge_transcribes_bug"]), _opt(r["judge_states_correct"]))
        agree.append(None if llm is None or is_missing(r["exec_category"]) else llm == r["exec_category"])
    for lab in LABELS:
        out[lab] = pd.Series(finals[lab], index=out.index, dtype=object)
    out["label_source"] = sources
    out["category"] = cats
    out["judges_agree"] = pd.Series(agree, index=out.index, dtype=object)
    cols = analysis_plan.columns("spec_labels")
    return out[cols].reset_index(drop=True), notes


def _agreement_row(thinking: str, label: str, h: list[Any], j: list[Any]) -> dict[str, Any]:
    pairs = [(a, b) for a, b in zip(h, j) if a is not None and b is not None]
    n = len(pairs)
    agree = sum(a == b for a, b in pairs)
    kappa = bootstrap.cohen_kappa(np.array([str(a) for a, _ in pairs]), np.array([str(b) for _, b in pairs]))
    return {"thinking": thinking, "label": label, "n_reviewed": n, "n_agree": agree,
            "agreement": agree / n if n else float("nan"), "kappa": kappa}


def agreement(labels: pd.DataFrame) -> pd.DataFrame:
    """Human vs LLM judge on reviewed specs where both gave the label: counts, fraction, Cohen's kappa; then the
    execution judge's category vs the LLM judge's (every spec) and vs the human's (reviewed specs), where both
    give one (rows ``execution_vs_judge``, ``execution_vs_human``; only where the execution judge ran)."""
    rows = []
    for thinking in sorted(set(labels["thinking"])) if len(labels) else []:
        sub = labels[(labels["thinking"] == thinking) & labels["in_review_sample"].astype(bool)]
        for lab in (*LABELS, "category"):
            if lab == "category":
                h: list[Any] = [category(_opt(a), _opt(b))
                                for a, b in zip(sub["human_transcribes_bug"], sub["human_states_correct"])]
                j: list[Any] = [category(_opt(a), _opt(b))
                                for a, b in zip(sub["judge_transcribes_bug"], sub["judge_states_correct"])]
            else:
                h = [_opt(v) for v in sub[f"human_{lab}"]]
                j = [_opt(v) for v in sub[f"judge_{lab}"]]
            rows.append(_agreement_row(thinking, lab, h, j))
        every = labels[labels["thinking"] == thinking]
        if "exec_n_examples" not in every.columns or not every["exec_n_examples"].notna().any():
            continue  # the execution judge did not run (a table stored before it)
        ex = [None if is_missing(v) else str(v) for v in every["exec_category"]]
        llm = [category(_opt(a), _opt(b)) for a, b in zip(every["judge_transcribes_bug"], every["judge_states_correct"])]
        rows.append(_agreement_row(thinking, "execution_vs_judge", ex, llm))
        reviewed = every["in_review_sample"].astype(bool).to_numpy()
        hum = [category(_opt(a), _opt(b)) for a, b in zip(every["human_transcribes_bug"], every["human_states_correct"])]
        rows.append(_agreement_row(thinking, "execution_vs_human", [e for e, r in zip(ex, reviewed) if r],
                                   [x for x, r in zip(hum, reviewed) if r]))
    cols = analysis_plan.columns("spec_label_agreement")
    return pd.DataFrame(rows, columns=cols)


def category_counts(labels: pd.DataFrame) -> pd.DataFrame:
    """Specs per thinking mode and category (NULL category shown as 'unlabelled')."""
    if labels.empty:
        return pd.DataFrame(columns=["thinking", "category", "n_specs"])
    cat = labels["category"].astype(object).where(labels["category"].notna(), "unlabelled")
    return (labels.assign(category=cat).groupby(["thinking", "category"]).size()
            .rename("n_specs").reset_index())


def execution_counts(labels: pd.DataFrame) -> pd.DataFrame:
    """Specs per thinking mode and execution-judge category; ``no_evidence`` where it gives none."""
    if labels.empty or "exec_category" not in labels.columns:
        return pd.DataFrame(columns=["thinking", "exec_category", "n_specs"])
    cat = labels["exec_category"].astype(object).where(labels["exec_category"].notna(), "no_evidence")
    return (labels.assign(exec_category=cat).groupby(["thinking", "exec_category"]).size()
            .rename("n_specs").reset_index())


def human_labels_given(human: pd.DataFrame | None) -> int:
    if human is None or human.empty:
        return 0
    return int((human["human_transcribes_bug"].notna() | human["human_states_correct"].notna()).sum())
