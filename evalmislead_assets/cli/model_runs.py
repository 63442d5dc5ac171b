"""Each model's part of an `evalmislead run`: how far it got, its failure, its LLM requests.

Models run one after the other; a model whose step fails (its server unreachable, say) stops there and
the next model goes on. The run ends with one line per model naming its state and its own requests.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path


def utc_now() -> dt.datetime:
    """Naive UTC, as llm_calls.ts is stored."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class StepFailed(Exception):
    """A step (one Dagster run) of `evalmislead run` failed: ``label`` names its assets, ``failure`` the error."""

    def __init__(self, label: str, failure: str, stage: str = "") -> None:
        super().__init__(f"{label} failed: {failure}")
        self.label, self.failure = label, failure
        self.stage = stage or label  # short: "model_specs [off]", "chain [buggy_code|off]", "analysis"


@dataclass
class ModelRun:
    name: str
    since: dt.datetime
    until: dt.datetime | None = None
    failed_at: str = ""  # the stage that failed (StepFailed.stage); empty: every step of the model succeeded
    error: str = ""
    chain_done: bool = False  # specs, generation and execution stored (the analysis may still have failed)

    @property
    def failed(self) -> bool:
        return bool(self.failed_at)

    def state(self) -> str:
        if not self.failed:
            return "done"
        return f"failed at {self.failed_at}: {self.error}"

    def requests_line(self, db: Path, alone: bool = False) -> str:
        """The requests sent while this model ran; ``alone``: the study's only model (worded as the run's)."""
        from evalmislead_assets.cli.summary import llm_calls_line

        who, what = ("this run", "the run") if alone else (f"of {self.name}", self.name)
        try:
            return llm_calls_line(db, self.since, self.until, who=who, failed=f"{what} failed" if self.failed else "")
        except Exception as exc:  # the failure may be the database itself: its own line says so
            return f"LLM requests {who}: not counted ({type(exc).__name__} reading {db})"


def failed_phrase(runs: list[ModelRun]) -> str:
    """What failed, for the run's requests line: '' when nothing did."""
    names = [r.name for r in runs if r.failed]
    return f"{', '.join(names)} failed" if names else ""


def state_lines(db: Path, runs: list[ModelRun]) -> list[str]:
    """One line per model: its state and its own LLM requests."""
    out = ["", "Models of this run:"]
    for r in runs:
        out.append(f"  {r.name}: {r.state()}")
        out.append(f"    {r.requests_line(db)}")
    return out
