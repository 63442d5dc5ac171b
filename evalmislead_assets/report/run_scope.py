"""Which problems and conditions a stored run covers, beside the full study a generated text describes.

The generated results (README block, docs/results.md) describe one run: the recorded run of an answer pack
(its test-generation answers, thinking off) or, without a pack, the protocol's full design (the six
conditions on every problem). A stored run with fewer (condition, problem) cells is *partial*: its figures
may only be written labelled as such (``header``). Cells the full study does not have, or a cell answered
by another request than the pack's (its ``cache_key``: another prompt or model), mean the rows hold answers
of another run, which no label makes right.

Answer lists and frames in, sets and one-line descriptions out; no Dagster, no DuckDB.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from evalmislead_assets.study.conditions import CONDITION_NAMES
from evalmislead_assets.study.problems import N_PROBLEMS, problem_ranges

PRIMARY = "off"  # the generated results describe thinking off
PARTIAL_MARK = "**Partial run**"  # starts the header line of a block written from a partial run
# the stored run's (condition, problem) cells with the request that answered each, and whether the row holds
# no answer (a server error, a model_spec problem not sent for want of a spec); Python, thinking off (Java and
# JavaScript rows have their own block)
STORED_SQL = ("SELECT condition, problem_idx, cache_key, error IS NOT NULL AS no_answer "
              "FROM test_generations WHERE thinking = ? AND coalesce(language, 'python') = 'python'")

Cell = tuple[str, int]


def problem_of(task_id: str) -> int:
    """'Python/30' -> 30."""
    return int(str(task_id).rsplit("/", 1)[-1])


def recorded_cells(answers: Iterable[Mapping[str, Any]]) -> dict[Cell, str]:
    """The test-generation cells (thinking off) of an answer pack's labelled answers (``Pack.labelled``), each
    with the cache key of its request."""
    return {(str(a["condition"]), problem_of(a["task_id"])): str(a["cache_key"]) for a in answers
            if a.get("asset") == "test_generations" and a.get("thinking") == PRIMARY and a.get("condition")}


DESIGN_NAME = f"the full study ({len(CONDITION_NAMES)} conditions on all {N_PROBLEMS} problems)"


def design_cells(conditions: Iterable[str] = CONDITION_NAMES, n_problems: int = N_PROBLEMS) -> frozenset[Cell]:
    """The protocol's full design: every condition on every problem."""
    return frozenset((c, p) for c in conditions for p in range(n_problems))


def _ordered(conditions: Iterable[str]) -> list[str]:
    rank = {c: i for i, c in enumerate(CONDITION_NAMES)}
    return sorted(set(conditions), key=lambda c: (rank.get(c, len(rank)), c))


def _ranges(problems: Iterable[int]) -> str:
    return problem_ranges(list(problems)).replace(",", ", ") or "none"


@dataclass(frozen=True)
class RunScope:
    full: frozenset[Cell]  # the full study the text describes
    stored: frozenset[Cell]  # what the stored run has
    full_name: str  # e.g. "the recorded run of Qwen2.5-Coder-1.5B (984 test generations)"
    answered_otherwise: frozenset[Cell] = frozenset()  # stored cells whose request is not the pack's
    no_answer: frozenset[Cell] = frozenset()  # stored cells without an answer (an error, a problem not sent)

    @property
    def conditions(self) -> list[str]:
        return _ordered(c for c, _ in self.stored)

    @property
    def problems(self) -> list[int]:
        return sorted({p for _, p in self.stored})

    @property
    def full_conditions(self) -> list[str]:
        return _ordered(c for c, _ in self.full)

    @property
    def full_problems(self) -> list[int]:
        return sorted({p for _, p in self.full})

    @property
    def missing(self) -> frozenset[Cell]:
        return self.full - self.stored

    @property
    def foreign(self) -> frozenset[Cell]:
        """Stored answers of cells the full study does not have, or answered by another request: another run's."""
        return (self.stored - self.full - self.no_answer) | self.answered_otherwise

    @property
    def partial(self) -> bool:
        return bool(self.missing)

    def missing_line(self) -> str:
        """What the stored run lacks, e.g. 'condition(s) model_spec, signature_only; problem(s) 2-163 of buggy_code,
        fixed_code'."""
        absent = [c for c in self.full_conditions if c not in self.conditions]
        parts = [f"condition(s) {', '.join(absent)}"] if absent else []
        by_gap: dict[tuple[int, ...], list[str]] = {}
        for c in self.conditions:
            gap = tuple(sorted(p for cc, p in self.missing if cc == c))
            if gap:
                by_gap.setdefault(gap, []).append(c)
        parts += [f"problem(s) {_ranges(gap)} of {', '.join(conds)}" for gap, conds in by_gap.items()]
        return "; ".join(parts) or "nothing"

    def foreign_line(self) -> str:
        conds = _ordered(c for c, _ in self.foreign)
        return "; ".join(f"{c} on problem(s) {_ranges(p for cc, p in self.foreign if cc == c)}" for c in conds)

    def covers_line(self) -> str:
        """'problems 0-1 (2 of 164), conditions buggy_code, fixed_code (2 of 6)': what is stored, and how much of
        the full study's problems and conditions it covers."""
        problems = set(self.problems) & set(self.full_problems)
        conditions = set(self.conditions) & set(self.full_conditions)
        return (f"problems {_ranges(self.problems)} ({len(problems)} of {len(self.full_problems)}), "
                f"conditions {', '.join(self.conditions) or 'none'} ({len(conditions)} of "
                f"{len(self.full_conditions)})")

    def header(self) -> str:
        """The header line of a block written from a partial run: what it covers and what it is not."""
        return (f"{PARTIAL_MARK}: {len(self.stored)} test generations, thinking off, {self.covers_line()}; "
                f"missing {self.missing_line()}. Not {self.full_name}: every figure below describes these "
                "problems and conditions only.")


def scope(full: frozenset[Cell] | Mapping[Cell, str], stored_rows: Iterable[tuple[Any, ...]],
          full_name: str) -> RunScope:
    """``full``: the full study's cells, or (a pack's) each with its request's cache key; ``stored_rows``:
    (condition, problem_idx[, cache_key[, no_answer]]) of the stored run (``STORED_SQL``). A stored answer whose
    key is set and differs from the pack's marks its cell as another run's; a row without an answer (an error,
    a problem not sent) is another run's in no case."""
    keys = full if isinstance(full, Mapping) else {}
    stored, otherwise, no_answer = set(), set(), set()
    for row in stored_rows:
        cell = (str(row[0]), int(row[1]))
        stored.add(cell)
        key = row[2] if len(row) > 2 else None
        if len(row) > 3 and str(row[3]) == "True":  # Python's or NumPy's True (a BOOLEAN column through pandas)
            no_answer.add(cell)
        elif isinstance(key, str) and key and cell in keys and keys[cell] != key:
            otherwise.add(cell)
    return RunScope(frozenset(full), frozenset(stored), full_name, frozenset(otherwise), frozenset(no_answer))
