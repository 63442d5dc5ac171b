"""The Dagster resources: the DuckDB warehouse, the `llm` client and the embedded llama-server."""

from evalmislead_assets.resources.embedded_server import EmbeddedServerResource
from evalmislead_assets.resources.llm import LLMResource
from evalmislead_assets.resources.warehouse import WarehouseResource

__all__ = ["EmbeddedServerResource", "LLMResource", "WarehouseResource"]
