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


# ---------------------------------------------------------------- a model_spec problem with no spec to show

EMPTY_SPEC = "empty model spec"  # the test_generations error of a problem not sent for want of a spec


def empty_spec_error(spec_text: object, spec_error: object) -> str | None:
    """Why a problem gets no model_spec prompt: its spec is empty (cut at the cap, blank, or failed); else None."""
    if isinstance(spec_text, str) and spec_text.strip():
        return None
    return EMPTY_SPEC + (f" (spec error: {spec_error})" if isinstance(spec_error, str) and spec_error.strip() else "")


def is_empty_spec_error(error: object) -> bool:
    """A stored error written by empty_spec_error: a zero-test answer the analysis counts apart."""
    return isinstance(error, str) and error.startswith(EMPTY_SPEC)
