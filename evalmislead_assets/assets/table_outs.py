"""The outs of a multi-asset that writes a table and its side tables in one step (spec_labels,
reasoning_mentions, mutation_scores): shared by the asset groups, so no group imports another's module."""

from dagster import AssetOut

from evalmislead_assets.store.schema import table_description


def table_outs(name: str, side_tables: tuple[str, ...], code_version: str, description: str,
               tags: dict[str, str] | None = None) -> dict[str, AssetOut]:
    """The outs of a multi-asset: its own table ``name`` and each side table computed in the same step
    (an asset of the same name, described as store/schema.py describes the table), one code version and the
    same ``tags``."""
    return {name: AssetOut(code_version=code_version, description=description, tags=tags),
            **{t: AssetOut(code_version=code_version, description=table_description(t), tags=tags)
               for t in side_tables}}
