"""Reasoning-mention matcher: does a thinking-on answer's reasoning notice the code's bug?

The patterns and exclusions live in ``prompts/reasoning_keywords.txt`` (the editable source of
truth; its sha256 goes into every row). Matching works per sentence (split at ``. ! ?`` followed
by white space, and at line breaks); a sentence is cut into clauses at ``, ; :``, dashes and
brackets. An exclusion removes every clause its match overlaps (the self-correction clause,
not the whole sentence); the patterns then search each remaining run of clauses, so a pattern
never spans an excluded clause or a sentence end. Pure (no pandas, no Dagster).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalmislead_assets.errors import ConfigError
from evalmislead_assets.llm.reasoning import think_text


@dataclass(frozen=True)
class Keywords:
    patterns: list[tuple[str, re.Pattern[str]]]
    sha256: str
    exclusions: list[tuple[str, re.Pattern[str]]] = field(default_factory=list)


EXCLUDE = "exclude:"
# sentence ends: . ! ? followed by white space (not "0.5", "e.g.x"), and line breaks
_SENTENCE_END = re.compile(r"[.!?]+(?=\s)|\n")
# clause ends inside a sentence: , ; : followed by white space, dashes, brackets
_CLAUSE_END = re.compile(r"[,;:](?=\s)|\s[-\u2013\u2014]+\s|[\u2013\u2014()]")


def load_keywords(path: Path) -> Keywords:
    """One case-insensitive regex per line; 'exclude: REGEX' lines are exclusions; '#' comments, blanks ignored."""
    if not Path(path).is_file():
        raise ConfigError(f"keyword file {path} is missing; restore prompts/reasoning_keywords.txt")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"keyword file {path} is not UTF-8 text (byte {exc.start}); "
                          "restore prompts/reasoning_keywords.txt") from None
    pats: list[tuple[str, re.Pattern[str]]] = []
    excl: list[tuple[str, re.Pattern[str]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        target = pats
        if line.lower().startswith(EXCLUDE):
            line, target = line[len(EXCLUDE):].strip(), excl
        try:
            target.append((line, re.compile(line, re.I)))
        except re.error as exc:
            raise ConfigError(f"keyword file {path} line {n}: {line!r} is not a valid regex ({exc})") from None
    if not pats:
        raise ConfigError(f"keyword file {path} has no pattern line; restore prompts/reasoning_keywords.txt")
    return Keywords(pats, hashlib.sha256(text.encode()).hexdigest(), excl)


def _spans(pattern: re.Pattern[str], text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """[lo, hi) cut after every match of ``pattern`` (the separator stays with the piece before it)."""
    spans, start = [], lo
    for m in pattern.finditer(text, lo, hi):
        if m.end() > start:
            spans.append((start, m.end()))
            start = m.end()
    if start < hi:
        spans.append((start, hi))
    return spans


def sentence_spans(text: str) -> list[tuple[int, int]]:
    return _spans(_SENTENCE_END, text, 0, len(text))


def kept_segments(text: str, keywords: Keywords) -> list[tuple[int, int]]:
    """(start, end) of every run of clauses, within one sentence, that no exclusion touches."""
    segments = []
    for s_lo, s_hi in sentence_spans(text):
        clauses = _spans(_CLAUSE_END, text, s_lo, s_hi)
        dropped = [False] * len(clauses)
        for _, x in keywords.exclusions:
            for m in x.finditer(text, s_lo, s_hi):
                m_hi = max(m.end(), m.start() + 1)
                for i, (c_lo, c_hi) in enumerate(clauses):
                    if c_lo < m_hi and m.start() < c_hi:
                        dropped[i] = True
        run: list[tuple[int, int]] = []
        for clause, drop in zip(clauses + [(s_hi, s_hi)], dropped + [True]):
            if not drop:
                run.append(clause)
            elif run:
                segments.append((run[0][0], run[-1][1]))
                run = []
    return segments


def reasoning_of(reasoning_text: object, response_text: object) -> str:
    """The stored reasoning, else thoughts inline as <think>...</think> in the answer."""
    if isinstance(reasoning_text, str) and reasoning_text.strip():
        return reasoning_text
    if isinstance(response_text, str):
        return think_text(response_text)
    return ""


def find_mentions(text: str, keywords: Keywords, snippet_chars: int = 80) -> list[dict[str, Any]]:
    """Every pattern match outside the excluded clauses, in text order, with its snippet."""
    found = []
    for lo, hi in kept_segments(text, keywords):
        for raw, pat in keywords.patterns:
            for m in pat.finditer(text, lo, hi):
                if m.end() == m.start():
                    continue
                s_lo, s_hi = max(0, m.start() - snippet_chars), min(len(text), m.end() + snippet_chars)
                snippet = " ".join(text[s_lo:s_hi].split())
                found.append({"keyword": raw, "match": m.group(0), "position": m.start(), "snippet": snippet})
    return sorted(found, key=lambda d: (d["position"], d["keyword"]))


def mentions_bug(text: str, keywords: Keywords) -> bool:
    return bool(find_mentions(text, keywords, 0))
