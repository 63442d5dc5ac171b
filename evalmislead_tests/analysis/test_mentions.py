"""The reasoning-mention matcher measured on a labelled set of reasoning sentences.

evalmislead_tests/data/reasoning_sentences.tsv: 355 sentences in the shapes of thinking-on
traces, each labelled `mention` (notices this code's bug or a name/behaviour mismatch) or
`none` (self-correction, test design, generic talk about bugs, plain description, other).
The `dev` part was used while tuning prompts/reasoning_keywords.txt; the `heldout` parts
(batches 1 and 4) were not tuned on. Batch 4 was written last, before the last tuning round,
and measured once after it: it is the fairest figure (the file's header has the history).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evalmislead_assets.analysis.reasoning_mentions import find_mentions, kept_segments, load_keywords, mentions_bug
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.settings import PROJECT_ROOT

SENTENCES = Path(__file__).resolve().parents[1] / "data" / "reasoning_sentences.tsv"
KEYWORDS = PROJECT_ROOT / "prompts" / "reasoning_keywords.txt"
# (split, batch or None for all): (precision floor, recall floor), a little under what was measured
# (docs/analysis.md, "Reasoning mentions"): dev P 1.000 R 0.971; held-out batch 1 P 1.000 R 1.000;
# held-out batch 4 P 0.944 R 0.680
FLOORS = {("dev", None): (0.95, 0.95), ("heldout", "1"): (0.95, 0.95), ("heldout", "4"): (0.9, 0.65)}


def labelled() -> list[dict[str, str]]:
    lines = [ln for ln in SENTENCES.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#")]
    header = lines[0].split("\t")
    return [dict(zip(header, ln.split("\t"))) for ln in lines[1:]]


def scores(rows: list[dict[str, str]]) -> tuple[float, float, int, int, int]:
    kw = load_keywords(KEYWORDS)
    tp = fp = fn = 0
    for r in rows:
        hit, truth = mentions_bug(r["sentence"], kw), r["label"] == "mention"
        tp, fp, fn = tp + (hit and truth), fp + (hit and not truth), fn + (truth and not hit)
    return tp / max(tp + fp, 1), tp / max(tp + fn, 1), tp, fp, fn


def test_labelled_set_is_large_and_covers_the_negative_kinds():
    rows = labelled()
    assert len(rows) >= 100 and {r["label"] for r in rows} == {"mention", "none"}
    assert {r["split"] for r in rows} == {"dev", "heldout"}
    assert {r["batch"] for r in rows if r["split"] == "heldout"} == {"1", "4"}
    kinds = {r["kind"] for r in rows if r["label"] == "none"}
    assert {"self_correction", "test_design", "generic_bug", "description"} <= kinds
    for split, batch in FLOORS:
        part = [r for r in rows if r["split"] == split and batch in (None, r["batch"])]
        assert sum(r["label"] == "mention" for r in part) >= 25 and sum(r["label"] == "none" for r in part) >= 25


@pytest.mark.parametrize("split, batch", list(FLOORS))
def test_matcher_precision_and_recall_on_the_labelled_set(split, batch):
    rows = [r for r in labelled() if r["split"] == split and batch in (None, r["batch"])]
    precision, recall, tp, fp, fn = scores(rows)
    name = split + ("" if batch is None else f" batch {batch}")
    print(f"\nreasoning mentions, {name} ({len(rows)} sentences): precision {precision:.3f} "
          f"({tp}/{tp + fp}), recall {recall:.3f} ({tp}/{tp + fn})")
    p_floor, r_floor = FLOORS[(split, batch)]
    assert precision >= p_floor and recall >= r_floor, (name, precision, recall)


@pytest.mark.parametrize("sentence", [
    "The current implementation has a bug where it returns b instead of a.",
    "The function is supposed to return positive numbers, but it returns negative ones.",
    "That seems like a bug.",
    "It keeps the elements where e < 0, which is wrong.",
    "The implementation is incorrect, let me double-check.",
])
def test_the_audits_missed_mentions_are_found(sentence):
    assert mentions_bug(f"Let me read the code. {sentence} Now the tests.", load_keywords(KEYWORDS))


def test_an_exclusion_drops_its_clause_not_the_sentence(tmp_path):
    f = tmp_path / "kw.txt"
    f.write_text("\\bincorrect\\b\nexclude: \\blet me double-check\\b\nexclude: \\bI was wrong\\b\n", encoding="utf-8")
    kw = load_keywords(f)
    text = "The implementation is incorrect, let me double-check."
    assert [m["match"] for m in find_mentions(text, kw)] == ["incorrect"]
    # the excluded clause itself never matches, and a pattern cannot reach across it
    assert find_mentions("Wait, I was wrong, incorrect", kw)[0]["position"] == len("Wait, I was wrong, ")
    assert find_mentions("Let me double-check: is it incorrect? No.", kw)  # the clause after the colon is kept
    assert find_mentions("That is incorrect - let me double-check", kw)[0]["match"] == "incorrect"
    assert kept_segments("I was wrong, it works. Fine", kw) == [(12, 22), (22, 27)]


def test_a_keyword_file_without_patterns_is_refused(tmp_path):
    f = tmp_path / "kw.txt"
    f.write_text("# only comments\nexclude: \\bwait\\b\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no pattern"):
        load_keywords(f)
    f.write_bytes(b"\\bbug\\b \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_keywords(f)


def test_report_section_names_the_matcher_and_where_its_precision_and_recall_are():
    from types import SimpleNamespace

    import pandas as pd

    from evalmislead_assets.report.tables import mentions_section

    summary = pd.DataFrame([
        {"mention_group": g, "n_problems": n, "n_problems_with_misleading": k, "n_tests": t, "n_misleading": m,
         "misleading_rate": m / t}
        for g, n, k, t, m in (("mentions", 1, 1, 2, 1), ("no_mention", 1, 0, 2, 0), ("all_with_tests", 2, 1, 4, 1))])
    answers = pd.DataFrame([{"task_id": "Python/30", "mentions": True, "first_snippet": "that seems like a bug",
                             "keywords_sha256": "ab" * 32}])
    text = "\n".join(mentions_section(SimpleNamespace(reasoning_mention_summary=summary, reasoning_mentions=answers)))
    assert "1 of 2 problems with tests mentioned the bug" in text
    assert "sha256 abababababab…" in text and "docs/analysis.md" in text and "no-mention group" in text


def test_keyword_patterns_have_no_unbounded_runs():
    """`[^…]*` or `.*` (in a lookahead above all) makes matching quadratic in a long line of reasoning:
    the shipped file bounds every run, e.g. `[^.!?\\n]{0,80}`."""
    import re

    unbounded = re.compile(r"\[\^[^\]]*\][*+]|(?<!\\)\.[*+]")
    lines = [ln for ln in KEYWORDS.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines and not [ln for ln in lines if unbounded.search(ln)]
