"""Byte templates for vLLM-shaped chat completion responses (stream chunks and bodies)."""

from __future__ import annotations

from typing import Any

import orjson

from .tokens import WORD_BYTES, tokens_text

DONE_AND_END = b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"  # [DONE] event, then the last HTTP chunk
SSE_TYPE = "text/event-stream; charset=utf-8"
END = b"0\r\n\r\n"  # the last HTTP chunk alone
FAULTS = ("no-done", "bad-json", "error-object", "slow-headers")
"""Stream faults the target can inject (--fault); besides them, http-<code> answers that status."""
BAD_JSON_EVENT = b"data: {\"id\": \"chatcmpl-cut\", \"choices\": [\n\n"
_N_WORDS = len(WORD_BYTES)


def http_chunk(payload: bytes) -> bytes:
    """Frame bytes as one HTTP/1.1 chunk."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


class StreamEncoder:
    """Pre-built pieces of one streamed response so each token costs one concatenation."""

    __slots__ = ("_head", "_reasoning", "_content", "_tail", "_usage_tail", "prompt_tokens",
                 "continuous_usage")

    def __init__(self, chat_id: str, created: int, model: str, prompt_tokens: int,
                 continuous_usage: bool) -> None:
        # orjson quotes and escapes the client-controlled id and model once per request.
        self._head = (b'data: {"id":%b,"object":"chat.completion.chunk","created":%d,"model":%b,'
                      % (orjson.dumps(chat_id), created, orjson.dumps(model)))
        choice = self._head + b'"choices":[{"index":0,"delta":{'
        self._reasoning = choice + b'"reasoning":"'
        self._content = choice + b'"content":"'
        self._tail = {
            None: b'"},"logprobs":null,"finish_reason":null}]',
            "stop": b'"},"logprobs":null,"finish_reason":"stop"}]',
            "length": b'"},"logprobs":null,"finish_reason":"length"}]',
        }
        self._usage_tail = b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}\n\n'
        self.prompt_tokens = prompt_tokens
        self.continuous_usage = continuous_usage

    def _close(self, completion_tokens: int) -> bytes:
        """End of a choices chunk: optional cumulative usage, then the event terminator."""
        if self.continuous_usage:
            p = self.prompt_tokens
            return self._usage_tail % (p, p + completion_tokens, completion_tokens)
        return b"}\n\n"

    def role(self) -> bytes:
        """The role-only first chunk (content "" is not a token)."""
        body = (self._head + b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
                b'"logprobs":null,"finish_reason":null}]' + self._close(0))
        return http_chunk(body)

    def token(self, generated: int, reasoning_tokens: int, finish_reason: str | None) -> bytes:
        """HTTP chunk for the generated-th token (1-based); reasoning first, then content."""
        if generated <= reasoning_tokens:
            start, word = self._reasoning, WORD_BYTES[(generated - 1) % _N_WORDS]
        else:
            start, word = self._content, WORD_BYTES[(generated - reasoning_tokens - 1) % _N_WORDS]
        body = start + word + self._tail[finish_reason] + self._close(generated)
        return b"%x\r\n%b\r\n" % (len(body), body)

    def usage(self, completion_tokens: int, reasoning_tokens: int) -> bytes:
        """The usage-only chunk sent after the last token when include_usage is set."""
        p = self.prompt_tokens
        body = (self._head + b'"choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,'
                b'"completion_tokens":%d,"completion_tokens_details":{"reasoning_tokens":%d},'
                b'"prompt_tokens_details":null}}\n\n'
                % (p, p + completion_tokens, completion_tokens, reasoning_tokens))
        return http_chunk(body)


def stream_error_event(message: str) -> bytes:
    """An error object inside a stream, as vLLM sends it when generation fails after the headers."""
    return http_chunk(b"data: %b\n\n" % orjson.dumps(
        {"error": {"message": message, "type": "InternalServerError", "param": None, "code": 500}}))


def usage_dict(prompt_tokens: int, completion_tokens: int, reasoning_tokens: int) -> dict[str, Any]:
    """The final usage object, vLLM field order."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "prompt_tokens_details": None,
    }


def completion_body(chat_id: str, created: int, model: str, prompt_tokens: int,
                    reasoning_tokens: int, answer_tokens: int, finish_reason: str) -> bytes:
    """Full non-stream chat.completion JSON body."""
    reasoning = tokens_text(reasoning_tokens) if reasoning_tokens else None
    content = tokens_text(answer_tokens) if answer_tokens else None
    return orjson.dumps({
        "id": chat_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "reasoning": reasoning,
                        "reasoning_content": reasoning, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish_reason,
        }],
        "usage": usage_dict(prompt_tokens, reasoning_tokens + answer_tokens, reasoning_tokens),
    })


def error_body(status: int, message: str) -> bytes:
    """vLLM's error JSON for a status code."""
    kind = {400: "BadRequestError", 404: "NotFoundError", 405: "MethodNotAllowedError",
            413: "BadRequestError", 500: "InternalServerError",
            501: "NotImplementedError"}.get(status, "BadRequestError")
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": status}})
