"""What the current prompts and settings would send for each answer of a pack (the import's check).

For every packed answer the request is rebuilt from the shipped problems, the prompt templates as they
are now, the study's model (name, cap, chat-template arguments) and the client's seed: the spec
request (prompts/spec.md), the test request of its condition (prompts/test_generation.md; the
model_spec condition with the spec extracted from the pack's own spec answer, as test_generations does)
and the judge's request (prompts/spec_judge.md). A pack whose body differs is refused: a changed
template, cap or model must never replay old answers.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from evalmislead_assets import settings
from evalmislead_assets.analysis.spec_labels import JUDGE_TEMPLATE, bug_diff, judge_prompt
from evalmislead_assets.llm import prompts
from evalmislead_assets.llm.types import ChatRequest, build_body, canonical_json
from evalmislead_assets.study.models import ModelSpec

SEED = 1234  # the llm resource's seed (resources/llm.LLMResource.seed), sent in every body


class Expectations:
    """Rebuilds request bodies for one model of the study."""

    def __init__(self, problems: pd.DataFrame, answers: list[dict[str, Any]], model: ModelSpec, alias: str) -> None:
        self.problems = {r["task_id"]: r for r in problems.to_dict("records")}
        self.model, self.alias = model, alias
        folder = settings.prompts_dir()
        self.spec_template = prompts.load_template(prompts.SPEC_TEMPLATE, folder)
        self.test_template = prompts.load_template(prompts.TEST_TEMPLATE, folder)
        self.judge_template = prompts.load_template(JUDGE_TEMPLATE, folder)
        self.specs: dict[tuple[str, str], str] = {}
        for a in answers:
            if a.get("asset") == "model_specs":
                text = _answer_text(a["response_json"])
                self.specs[(a.get("thinking") or "off", a["task_id"])] = prompts.extract_spec(text)

    def _cap(self, thinking: str, asset: str = "") -> int:
        return self.model.max_tokens(thinking, asset) or settings.max_tokens(thinking)

    def body(self, answer: dict[str, Any]) -> str:
        """The body the study would send now; a LookupError says why it would send none."""
        asset, task, thinking = answer.get("asset"), str(answer.get("task_id")), str(answer.get("thinking") or "off")
        p = self.problems.get(task)
        if p is None:
            raise LookupError(f"{task} is not a problem of the shipped dataset")
        if asset == "model_specs":
            text, cap = prompts.spec_prompt(p, self.spec_template).text, self._cap(thinking, "model_specs")
        elif asset == "test_generations":
            condition = answer.get("condition") or ""
            spec = self.specs.get((thinking, task)) if condition == "model_spec" else None
            if condition == "model_spec" and not spec:
                raise LookupError(f"{task} model_spec: the pack has no spec answer for it")
            text = prompts.generation_prompt(p, condition, spec, self.test_template).text
            cap = self._cap(thinking)
        elif asset == "spec_labels":
            spec = self.specs.get((thinking, task))
            if not spec:
                raise LookupError(f"{task} spec_labels: the pack has no spec answer for it")
            text, _ = judge_prompt(self.judge_template, p["entry_point"], bug_diff(p["buggy_code"], p["fixed_code"]),
                                   spec)
            cap, thinking = settings.judge_max_tokens(), "off"
        else:
            raise LookupError(f"answers of asset {asset!r} cannot be checked (not a generation asset)")
        req = ChatRequest(asset=str(asset), condition=answer.get("condition"), thinking=thinking, task_id=task,
                          messages=[{"role": "user", "content": text}], max_tokens=cap,
                          enable_thinking=thinking == "on", extra={})
        return canonical_json(build_body(req, self.alias, SEED, self.model.chat_template_kwargs,
                                         thinking_off=self.model.thinking_off))


def _answer_text(response_json: str) -> str:
    try:
        choice = (json.loads(response_json).get("choices") or [{}])[0]
    except ValueError:
        return ""
    return str((choice.get("message") or {}).get("content") or "")
