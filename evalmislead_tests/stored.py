"""Materialize some assets in a test while their upstream assets are only *stored* (rows put in the
DuckDB file by the test): `materialize(with_stored([asset, ...]), ...)` adds every upstream asset
that is not in the list as a non-executable spec, loaded by the warehouse IO manager."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagster import AssetKey, AssetSpec


def with_stored(assets: Sequence[Any]) -> list[Any]:
    from evalmislead_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    have: set[AssetKey] = set()
    for a in assets:
        have |= set(getattr(a, "keys", []) or [])
    need: dict[AssetKey, AssetSpec] = {}
    for a in assets:
        for dep in getattr(a, "dependency_keys", []) or []:
            if dep not in have and dep not in need and graph.has(dep):
                need[dep] = AssetSpec(dep, partitions_def=graph.get(dep).partitions_def)
    return [*assets, *need.values()]
