"""A real HTTP server on 127.0.0.1 that answers OpenAI-style requests from a script.

The llama.cpp server (tests/llama_server.py) is the acceptance test for what a real model
returns; this one makes the failures a real server only shows now and then happen on cue: 429
with Retry-After, 5xx, malformed bodies, slow answers, missing logprobs.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-able, or bytes sent as they are
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False  # send half the body, then close the connection


Script = Callable[[str, dict[str, Any], int], Reply]  # (path, body, n-th call) -> reply


def completion(text: str, logprobs: list[tuple[str, float, dict[str, float]]] | None = None,
               prompt_tokens: int = 5) -> dict[str, Any]:
    """A legacy /completions answer."""
    lp = None if logprobs is None else {
        "tokens": [t for t, _, _ in logprobs], "token_logprobs": [v for _, v, _ in logprobs],
        "top_logprobs": [top for _, _, top in logprobs], "text_offset": [0] * len(logprobs)}
    return {"id": "c", "object": "text_completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": lp}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 2,
                      "total_tokens": prompt_tokens + 2}}


def chat(text: str, logprobs: list[tuple[str, float, dict[str, float]]] | None = None,
         prompt_tokens: int = 7) -> dict[str, Any]:
    """A /chat/completions answer."""
    lp = None if logprobs is None else {"content": [
        {"token": t, "logprob": v, "bytes": None,
         "top_logprobs": [{"token": k, "logprob": x, "bytes": None} for k, x in top.items()]}
        for t, v, top in logprobs]}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop", "logprobs": lp}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 3,
                      "total_tokens": prompt_tokens + 3}}


class Server:
    def __init__(self, script: Script, models: tuple[str, ...] = ("m",)) -> None:
        self.script, self.models = script, models
        self.calls: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.httpd.handle_error = self._handle_error  # type: ignore[method-assign]
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def _handle_error(self, request: Any, address: Any) -> None:
        """A client that hangs up (a run stopped by a 404, say) is no server error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            ThreadingHTTPServer.handle_error(self.httpd, request, address)

    def generation_calls(self) -> list[dict[str, Any]]:
        return [body for path, body, _ in self.calls if not path.endswith("/models")]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _headers(self) -> dict[str, str]:
                return {k.lower(): v for k, v in self.headers.items()}

            def _send(self, reply: Reply) -> None:
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(
                    reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload) * (2 if reply.drop else 1)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)
                if reply.drop:
                    self.wfile.flush()
                    self.close_connection = True

            def do_GET(self) -> None:
                server.calls.append((self.path, {}, self._headers()))
                self._send(Reply(body={"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "me"}
                    for m in server.models]}))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.calls.append((self.path, body, self._headers()))
                    n = len(server.generation_calls())
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = server.script(self.path, body, n)
                    time.sleep(reply.delay)
                    self._send(reply)
                finally:
                    with server._lock:
                        server.in_flight -= 1

        return Handler


@contextmanager
def serve(script: Script, models: tuple[str, ...] = ("m",)) -> Iterator[Server]:
    server = Server(script, models)
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
