"""The one Definitions object: assets, checks, resources, jobs."""

from __future__ import annotations

from dagster import Definitions, load_asset_checks_from_modules, load_assets_from_modules

from evalmislead_assets.assets import problems as problems_assets
from evalmislead_assets.storage import WarehouseResource

_MODULES = [problems_assets]

defs = Definitions(
    assets=load_assets_from_modules(_MODULES),
    asset_checks=load_asset_checks_from_modules(_MODULES),
    resources={"warehouse": WarehouseResource()},
)
