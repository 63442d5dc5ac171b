"""A misbehaving OpenAI-compatible server for fault tests: a real HTTP server on 127.0.0.1.

Modes (``mode`` for every chat request, ``script`` for the next few first):

- ``ok``: a good chat completion (``"echo: <prompt>"``, or ``answer``)
- ``status:N`` (400, 429, 500, 503, ...): that status with a llama-server-style ``{"error": ...}`` body
- ``error_body``: 200 with ``{"error": ...}``; ``empty_choices``: 200 with ``{"choices": []}``
- ``list``, ``null``: 200 with a JSON list / ``null``; ``invalid_json``: 200 with cut JSON; ``html``: 200 with a page
- ``trickle``: 200 whose body comes ``trickle_bytes`` every ``trickle_s`` seconds (``trickle_chunks`` of them)
- ``hang``: reads the request and never answers (until the client goes away or the server stops)
- ``truncated``: 200 announcing 1,000 bytes, sends 100 and closes the connection
- ``surrogate``: a good completion whose content is a lone surrogate (the JSON escape ``\\ud800``)

``alias`` is the model name ``/props`` reports (default ``fake-model``), ``model_path`` the model file it
names (default none). ``props_mode`` does the same for ``/props`` (``ok``, ``hang``, ``status:N``). Every chat
request is counted (``chat_requests``, ``bodies``, ``in_flight``), then held while ``gate`` is cleared;
``client_gone`` counts requests whose client closed the connection before the answer was complete.

Standalone: ``python -m evalmislead_tests.fake_llm_server --mode hang --port 8081``.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_FIELDS = frozenset({"model", "messages", "temperature", "seed", "max_tokens", "top_p", "stop", "n",
                           "stream", "response_format", "presence_penalty", "frequency_penalty", "logprobs", "user"})
MODES = ("ok", "status:N", "error_body", "empty_choices", "list", "null", "invalid_json", "html", "trickle",
         "hang", "truncated", "surrogate")


def completion(content: str, prompt_tokens: int = 7, completion_tokens: int = 5,
               model: str = "fake-model") -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}, "model": model}


class FakeLLMServer:
    def __init__(self, mode: str = "ok", port: int = 0, trickle_s: float = 0.5, trickle_chunks: int = 200,
                 trickle_bytes: int = 8, alias: str = "fake-model") -> None:
        self.mode = mode
        self.alias = alias  # the model name /props reports (two servers of one alias share cached answers)
        self.props_mode = "ok"
        self.model_path: str | None = None  # the model file /props names (None: not reported)
        # a hosted OpenAI-style endpoint: no /props (404), these body fields refused with a 400, the model id required
        self.openai_style: tuple[str, ...] | None = None  # (the accepted model id,) when set
        self.script: list[str] = []
        self.answer: str | None = None
        self.answer_for: Callable[[str], str] | None = None  # the answer to a prompt (else answer, else echo)
        self.trickle_s, self.trickle_chunks, self.trickle_bytes = trickle_s, trickle_chunks, trickle_bytes
        self.lock = threading.Lock()
        self.chat_requests = 0
        self.props_requests = 0
        self.bodies: list[dict[str, Any]] = []
        self.modes_used: list[str] = []
        self.in_flight = 0
        self.client_gone = 0
        self.trickled_chunks: list[int] = []  # per trickle request: chunks sent before it ended
        self.stopping = threading.Event()
        self.gate = threading.Event()  # cleared: chat requests are counted, then held until it is set again
        self.gate.set()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> "FakeLLMServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_mode(self) -> str:
        with self.lock:
            return self.script.pop(0) if self.script else self.mode

    def wait_for_requests(self, n: int, timeout_s: float = 60.0, in_flight: bool = False) -> bool:
        """True once ``n`` chat requests arrived (``in_flight``: are inside the server at once)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            with self.lock:
                if (self.in_flight if in_flight else self.chat_requests) >= n:
                    return True
            time.sleep(0.05)
        return False

    def wait_until_client_gone(self, n: int = 1, timeout_s: float = 30.0) -> bool:
        """True once ``n`` requests were left by their client before the answer was complete."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            with self.lock:
                if self.client_gone >= n:
                    return True
            time.sleep(0.05)
        return False


def _client_gone(sock: socket.socket, wait_s: float) -> bool:
    """True when the client closed its end (readable with no data) within ``wait_s``."""
    readable, _, _ = select.select([sock], [], [], wait_s)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _handler_for(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json",
                  length: int | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

        def _hang(self) -> None:
            while not server.stopping.is_set():
                if _client_gone(self.connection, 0.1):
                    with server.lock:
                        server.client_gone += 1
                    break
            self.close_connection = True

        def _answer(self, mode: str, answer: dict[str, Any]) -> None:
            if mode == "ok":
                self._send(200, json.dumps(answer).encode())
            elif mode.startswith("status:"):
                code = int(mode.split(":", 1)[1])
                err = {"error": {"code": code, "message": f"fake server says {code}", "type": "server_error"}}
                self._send(code, json.dumps(err).encode())
            elif mode == "error_body":
                self._send(200, json.dumps({"error": {"message": "model overloaded", "code": 200}}).encode())
            elif mode == "empty_choices":
                self._send(200, json.dumps({"choices": [], "usage": {}}).encode())
            elif mode == "list":
                self._send(200, b"[1, 2, 3]")
            elif mode == "null":
                self._send(200, b"null")
            elif mode == "invalid_json":
                self._send(200, b'{"choices": [{"message": {"content": "cut')
            elif mode == "html":
                self._send(200, b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
                           content_type="text/html")
            elif mode == "surrogate":
                answer["choices"][0]["message"]["content"] = "lone surrogate: \ud800 end"
                self._send(200, json.dumps(answer, ensure_ascii=True).encode())
            elif mode == "truncated":
                self._send(200, json.dumps(answer).encode()[:100], length=1000)
                self.close_connection = True
            elif mode == "trickle":
                self._trickle(json.dumps(answer).encode())
            elif mode == "hang":
                self._hang()
            else:
                raise ValueError(f"unknown fake server mode {mode!r}; one of {', '.join(MODES)}")

        def _trickle(self, body: bytes) -> None:
            size = server.trickle_chunks * server.trickle_bytes
            body = body + b" " * max(0, size - len(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            sent = 0
            try:
                for i in range(0, len(body), server.trickle_bytes):
                    self.wfile.write(body[i:i + server.trickle_bytes])
                    self.wfile.flush()
                    sent += 1
                    if server.stopping.wait(server.trickle_s) or _client_gone(self.connection, 0):
                        break
            except OSError:
                pass
            with server.lock:
                server.trickled_chunks.append(sent)
                if sent * server.trickle_bytes < len(body):
                    server.client_gone += 1
            self.close_connection = True

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, b'{"status": "ok"}')
                return
            if self.path != "/props" or server.openai_style is not None:
                self._send(404, b'{"error": "not found"}')
                return
            with server.lock:
                server.props_requests += 1
            mode = server.props_mode
            if mode == "hang":
                self._hang()
            elif mode.startswith("status:"):
                self._send(int(mode.split(":", 1)[1]), b'{"error": "props"}')
            else:
                props = {"model_alias": server.alias, "total_slots": 2, "build_info": "fake-build"}
                if server.model_path:
                    props["model_path"] = server.model_path
                self._send(200, json.dumps(props).encode())

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"{}")
            mode = server.next_mode()
            with server.lock:
                server.chat_requests += 1
                server.bodies.append(body)
                server.modes_used.append(mode)
                server.in_flight += 1
            if server.openai_style is not None:
                unknown = sorted(set(body) - OPENAI_FIELDS)
                if unknown or body.get("model") not in server.openai_style:
                    why = (f"Unrecognized request argument supplied: {unknown[0]}" if unknown
                           else f"The model `{body.get('model')}` does not exist")
                    self._send(400 if unknown else 404, json.dumps({"error": {"message": why}}).encode())
                    with server.lock:
                        server.in_flight -= 1
                    return
            try:
                while not server.gate.wait(0.1) and not server.stopping.is_set():
                    pass
                prompt = (body.get("messages") or [{}])[-1].get("content", "")
                content = (server.answer_for(prompt) if server.answer_for is not None
                           else server.answer if server.answer is not None else f"echo: {prompt}")
                self._answer(mode, completion(content, model=server.alias))
            except OSError:
                pass
            finally:
                with server.lock:
                    server.in_flight -= 1

    return Handler


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", default="ok", help=f"one of {', '.join(MODES)}")
    p.add_argument("--port", type=int, default=8081)
    args = p.parse_args(argv)
    srv = FakeLLMServer(args.mode, port=args.port).start()
    print(f"fake LLM server ({args.mode}) at {srv.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
