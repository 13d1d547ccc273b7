"""vLLM-shaped routes (health, models, tokenize, chat completions, the Responses API, metrics) over http11; with another
dialect (sim/dialects.py), SGLang's or trtllm-serve's routes, stream fields, usage and metrics instead.

Offered tools (``tools``, ``tool_choice``) turn the answer into a function call while the request holds fewer
tool results than ``tool_calls`` (a share ``tool_invalid_rate`` of calls broken: arguments that are not JSON, or
a function that was not offered); tool_choice required always calls, none never. The call takes the answer's
tokens, so its timing is the answer's. A JSON response format (chat's ``response_format``, the Responses API's
``text.format``: json_object or json_schema) makes a text answer one JSON object of the same tokens,
``{"<key>": "words ..."}``, its key the schema's first property (else ``answer``).
"""

from __future__ import annotations

import hmac
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson

from .chunks import JsonText, StreamEncoder, ToolCall, error_body
from .dialects import DIALECTS, Dialect
from .engine_metrics import sglang_metrics_text, trtllm_iteration_stats, trtllm_metrics_text
from .engine import Engine
from .http11 import HttpConnection, Request
from .launcher import IDENTITY_PATH
from .metrics import metrics_text
from .profiles import normalize_effort
from .response_events import ResponsesEncoder, in_progress_response
from .responses import FullResponse, StreamResponse
from .sendlog import SendLog
from .tokens import prompt_blocks, prompt_token_ids, text_token_ids

MAX_MODEL_LEN = 131072
VERSION = DIALECTS["vllm"].version


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
    tool: tuple[str, str] | None = None
    """The function the answer calls and its first argument's name; None: the answer is text."""
    blocks: tuple[int, ...] = ()
    """Hashes of the prompt's full KV blocks (the prefix cache's keys)."""
    json_key: str | None = None
    """The key of the JSON object a text answer is, when the request asks for JSON; None: words."""


