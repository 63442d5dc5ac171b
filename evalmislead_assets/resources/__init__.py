"""The Dagster resources: the DuckDB warehouse, its IO manager, the `llm` client and the embedded llama-server."""

from evalmislead_assets.resources.embedded_server import EmbeddedServerResource
from evalmislead_assets.resources.io_manager import WarehouseIOManager
from evalmislead_assets.resources.llm import LLMResource
from evalmislead_assets.resources.warehouse import WarehouseResource

__all__ = ["EmbeddedServerResource", "LLMResource", "WarehouseIOManager", "WarehouseResource"]
