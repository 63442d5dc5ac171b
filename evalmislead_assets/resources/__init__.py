"""The Dagster resources: the DuckDB warehouse, its IO manager, the `llm` client, the embedded llama-server and the
study's run-level settings."""

from evalmislead_assets.resources.embedded_server import EmbeddedServerResource
from evalmislead_assets.resources.io_manager import WarehouseIOManager
from evalmislead_assets.resources.llm import LLMResource
from evalmislead_assets.resources.study_settings import StudySettingsResource
from evalmislead_assets.resources.warehouse import WarehouseResource

__all__ = ["EmbeddedServerResource", "LLMResource", "StudySettingsResource", "WarehouseIOManager", "WarehouseResource"]
