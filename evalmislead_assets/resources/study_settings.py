"""The study's run-level settings as one Dagster resource, so the asset bodies read values, not the environment.

Every value comes from the study file, else its documented ``EVALMISLEAD_*`` override, else the value recorded
with the data folder's study (settings.py resolves them; variables.py lists the variables). The definitions fill
the resource with the values resolved when they load, so the launchpad shows what a run would use; a run's own
config for ``study_settings`` overrides any of them for that run. A field left empty is resolved when an asset
asks for it, and a value that cannot be resolved (a bad variable) is the same one-line ConfigError the run's
checks give. Each run that uses the resource records the values it used as a run tag.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Optional

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError

SETTINGS_VALUES_TAG = "evalmislead/settings"


def _problems() -> Optional[str]:
    subset = settings.problem_subset()
    return None if subset is None else ",".join(map(str, subset))


# field -> how settings.py resolves it (the study file, its override, the data folder's recorded value)
_RESOLVERS: dict[str, Callable[[], Any]] = {
    "problems": _problems,
    "max_tokens_off": lambda: settings.max_tokens("off"),
    "max_tokens_on": lambda: settings.max_tokens("on"),
    "max_tests_per_answer": settings.max_tests_per_answer,
    "max_mutation_runs_per_file": settings.max_mutation_runs_per_file,
    "probe_n": settings.probe_n,
    "judge_max_tokens": settings.judge_max_tokens,
    "sandbox_workers": settings.sandbox_workers,
}


class StudySettingsResource(ConfigurableResource):
    """The study's run-level settings (empty: resolved from the study file and its overrides when used)."""

    problems: Optional[str] = Field(
        default=None, description="problem subset, e.g. '0-9' or '2,4,13,30'; empty: all 164 (study file `problems`, "
                                  "EVALMISLEAD_PROBLEMS)")
    max_tokens_off: Optional[int] = Field(default=None, description="output cap, thinking off "
                                                                    "(EVALMISLEAD_MAX_TOKENS_OFF)")
    max_tokens_on: Optional[int] = Field(default=None, description="output cap, thinking on "
                                                                   "(EVALMISLEAD_MAX_TOKENS_ON)")
    max_tests_per_answer: Optional[int] = Field(default=None, description="collected tests scored per answer "
                                                                          "(EVALMISLEAD_MAX_TESTS_PER_ANSWER)")
    max_mutation_runs_per_file: Optional[int] = Field(
        default=None, description="test runs per file in the mutation pass (EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE)")
    probe_n: Optional[int] = Field(default=None, description="requests the determinism probe re-sends "
                                                             "(EVALMISLEAD_PROBE_N)")
    judge_max_tokens: Optional[int] = Field(default=None, description="the spec judge's output cap "
                                                                      "(EVALMISLEAD_JUDGE_MAX_TOKENS)")
    sandbox_workers: Optional[int] = Field(default=None, description="parallel test-runner processes; empty: the "
                                                                     "CPU count (EVALMISLEAD_SANDBOX_WORKERS)")

    @classmethod
    def from_study(cls) -> StudySettingsResource:
        """The values in effect now. A value that does not resolve stays empty: the run's own checks (the IO
        manager's set-up, `evalmislead run`) refuse it in one line, and so does ``value`` when an asset asks."""
        values: dict[str, Any] = {}
        for name, resolve in _RESOLVERS.items():
            try:
                values[name] = resolve()
            except ConfigError:
                continue
        return cls(**values)

    def value(self, name: str) -> Any:
        """The field ``name``, resolved from the study file and its overrides when the resource leaves it empty."""
        own = getattr(self, name)
        return own if own is not None else _RESOLVERS[name]()

    def problem_subset(self) -> list[int] | None:
        """The problem indices of the study (None: all)."""
        raw = self.value("problems")
        if raw is None:
            return None
        source = "the study_settings resource's problems" if self.problems is not None else "the study's problems"
        return settings.parse_problem_list(raw, source=source)

    def int_value(self, name: str) -> int:
        return int(self.value(name))

    def max_tokens(self, thinking: str) -> int:
        """The output cap of the thinking mode ``thinking`` ('off' or 'on')."""
        return self.int_value(f"max_tokens_{thinking}")

    def effective(self) -> dict[str, Any]:
        """Every value as this run uses it."""
        return {name: self.value(name) for name in _RESOLVERS}

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """The run records the values it works from (a run tag, beside the study file's sha256)."""
        run = context.run
        if context.instance is None or run is None:
            return
        try:
            text = json.dumps(self.effective(), sort_keys=True, separators=(",", ":"))
        except ConfigError:
            return  # the IO manager's set-up refuses the bad value in one line before any step runs
        if run.tags.get(SETTINGS_VALUES_TAG) != text:
            context.instance.add_run_tags(run.run_id, {SETTINGS_VALUES_TAG: text})
