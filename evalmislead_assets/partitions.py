"""The condition x thinking partitions and what each condition shows the model."""

from __future__ import annotations

from dataclasses import dataclass

from dagster import MultiPartitionKey, MultiPartitionsDefinition, StaticPartitionsDefinition


@dataclass(frozen=True)
class Condition:
    name: str
    role: str  # primary | reference
    shows_code: str | None  # None | "buggy" | "fixed"
    shows_docstring: bool
    shows_model_spec: bool


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

condition_partitions = StaticPartitionsDefinition(CONDITION_NAMES)
thinking_partitions = StaticPartitionsDefinition(THINKING_MODES)
condition_thinking_partitions = MultiPartitionsDefinition(
    {"condition": condition_partitions, "thinking": thinking_partitions}
)


def partition_key(condition: str, thinking: str) -> MultiPartitionKey:
    return MultiPartitionKey({"condition": condition, "thinking": thinking})


def split_key(key: object) -> tuple[str, str]:
    """(condition, thinking) from a MultiPartitionKey or its 'buggy_code|off' string."""
    if isinstance(key, MultiPartitionKey):
        dims = key.keys_by_dimension
        return dims["condition"], dims["thinking"]
    text = str(key)
    a, b = text.split("|")
    # Dagster sorts dimensions by name: condition first, thinking second.
    return a, b
