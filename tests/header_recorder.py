"""A tiny OpenAI-shaped HTTP server that records every request's method, path and headers."""

from __future__ import annotations

import http.server
import json
import threading
import time
from dataclasses import dataclass, field

MODEL = "recorded-model"
_CHUNKS = (
    {"id": "c", "object": "chat.completion.chunk", "model": MODEL,
     "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": None}]},
    {"id": "c", "object": "chat.completion.chunk", "model": MODEL,
     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"id": "c", "object": "chat.completion.chunk", "model": MODEL, "choices": [],
     "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}},
)
STREAM = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in _CHUNKS) + b"data: [DONE]\n\n"


@dataclass
class Recorder:
    """The server's URL and what it received: (method, path, headers with lower-cased names)."""

    url: str
    received: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    def authorizations(self) -> set[str | None]:
        return {headers.get("authorization") for _, _, headers in self.received}


def start_recorder() -> tuple[Recorder, http.server.ThreadingHTTPServer]:
    """Serve /v1/models, /metrics, /tokenize, /health and streamed chat completions on 127.0.0.1:0."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            recorder.received.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))

        def do_GET(self) -> None:  # noqa: N802
            self._record()
            if self.path == "/v1/models":
                self._answer(200, json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode())
            elif self.path == "/health":
                self._answer(200, b"")
            elif self.path == "/metrics":
                self._answer(200, b"vllm:num_requests_running 0\n", "text/plain")
            else:
                self._answer(404, b'{"detail":"Not Found"}')

        def do_POST(self) -> None:  # noqa: N802
            self._record()
            if self.path == "/v1/chat/completions":
                time.sleep(0.05)  # a gentle pace for a closed-loop user
                self._answer(200, STREAM, "text/event-stream")
            elif self.path == "/tokenize":
                self._answer(200, b'{"count": 1}')
            else:
                self._answer(404, b'{"detail":"Not Found"}')

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    recorder = Recorder(f"http://127.0.0.1:{server.server_address[1]}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return recorder, server
