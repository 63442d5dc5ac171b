"""The `embedded_server` resource: the bundled llama-server, started on first use and stopped
when the run ends (teardown), so a run whose answers are all cached starts no server."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Optional

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from evalmislead_assets.llm.llama_server import EmbeddedServer


class EmbeddedServerResource(ConfigurableResource):
    """The embedded llama-server (bundled model unless EVALMISLEAD_EMBEDDED_MODEL), started lazily."""

    parallel: Optional[int] = None  # slots; None: what the llm resource asks for (its max_in_flight)
    ctx_per_slot: Optional[int] = None  # tokens; None: what the llm resource asks for (largest cap + prompt)

    _server: Optional[EmbeddedServer] = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def url(self, parallel: int, ctx_per_slot: int, log: Optional[Callable[[str], None]] = None) -> str:
        """The server's base URL, starting it on the first call (a configured field wins over the request)."""
        with self._lock:
            srv = self._server
            if srv is None or not srv.is_running():
                if srv is not None:
                    srv.stop()  # it died: reap it and start a fresh one
                srv = EmbeddedServer(parallel=self.parallel or parallel, ctx_per_slot=self.ctx_per_slot or ctx_per_slot,
                                     log=log)
                self._server = srv.start()
            return srv.url

    @property
    def started(self) -> bool:
        return self._server is not None and self._server.is_running()

    def stop(self) -> None:
        with self._lock:
            srv, self._server = self._server, None
        if srv is not None:
            srv.stop()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self.stop()
