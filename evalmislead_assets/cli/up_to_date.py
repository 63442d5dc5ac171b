"""Which steps of `evalmislead run` are already done: Dagster's own staleness (code versions, data versions, the
inputs' materializations) says each asset partition is fresh, and the run that made it used the same settings.

The settings are not part of Dagster's view (a study file's caps, the problem subset, the sandbox limits come
from the study file and the environment), so every run, whichever route launched it, carries a tag with their
fingerprint (``SETTINGS_TAG``, run_tags.py), and a partition counts as up to date only when its latest
materialization came from a run with the same fingerprint. A changed setting, a changed template, new answers
or a missing partition: the step runs. ``--force`` runs every step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dagster import AssetKey, DagsterInstance

from evalmislead_assets.run_tags import SETTINGS_TAG, STUDY_TAG, settings_fingerprint

__all__ = ["SETTINGS_TAG", "STUDY_TAG", "keys_to_run", "settings_fingerprint"]


def keys_to_run(instance: "DagsterInstance", asset_graph: Any, keys: list["AssetKey"], partition: str | None,
                fingerprint: str) -> list["AssetKey"]:
    """The keys of one step that are not up to date, in the step's order, with the other keys of any multi-asset
    that cannot run in part; [] when the whole step is done (``partition``: None when unpartitioned)."""
    from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
    from dagster._core.definitions.data_version import CachingStaleStatusResolver
    from dagster._time import get_current_datetime

    # the resolver the UI's staleness comes from, over the instance's event log as it stands now
    view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                          instance=instance, asset_graph=asset_graph)
    resolver = CachingStaleStatusResolver(instance=instance, asset_graph=asset_graph, loading_context=view)
    stale = {k for k in keys if not _fresh(instance, resolver, k, partition, fingerprint)}
    grew = True
    while grew:  # what this step re-materializes makes its readers in the step stale too
        before = len(stale)
        for key in keys:
            node = asset_graph.get(key)
            if key not in stale and set(node.parent_keys) & stale:
                stale.add(key)
            assets_def = getattr(node, "assets_def", None)
            if key in stale and assets_def is not None and not assets_def.can_subset:
                stale |= set(assets_def.keys) & set(keys)  # a multi-asset that cannot run in part
        grew = len(stale) > before
    return [k for k in keys if k in stale]


def _fresh(instance: "DagsterInstance", resolver: Any, key: "AssetKey", partition: str | None,
           fingerprint: str) -> bool:
    """FRESH in Dagster's staleness, and last materialized by a run tagged with ``fingerprint``."""
    from dagster import AssetRecordsFilter
    from dagster._core.definitions.data_version import StaleStatus

    from evalmislead_assets.dagster_metadata import INCOMPLETE_KEY

    if resolver.get_status(key, partition) != StaleStatus.FRESH:
        return False
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition is not None else None),
        limit=1).records
    if not records:
        return False
    materialization = records[0].asset_materialization
    incomplete = materialization.metadata.get(INCOMPLETE_KEY) if materialization is not None else None
    if incomplete is not None and incomplete.value:
        return False  # stored in place of a measurement that could not be made: try again
    run = instance.get_run_by_id(records[0].run_id)
    return run is not None and run.tags.get(SETTINGS_TAG) == fingerprint
