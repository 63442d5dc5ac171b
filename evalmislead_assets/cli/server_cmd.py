"""`evalmislead server`: run the embedded llama-server in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from evalmislead_assets.llm import llama_server as server
from evalmislead_assets.resources.embedded_server import binary_override, default_model

HELP = ("Start the embedded llama-server (bundled Qwen2.5-Coder-0.5B unless EVALMISLEAD_EMBEDDED_MODEL) "
        "and keep it running until Ctrl-C.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8080, help="port to listen on (0 = any free port; default 8080)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--parallel", type=int, default=server.DEFAULT_PARALLEL, help="server slots (default 2)")
    parser.add_argument("--ctx-per-slot", type=int, default=server.DEFAULT_CTX_PER_SLOT,
                        help="context per slot in tokens (prompt + output cap)")


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    try:
        model = default_model()
    except server.ServerError as exc:
        print(f"evalmislead server: {exc}", file=sys.stderr)
        return 2
    srv = server.EmbeddedServer(
        model=model, binary=binary_override(), port=args.port or None, host=args.host, parallel=args.parallel,
        ctx_per_slot=args.ctx_per_slot,
    )
    previous = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            srv.start()
        except server.ServerError as exc:
            print(f"evalmislead server: {exc}", file=sys.stderr)
            return 2
        print(
            f"llama-server ready at {srv.url} (model {srv.alias}, {args.parallel} slots, "
            f"pid {srv.pid}, log {srv.log_path}); set EVALMISLEAD_LLM_URL={srv.url} to use it; Ctrl-C stops it",
            flush=True,
        )
        while srv.is_running():
            time.sleep(0.2)
        print(f"evalmislead server: llama-server exited unexpectedly: {srv.last_log_line()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping llama-server", flush=True)
        return 0
    finally:
        # Ignore further signals while stopping so a second Ctrl-C cannot orphan the server.
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        srv.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
