"""vLLM-shaped routes (health, models, tokenize, chat completions, metrics) over http11."""

from __future__ import annotations

import hmac
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson

from .chunks import SSE_TYPE, StreamEncoder, error_body
from .engine import Engine
from .http11 import HttpConnection, Request
from .launcher import IDENTITY_PATH
from .metrics import metrics_text
from .profiles import normalize_effort
from .responses import FullResponse, StreamResponse
from .sendlog import SendLog
from .tokens import prompt_token_count, prompt_token_ids, text_token_ids

MAX_MODEL_LEN = 131072
VERSION = "0.32.0-sim"


class _BadRequest(Exception):
    """A request that must be answered with a vLLM error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class _ChatParams:
    """The parts of a chat request the simulator acts on."""

    prompt_tokens: int
    limit: int  # max output tokens (explicit max_tokens, else what fits in the context)
    effort: str
    ignore_eos: bool
    stream: bool
    include_usage: bool
    continuous_usage: bool


class SimApp:
    """Routes requests for one engine/model."""

    def __init__(self, engine: Engine, send_log: SendLog | None = None, api_key: str = "", fault: str | None = None,
                 fault_rate: float = 1.0, seed: int = 0, identity: dict[str, Any] | None = None) -> None:
        self.engine = engine
        self._authorization = f"Bearer {api_key}".encode() if api_key else None
        self.identity = {"served_by": "llmload.sim", "version": VERSION, "model": engine.profile.served_model, **(identity or {})}
        self.fault = fault
        """A fault kind (chunks.FAULTS or http-<code>) injected into a share ``fault_rate`` of chat requests."""
        self.fault_rate = fault_rate
        self._fault_draws = random.Random(seed)
        self.http_requests: Counter[tuple[str, str, str]] = Counter()
        """Requests answered, by (path, method, status class), as vLLM's http_requests_total counts them."""
        self.model = engine.profile.served_model
        self.send_log = send_log
        self.created = int(time.time())
        self.connections: set[HttpConnection] = set()
        self._routes = {
            "/health": ("GET", self._health),
            "/version": ("GET", self._version),
            IDENTITY_PATH: ("GET", self._identity),
            "/v1/models": ("GET", self._models),
            "/metrics": ("GET", self._metrics),
            "/tokenize": ("POST", self._tokenize),
            "/v1/chat/completions": ("POST", self._chat),
        }

    def protocol(self) -> HttpConnection:
        """Protocol factory for loop.create_server."""
        return HttpConnection(self.handle, self.connections)

    def handle(self, conn: HttpConnection, req: Request) -> None:
        """Dispatch one request; errors become vLLM/FastAPI-shaped JSON."""
        route = self._routes.get(req.path)
        status = 200
        if route is None:
            status = 404
            conn.send(404, b'{"detail":"Not Found"}')
        elif self._authorization is not None and req.path != "/health" and not hmac.compare_digest(
                req.headers.get("authorization", "").encode(), self._authorization):
            status = 401
            conn.send(401, b'{"error":"Unauthorized"}')  # vLLM's answer to a missing or wrong key
        elif req.method != route[0]:
            status = 405
            conn.send(405, b'{"detail":"Method Not Allowed"}')
        else:
            try:
                route[1](conn, req)
            except _BadRequest as e:
                status = e.status
                conn.send(e.status, error_body(e.status, str(e)))
        self.http_requests[(req.path, req.method, f"{status // 100}xx")] += 1

    # ---- simple routes -----------------------------------------------------------
    def _health(self, conn: HttpConnection, req: Request) -> None:
        """GET /health: 200, empty body."""
        conn.send(200, b"")

    def _version(self, conn: HttpConnection, req: Request) -> None:
        """GET /version."""
        conn.send(200, orjson.dumps({"version": VERSION}))

    def _identity(self, conn: HttpConnection, req: Request) -> None:
        """GET /llmload/sim: what this target is and how fast it plays (a rehearsal, not a measurement)."""
        conn.send(200, orjson.dumps(self.identity))

    def _models(self, conn: HttpConnection, req: Request) -> None:
        """GET /v1/models: the one served model."""
        card = {"id": self.model, "object": "model", "created": self.created, "owned_by": "vllm",
                "root": self.model, "max_model_len": MAX_MODEL_LEN}
        conn.send(200, orjson.dumps({"object": "list", "data": [card]}))

    def _metrics(self, conn: HttpConnection, req: Request) -> None:
        """GET /metrics: Prometheus text."""
        conn.send(200, metrics_text(self.engine, self.model, self.http_requests).encode(),
                  "text/plain; version=0.0.4; charset=utf-8")

    # ---- body parsing ------------------------------------------------------------
    def _json_body(self, req: Request) -> dict[str, Any]:
        """Parse a JSON object body or raise 400."""
        try:
            body = orjson.loads(req.body)
        except orjson.JSONDecodeError as e:
            raise _BadRequest(400, f"Invalid JSON body: {e}") from None
        if not isinstance(body, dict):
            raise _BadRequest(400, "Request body must be a JSON object")
        return body

    def _check_model(self, body: dict[str, Any]) -> None:
        """404 like vLLM when the request names another model (absent = served model)."""
        model = body.get("model")
        if model is not None and model != self.model:
            raise _BadRequest(404, f"The model `{model}` does not exist.")

    @staticmethod
    def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
        """Validated messages list."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or \
                not all(isinstance(m, dict) for m in messages):
            raise _BadRequest(400, "`messages` must be a non-empty list of message objects")
        return messages

    def _tokenize(self, conn: HttpConnection, req: Request) -> None:
        """POST /tokenize: o200k_harmony ids, of the text or of the chat as vLLM renders it."""
        body = self._json_body(req)
        self._check_model(body)
        if isinstance(body.get("prompt"), str):
            tokens = text_token_ids(body["prompt"])
        else:
            tokens = prompt_token_ids(self._messages(body))
        conn.send(200, orjson.dumps({"count": len(tokens), "max_model_len": MAX_MODEL_LEN, "tokens": tokens}))

    # ---- chat completions --------------------------------------------------------
    def _chat_params(self, body: dict[str, Any]) -> _ChatParams:
        """Validate a chat request the way vLLM does; raise _BadRequest otherwise."""
        self._check_model(body)
        messages = self._messages(body)
        max_tokens = body.get("max_completion_tokens")
        if max_tokens is None:
            max_tokens = body.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                       or max_tokens < 1):
            raise _BadRequest(400, "max_tokens must be at least 1, got %r." % (max_tokens,))
        try:
            effort = normalize_effort(body.get("reasoning_effort"))
        except ValueError as e:
            raise _BadRequest(400, str(e)) from None
        stream = bool(body.get("stream", False))
        options = body.get("stream_options")
        if options is not None and not stream:
            raise _BadRequest(400, "Stream options can only be defined when `stream=True`.")
        options = options if isinstance(options, dict) else {}
        include_usage = bool(options.get("include_usage"))
        prompt_tokens = prompt_token_count(messages, effort)
        room = MAX_MODEL_LEN - prompt_tokens
        if room < 1 or (max_tokens is not None and max_tokens > room):
            want = max_tokens if max_tokens is not None else 0
            raise _BadRequest(400, (
                f"This model's maximum context length is {MAX_MODEL_LEN} tokens. However, you "
                f"requested {prompt_tokens + want} tokens ({prompt_tokens} in the messages, {want} "
                "in the completion). Please reduce the length of the messages or completion."))
        # Absent max_tokens still stops at the context window; ignore_eos needs an explicit one.
        ignore_eos = bool(body.get("ignore_eos", False)) and max_tokens is not None
        return _ChatParams(
            prompt_tokens=prompt_tokens, limit=room if max_tokens is None else max_tokens,
            effort=effort, ignore_eos=ignore_eos, stream=stream, include_usage=include_usage,
            continuous_usage=include_usage and bool(options.get("continuous_usage_stats")))

    def _chat(self, conn: HttpConnection, req: Request) -> None:
        """POST /v1/chat/completions: queue the request; tokens flow from the engine."""
        p = self._chat_params(self._json_body(req))
        request_id = req.headers.get("x-request-id") or uuid.uuid4().hex
        chat_id, created = f"chatcmpl-{request_id}", int(time.time())
        fault = self.fault if self.fault and self._fault_draws.random() < self.fault_rate else None
        if fault and fault.startswith("http-"):
            status = int(fault[5:])
            raise _BadRequest(status, f"request {chat_id} refused (fault injection): {p.prompt_tokens} prompt tokens, "
                                      f"{self._fault_draws.randrange(1, 10**6)} requests ahead")
        sink: StreamResponse | FullResponse
        if p.stream:
            enc = StreamEncoder(chat_id, created, self.model, p.prompt_tokens, p.continuous_usage)
            sink = StreamResponse(conn, self.engine, enc, request_id, p.include_usage, self.send_log, fault)
        else:
            sink = FullResponse(conn, self.engine, chat_id, created, self.model)
        seq = self.engine.submit(p.prompt_tokens, effort=p.effort, max_tokens=p.limit,
                                 ignore_eos=p.ignore_eos, sink=sink)
        if seq.fail:
            raise _BadRequest(500, "Simulated internal server error (fault injection).")
        sink.seq = seq
        if p.stream and fault != "slow-headers":
            conn.start_stream(200, SSE_TYPE, sink)  # headers go out at once, as uvicorn does
        else:
            conn.active = sink  # slow-headers: they go out with the first token
        if conn.paused:
            self.engine.pause(seq)
