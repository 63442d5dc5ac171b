"""`evalmislead run`'s first look at the LLM servers, before the problems are validated (about 20 s).

A server that is down used to be found only by the first model's spec step, after problem validation,
with two Dagster stack traces before the run's own line. Each model reached through URLs (its urls in
the study file or EVALMISLEAD_LLM_URL) and the spec judge's EVALMISLEAD_JUDGE_URL get a few quick tries
on /props; the embedded llama-server is started by the run itself and is not checked here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from evalmislead_assets.study.models import Reach

Check = Callable[[list[str], str], str]  # (urls, hint) -> '' or the one line naming the fix


@dataclass(frozen=True)
class Unreachable:
    model: str  # the model's name, or "" for the spec judge
    error: str  # one line, naming where its URL is set

    def line(self) -> str:
        who = f"model {self.model}" if self.model else "the spec judge (EVALMISLEAD_JUDGE_URL)"
        return f"evalmislead: {who}: {self.error} (checked before any step ran; no request sent)"


def unreachable_servers(reaches: Mapping[str, Reach], judge_urls: list[str],
                        check: Check | None = None) -> list[Unreachable]:
    """The models (in order) and the judge whose servers do not answer; embedded ones are not checked."""
    if check is None:
        from evalmislead_assets.llm.server_props import unreachable

        check = unreachable
    out: list[Unreachable] = []
    for name, reach in reaches.items():
        if reach.urls:
            error = check(list(reach.urls), reach.fix_hint())
            if error:
                out.append(Unreachable(name, error))
    if judge_urls:
        error = check(judge_urls, "start it or fix EVALMISLEAD_JUDGE_URL")
        if error:
            out.append(Unreachable("", error))
    return out