class SimApp:
    """Routes requests for one engine/model."""

    def __init__(self, engine: Engine, send_log: SendLog | None = None, api_key: str = "", fault: str | None = None,
                 fault_rate: float = 1.0, seed: int = 0, identity: dict[str, Any] | None = None, tool_calls: int = 1,
                 tool_invalid_rate: float = 0.0, max_model_len: int = MAX_MODEL_LEN, stream_interval: int = 1,
                 dialect: Dialect = DIALECTS["vllm"]) -> None:
        self.engine = engine
        self.dialect = dialect
        """The engine it speaks as: routes, stream fields, usage, metrics (sim/dialects.py)."""
        self._ready_s = time.monotonic() + dialect.starting_s  # /health says 503 before (SGLang's Starting)
        self.max_model_len = max_model_len
        """vLLM's --max-model-len: a longer prompt and answer is refused with 400, as vLLM refuses it."""
        self.stream_interval = stream_interval
        self._authorization = f"Bearer {api_key}".encode() if api_key else None
        self.identity = {"served_by": "llmload.sim", "version": dialect.version, "dialect": dialect.name,
                         "model": engine.profile.served_model, **(identity or {})}
        self.fault = fault
        """A fault kind (chunks.FAULTS or http-<code>) injected into a share ``fault_rate`` of chat requests."""
        self.fault_rate = fault_rate
        self._fault_draws = random.Random(seed)
        self.tool_calls = tool_calls
        """Function calls a task gets (while the request holds fewer tool results) before a text answer."""
        self.tool_invalid_rate = tool_invalid_rate
        self._seed = seed
        self.http_requests: Counter[tuple[str, str, str]] = Counter()
        """Requests answered, by (path, method, status class), as vLLM's http_requests_total counts them."""
        self.model = engine.profile.served_model
        self.send_log = send_log
        self.created = int(time.time())
        self.connections: set[HttpConnection] = set()
        self._routes = {
            "/health": ("GET", self._health),
            IDENTITY_PATH: ("GET", self._identity),
            "/v1/models": ("GET", self._models),
            dialect.metrics_path: ("GET", self._metrics),
            "/v1/chat/completions": ("POST", self._chat),
            "/v1/responses": ("POST", self._responses),
            **self._dialect_routes(dialect.name),
        }
        self._open_paths = ("/health", "/ready", "/metrics") if dialect.name == "sglang" else ("/health",)
        """Paths served without the API key: vLLM checks only /v1/...; SGLang lets /health*, /ready*, /metrics* by."""

    def _dialect_routes(self, name: str) -> dict[str, tuple[str, Any]]:
        """The routes only this engine has (sim/dialects.py)."""
        if name == "sglang":
            return {"/health_generate": ("GET", self._health), "/ready": ("GET", self._health),
                    "/model_info": ("GET", self._sglang_model_info), "/get_model_info": ("GET", self._sglang_model_info),
                    "/server_info": ("GET", self._sglang_server_info), "/get_server_info": ("GET", self._sglang_server_info),
                    "/flush_cache": ("GET,POST", self._flush_cache), "/tokenize": ("POST", self._tokenize),
                    "/v1/tokenize": ("POST", self._tokenize)}
        if name == "trtllm":
            return {"/health_generate": ("GET", self._health), "/version": ("GET", self._version),
                    "/metrics": ("GET", self._iteration_stats)}
        return {"/version": ("GET", self._version), "/reset_prefix_cache": ("POST", self._reset_prefix_cache),
                "/tokenize": ("POST", self._tokenize)}

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
        elif self._authorization is not None and not req.path.startswith(self._open_paths) and not hmac.compare_digest(
                req.headers.get("authorization", "").encode(), self._authorization):
            status = 401
            conn.send(401, b'{"error":"Unauthorized"}')  # vLLM's (and SGLang's) answer to a missing or wrong key
        elif req.method not in route[0].split(","):
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
        """GET /health: 200, empty body; 503 while an SGLang-dialect target is Starting."""
        conn.send(503 if time.monotonic() < self._ready_s else 200, b"")

    def _version(self, conn: HttpConnection, req: Request) -> None:
        """GET /version."""
        conn.send(200, orjson.dumps({"version": self.dialect.version}))

    def _sglang_model_info(self, conn: HttpConnection, req: Request) -> None:
        """SGLang's GET /model_info (and its deprecated /get_model_info)."""
        conn.send(200, orjson.dumps({"model_path": self.model, "served_model_name": self.model,
                                     "tokenizer_path": self.model, "is_generation": True, "reasoning_parser": "gpt-oss",
                                     "tool_call_parser": "gpt-oss", "model_type": "gpt_oss"}))

    def _sglang_server_info(self, conn: HttpConnection, req: Request) -> None:
        """SGLang's GET /server_info (and /get_server_info): its server args and its version."""
        engine = self.engine.profile.engine
        conn.send(200, orjson.dumps({"model_path": self.model, "served_model_name": self.model,
                                     "context_length": self.max_model_len, "max_running_requests": engine.max_num_seqs,
                                     "chunked_prefill_size": engine.max_num_batched_tokens, "enable_metrics": True,
                                     "reasoning_parser": "gpt-oss", "version": self.dialect.version}))

    def _flush_cache(self, conn: HttpConnection, req: Request) -> None:
        """SGLang's /flush_cache: 200, or 400 while requests run (http_server.py flush_cache)."""
        done = self.engine.reset_prefix_cache()
        conn.send(200 if done else 400, b"Cache flushed.\nPlease check backend logs for more details. (When there are "
                  b"running or waiting requests, the operation will not be performed.)\n", "text/plain; charset=utf-8")

    def _iteration_stats(self, conn: HttpConnection, req: Request) -> None:
        """trtllm-serve's GET /metrics: JSON iteration stats, not Prometheus text."""
        conn.send(200, orjson.dumps(trtllm_iteration_stats(self.engine)))

    def _identity(self, conn: HttpConnection, req: Request) -> None:
        """GET /llmload/sim: what this target is and how fast it plays (a rehearsal, not a measurement)."""
        conn.send(200, orjson.dumps(self.identity))

    def _models(self, conn: HttpConnection, req: Request) -> None:
        """GET /v1/models: the one served model."""
        card: dict[str, Any] = {"id": self.model, "object": "model", "created": self.created,
                                "owned_by": self.dialect.owned_by}
        if self.dialect.models_max_len:
            card.update(root=self.model, max_model_len=self.max_model_len)
        conn.send(200, orjson.dumps({"object": "list", "data": [card]}))

    def _metrics(self, conn: HttpConnection, req: Request) -> None:
        """GET /metrics (trtllm: /prometheus/metrics): Prometheus text under the dialect's names."""
        name = self.dialect.name
        text = (sglang_metrics_text(self.engine, self.model) if name == "sglang"
                else trtllm_metrics_text(self.engine, self.model) if name == "trtllm"
                else metrics_text(self.engine, self.model, self.http_requests))
        conn.send(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _reset_prefix_cache(self, conn: HttpConnection, req: Request) -> None:
        """POST /reset_prefix_cache, as vLLM serves it in dev mode (VLLM_SERVER_DEV_MODE=1): 200, or 409 while
        running requests hold cached blocks (vllm/entrypoints/serve/cache/api_router.py)."""
        if self.engine.reset_prefix_cache():
            conn.send(200, b"")
        else:
            conn.send(409, b'{"detail":"Prefix cache reset failed."}')

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
        conn.send(200, orjson.dumps({"count": len(tokens), "max_model_len": self.max_model_len, "tokens": tokens}))

    # ---- chat completions and the Responses API ----------------------------------
    def _chat_params(self, body: dict[str, Any]) -> _ChatParams:
        """Validate a chat request the way vLLM does; raise _BadRequest otherwise."""
        self._check_model(body)
        messages = self._messages(body)
        stream = bool(body.get("stream", False))
        options = body.get("stream_options")
        if options is not None and not stream:
            raise _BadRequest(400, "Stream options can only be defined when `stream=True`.")
        options = options if isinstance(options, dict) else {}
        # trtllm-serve's gpt-oss stream always ends with usage and reads no stream_options (harmony_adapter.py).
        include_usage = bool(options.get("include_usage")) or (stream and self.dialect.usage == "trtllm")
        continuous = include_usage and self.dialect.continuous_usage and bool(options.get("continuous_usage_stats"))
        max_tokens = body.get("max_completion_tokens")
        if max_tokens is None:
            max_tokens = body.get("max_tokens")
        return self._params(body, messages, max_tokens, body.get("reasoning_effort"), stream, include_usage,
                            continuous, body.get("response_format"))

    def _responses_params(self, body: dict[str, Any]) -> _ChatParams:
        """Validate a Responses API request (``input``, ``reasoning.effort``, ``max_output_tokens``)."""
        self._check_model(body)
        reasoning = body.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, dict):
            raise _BadRequest(400, "`reasoning` must be an object like {\"effort\": \"low\"}")
        text = body.get("text")
        return self._params(body, _input_messages(body.get("input")), body.get("max_output_tokens"),
                            (reasoning or {}).get("effort"), bool(body.get("stream", False)), True, False,
                            text.get("format") if isinstance(text, dict) else None)

    def _params(self, body: dict[str, Any], messages: list[dict[str, Any]], max_tokens: Any, effort_value: Any,
                stream: bool, include_usage: bool, continuous_usage: bool, response_format: Any = None) -> _ChatParams:
        """What both APIs share: the output limit, the effort, the prompt's length, the tool to call, the JSON asked for."""
        if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                       or max_tokens < 1):
            raise _BadRequest(400, "max_tokens must be at least 1, got %r." % (max_tokens,))
        try:
            effort = normalize_effort(effort_value)
        except ValueError as e:
            raise _BadRequest(400, str(e)) from None
        prompt_tokens, blocks = prompt_blocks(messages, effort, self.engine.profile.engine.block_size)
        room = self.max_model_len - prompt_tokens
        if room < 1 or (max_tokens is not None and max_tokens > room):
            want = max_tokens if max_tokens is not None else 0
            raise _BadRequest(400, (
                f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                f"requested {prompt_tokens + want} tokens ({prompt_tokens} in the messages, {want} "
                "in the completion). Please reduce the length of the messages or completion."))
        # Absent max_tokens still stops at the context window; ignore_eos needs an explicit one.
        ignore_eos = bool(body.get("ignore_eos", False)) and max_tokens is not None
        tool_results = sum(1 for m in messages if m.get("role") == "tool")
        return _ChatParams(
            prompt_tokens=prompt_tokens, limit=room if max_tokens is None else max_tokens,
            effort=effort, ignore_eos=ignore_eos, stream=stream, include_usage=include_usage,
            continuous_usage=continuous_usage, tool=self._tool_to_call(body, tool_results), blocks=blocks,
            json_key=_json_key(response_format))

    def _tool_to_call(self, body: dict[str, Any], tool_results: int) -> tuple[str, str] | None:
        """The function the answer calls (its name, its first argument's name), or None for a text answer."""
        tools = body.get("tools")
        if not isinstance(tools, list) or not tools:
            return None
        functions = [t.get("function", t) for t in tools if isinstance(t, dict) and t.get("type") == "function"]
        if not functions or not all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in functions):
            raise _BadRequest(400, "each tool must be {\"type\": \"function\"} with a function name")
        choice = body.get("tool_choice", "auto")
        if choice == "none" or (choice == "auto" and tool_results >= self.tool_calls):
            return None
        function = functions[tool_results % len(functions)]
        if isinstance(choice, dict):  # {"type": "function", "name"} (Responses) or {"function": {"name"}} (chat)
            named = choice.get("name") or (choice.get("function") or {}).get("name")
            function = next((f for f in functions if f["name"] == named), function)
        properties = (function.get("parameters") or {}).get("properties") or {}
        return function["name"], next(iter(properties), "input")

    def _call(self, tool: tuple[str, str] | None, seq: Any, request_id: str) -> ToolCall | None:
        """The call a sequence streams in place of its answer; a share tool_invalid_rate of them broken."""
        if tool is None or seq.answer_tokens < 1:
            return None
        draw = random.Random(f"tools/{self._seed}/{seq.index}").random()
        name, key = tool
        broken = draw < self.tool_invalid_rate
        if broken and draw < self.tool_invalid_rate / 2:  # half the broken calls name a function not offered
            name, broken = f"{name}_unoffered", False
        return ToolCall(name, key, f"call_{request_id[:24]}", seq.answer_tokens, broken)

    def _injected_fault(self, p: _ChatParams, response_id: str) -> str | None:
        """The fault this request gets (FAULT, drawn at FAULT_RATE); an http-<code> one is answered here."""
        fault = self.fault if self.fault and self._fault_draws.random() < self.fault_rate else None
        if fault and fault.startswith("http-"):
            status = int(fault[5:])
            raise _BadRequest(status, f"request {response_id} refused (fault injection): {p.prompt_tokens} prompt tokens, "
                                      f"{self._fault_draws.randrange(1, 10**6)} requests ahead")
        return fault

    def _chat(self, conn: HttpConnection, req: Request) -> None:
        """POST /v1/chat/completions: queue the request; tokens flow from the engine."""
        p = self._chat_params(self._json_body(req))
        request_id = req.headers.get("x-request-id") or uuid.uuid4().hex
        chat_id, created = f"chatcmpl-{request_id}", int(time.time())
        fault = self._injected_fault(p, chat_id)
        sink: StreamResponse | FullResponse
        if p.stream:
            enc = StreamEncoder(chat_id, created, self.model, p.prompt_tokens, p.continuous_usage,
                                self.dialect.reasoning_key, self.dialect.usage)
            sink = StreamResponse(conn, self.engine, enc, request_id, p.include_usage, self.send_log, fault,
                                  self.stream_interval)
        else:
            sink = FullResponse(conn, self.engine, chat_id, created, self.model)
        self._start(conn, p, sink, request_id, fault)

    def _responses(self, conn: HttpConnection, req: Request) -> None:
        """POST /v1/responses: the Responses API, streamed only (the suite's requests always stream)."""
        body = self._json_body(req)
        p = self._responses_params(body)
        if not p.stream:
            raise _BadRequest(400, "the built-in target serves /v1/responses streamed only: set \"stream\": true")
        request_id = req.headers.get("x-request-id") or uuid.uuid4().hex
        response_id = f"resp_{request_id}"
        fault = self._injected_fault(p, response_id)
        enc = ResponsesEncoder(in_progress_response(response_id, int(time.time()), self.model, body), p.prompt_tokens,
                               request_id[:32])
        self._start(conn, p, StreamResponse(conn, self.engine, enc, request_id, True, self.send_log, fault,
                                            self.stream_interval), request_id, fault)

    def _start(self, conn: HttpConnection, p: _ChatParams, sink: StreamResponse | FullResponse, request_id: str,
               fault: str | None) -> None:
        """Submit the request to the engine and start the response (the headers wait for token 1 under slow-headers)."""
        seq = self.engine.submit(p.prompt_tokens, effort=p.effort, max_tokens=p.limit,
                                 ignore_eos=p.ignore_eos, sink=sink, prompt_blocks=p.blocks)
        if seq.fail:
            raise _BadRequest(500, "Simulated internal server error (fault injection).")
        sink.seq = seq
        call = self._call(p.tool, seq, request_id)
        json_text = JsonText(p.json_key, seq.answer_tokens) if p.json_key is not None and call is None else None
        if isinstance(sink, StreamResponse):
            sink.enc.call, sink.enc.json_text = call, json_text
        else:
            sink.call, sink.json_text = call, json_text
        if p.stream and fault != "slow-headers":
            assert isinstance(sink, StreamResponse)
            sink.start_stream()  # headers go out at once, as uvicorn does
        else:
            conn.active = sink  # slow-headers: they go out with the first token
        if conn.paused:
            self.engine.pause(seq)


def _json_key(response_format: Any) -> str | None:
    """The key of the JSON object a text answer is for a response format (chat's or the Responses API's): the JSON
    Schema's first property, else ``answer``; None when the format asks for no JSON (absent, or text)."""
    if not isinstance(response_format, dict) or response_format.get("type") not in ("json_object", "json_schema"):
        return None
    schema = response_format.get("schema") or (response_format.get("json_schema") or {}).get("schema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return next(iter(properties), "answer") if isinstance(properties, dict) else "answer"


def _input_messages(value: Any) -> list[dict[str, Any]]:
    """The Responses API's ``input`` as chat messages, for counting: text, messages, function calls and their outputs."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        raise _BadRequest(400, "`input` must be a string or a non-empty list of input items")
    messages = []
    for item in value:
        kind = item.get("type", "message")
        if kind == "function_call":
            messages.append({"role": "assistant", "content": f"{item.get('name', '')}{item.get('arguments', '')}"})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "content": output if isinstance(output, str) else orjson.dumps(output).decode()})
        elif kind == "message" or "role" in item:
            messages.append({"role": item.get("role", "user"), "content": item.get("content")})
    return messages
