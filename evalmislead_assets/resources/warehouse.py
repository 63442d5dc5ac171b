"""The `warehouse` resource: the study's DuckDB file."""

from __future__ import annotations

from dagster import ConfigurableResource

from evalmislead_assets import settings
from evalmislead_assets.store.database import Warehouse


class WarehouseResource(ConfigurableResource):
    """The study's DuckDB file (EVALMISLEAD_DB when path is empty)."""

    path: str = ""
    lock_timeout_s: float = 1800.0

    def get(self) -> Warehouse:
        return Warehouse(self.path or settings.db_path(), self.lock_timeout_s)
