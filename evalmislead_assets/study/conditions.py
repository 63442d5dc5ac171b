"""The six prompt conditions (PROTOCOL.md, "Conditions") and the thinking modes; no Dagster here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Condition:
    name: str
    role: str  # primary | reference
    shows_code: str | None  # None | "buggy" | "fixed"
    shows_docstring: bool  # the dataset's docstring of the function under test
    shows_model_spec: bool  # the model-written spec, as the docstring


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in [
        Condition("buggy_code", "primary", "buggy", False, False),
        Condition("fixed_code", "primary", "fixed", False, False),
        Condition("model_spec", "primary", None, False, True),
        Condition("signature_only", "reference", None, False, False),
        Condition("human_docstring", "reference", None, True, False),
        Condition("buggy_code_with_docstring", "reference", "buggy", True, False),
    ]
}
CONDITION_NAMES: list[str] = list(CONDITIONS)
THINKING_MODES: list[str] = ["off", "on"]
