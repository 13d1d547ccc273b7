"""The one vocabulary of request faults, shared by both clients, and how Locust's table groups them.

A failed request's record holds a category (below) and the detail as the server or the socket
said it. Locust's failures table groups by the exception's text, so the text it gets is the
category plus the detail with request ids and numbers stripped: a few rows, not one per request.
"""

from __future__ import annotations

import orjson

from llmload.results.failures import normalised_detail

__all__ = ["FAULTS", "error_message", "normalised_detail"]

FAULTS: dict[str, tuple[str, str]] = {
    "connect": ("no connection: refused, unreachable, or the TLS handshake failed",
                "is the server up and is HOST right (http vs https, port)?"),
    "timeout": ("no data for REQUEST_TIMEOUT seconds, while connecting, waiting for headers, or mid-stream",
                "an overloaded or stalled server; raise REQUEST_TIMEOUT only if such waits are expected"),
    "http_<code>": ("the server answered with this HTTP status instead of a stream (e.g. http_400, http_429, http_503)",
                    "the detail holds the server's message: a bad request field, a rate limit, an engine restart"),
    "stream_error": ("the stream carried an error object (`data: {\"error\": ...}`)",
                     "the server's log around the request's X-Request-Id: the engine failed mid-generation"),
    "protocol": ("bytes that are not the OpenAI stream: SSE data that is not JSON, bad chunking, or no `data: [DONE]` at the end",
                 "a proxy or server that rewrites or truncates streams; compare with CLIENT=openai and curl"),
    "disconnected": ("the connection closed before the response ended (before headers or mid-stream)",
                     "the server's log: a crash, a restart, a proxy idle timeout, or a kill of the request"),
    "tool_call_invalid": ("the answer called a function (TOOLS) with arguments that are not a JSON object, or one that "
                          "was not offered",
                          "the model's tool use, not the transport: the detail names the call; the server's tool parser "
                          "(vLLM: --tool-call-parser openai for gpt-oss) and the tools file"),
    "interrupted": ("still streaming when the run ended (STOP_TIMEOUT ran out, or a signal); not a failure",
                    "raise STOP_TIMEOUT to let long streams finish"),
}
"""Category: (what it means, what to look at). The README's fault table shows the same rows."""

_MESSAGE_LIMIT = 300


def error_message(body: bytes | str) -> str:
    """The message of an error response body (vLLM's ``{"error": {"message"}}``, FastAPI's ``detail``), else its text."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        message = error.get("message", error.get("detail")) if isinstance(error, dict) else error
        if message:
            return " ".join(str(message).split())[:_MESSAGE_LIMIT]
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return " ".join(text.split())[:_MESSAGE_LIMIT]

