"""`evalmislead run --replay [PACK]`: the study from a recorded answer pack (llm/answer_pack.py).

The pack's own study file names the model and its settings; its answers are imported into llm_cache
(checked against the current prompts first: a changed template refuses the pack); every generation and
judge request is then answered from the cache and nothing is sent (EVALMISLEAD_REPLAY_ONLY), except the
determinism probe's live sample, which re-sends a few recorded requests to the user's own server and
reports how many answers come back byte-identical and how many score the same.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from evalmislead_assets.errors import ConfigError
from evalmislead_assets.llm import answer_pack

DEFAULT_PACK = Path(__file__).resolve().parents[1] / "data" / "answers" / "qwen2.5-coder-1.5b-full"
REPLAY_PROBE_N = "4"  # live re-generations on the user's machine (each up to a few minutes on 2 CPU cores)


@dataclass(frozen=True)
class Replay:
    pack: answer_pack.Pack
    problems: list[int]  # the problems the pack covers for every condition of the run (specs and judge included)
    conditions: list[str]

    def line(self) -> str:
        m = self.pack.manifest
        covered = "all 164 problems" if len(self.problems) == 164 else f"{len(self.problems)} of 164 problems"
        return (f"replaying {m.get('answers')} recorded answers of {m.get('model')} from {self.pack.folder} "
                f"({covered}, {len(self.conditions)} conditions; recorded with {m.get('slots')} slot(s), cap "
                f"{m.get('max_tokens_off')}, git {str(m.get('git_commit'))[:10]}); no request is sent except the "
                "determinism probe's live sample")


def covered_problems(pack: answer_pack.Pack, conditions: list[str], thinking: str = "off") -> list[int]:
    """Problems with a spec answer, a judge answer and an answer in every one of ``conditions``."""
    have: dict[int, set[str]] = defaultdict(set)
    for a in pack.labelled():  # a request answered by another's answer (same body) counts for its problem
        if (a.get("thinking") or "off") != thinking or not a.get("task_id"):
            continue
        idx = int(str(a["task_id"]).split("/")[-1])
        have[idx].add(str(a.get("condition") if a.get("asset") == "test_generations" else a.get("asset")))
    needed = {"model_specs", "spec_labels", *conditions}
    return sorted(i for i, got in have.items() if needed <= got)


def coverage(pack: answer_pack.Pack, conditions: list[str], thinking: str = "off") -> dict[str, int]:
    """For each condition, how many problems the pack answers in it (with their spec and judge answers)."""
    return {c: len(covered_problems(pack, [c], thinking)) for c in conditions}


def default_conditions(folder: Path, chosen: list[str], every: list[str]) -> tuple[list[str], str]:
    """The conditions a replay runs, and a line naming what it leaves out ("" when nothing).

    Named conditions (or "all") are kept as given. Without any, a replay runs every condition the pack
    answers on every problem it has a spec for: a recording still under way (the reference conditions come
    last) is replayed in full on the conditions it has finished, and the line names the others."""
    if chosen:
        return (every if chosen == ["all"] else chosen), ""
    counts = coverage(answer_pack.read_pack(folder), every)
    full = max(counts.values(), default=0)
    complete = [c for c in every if full and counts[c] == full]
    partial = {c: n for c, n in counts.items() if n < full}
    if not complete or not partial:
        return every, ""
    names = ", ".join(f"{c} ({n} of {full} problems)" for c, n in partial.items())
    return complete, (f"the pack does not answer every problem yet in {names}: the recording is under way, so "
                      "this replay leaves them out (--conditions all replays all six on the problems they share)")


def prepare(folder: Path, conditions: list[str]) -> Replay:
    """Read the pack, point the study at its study file and the problems it covers; nothing is imported yet."""
    pack = answer_pack.read_pack(folder)
    study_file = folder / answer_pack.STUDY_FILE
    if not study_file.is_file():
        raise ConfigError(f"answer pack {folder} has no {answer_pack.STUDY_FILE}; export it again from its study")
    os.environ.setdefault("EVALMISLEAD_STUDY", str(study_file))
    os.environ["EVALMISLEAD_REPLAY_ONLY"] = "1"
    os.environ.setdefault("EVALMISLEAD_PROBE_N", REPLAY_PROBE_N)
    problems = covered_problems(pack, conditions)
    if not problems:
        raise ConfigError(f"answer pack {folder} covers no problem in every condition of {', '.join(conditions)} "
                          "(a recording still under way covers the primary conditions first); name fewer with "
                          "--conditions")
    if not os.environ.get("EVALMISLEAD_PROBLEMS", "").strip():
        os.environ["EVALMISLEAD_PROBLEMS"] = ",".join(map(str, problems))
    return Replay(pack, problems, conditions)


def import_into(db: Path, replay: Replay) -> str:
    """Import the pack into ``db`` (after the request check); one line saying what happened."""
    from evalmislead_assets.cli.answers_cmd import check_pack
    from evalmislead_assets.store.database import Warehouse

    try:
        check_pack(replay.pack)
        added, there = answer_pack.import_answers(Warehouse(db), replay.pack)
    except answer_pack.PackError as exc:
        raise ConfigError(str(exc)) from None
    return f"imported {added} answers into llm_cache ({there} already there)"
