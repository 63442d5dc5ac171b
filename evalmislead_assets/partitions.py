"""The condition x thinking partitions (the conditions themselves: study/conditions.py)."""

from __future__ import annotations

from dagster import MultiPartitionKey, MultiPartitionsDefinition, StaticPartitionsDefinition

from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES

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
