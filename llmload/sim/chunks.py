"""Byte templates for vLLM-shaped chat completion responses (stream chunks and bodies), and the function call
the target streams in place of an answer when tools are offered (both APIs)."""

from __future__ import annotations

from typing import Any

import orjson

from .tokens import WORD_BYTES, WORDS, tokens_text

DONE_AND_END = b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"  # [DONE] event, then the last HTTP chunk
SSE_TYPE = "text/event-stream; charset=utf-8"
END = b"0\r\n\r\n"  # the last HTTP chunk alone
FAULTS = ("no-done", "bad-json", "error-object", "slow-headers")
"""Stream faults the target can inject (--fault); besides them, http-<code> answers that status."""
BAD_JSON_EVENT = b"data: {\"id\": \"chatcmpl-cut\", \"choices\": [\n\n"
_N_WORDS = len(WORD_BYTES)
WORDS_TEXT = tuple(w + " " for w in WORDS)


def http_chunk(payload: bytes) -> bytes:
    """Frame bytes as one HTTP/1.1 chunk."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


class JsonText:
    """An answer that is one JSON object, a token a piece: ``{"<key>": "`` the first token, a word each token after
    it, ``"}`` the last (one token: ``{}``). A function call's arguments are one; so is a structured answer
    (response_format json). A broken one leaves the object unclosed; one cut by max_tokens is cut like a model's."""

    __slots__ = ("tokens", "_open", "_close", "_open_escaped", "_close_escaped")

    def __init__(self, key: str, tokens: int, broken: bool = False) -> None:
        self.tokens = tokens
        """The answer's planned tokens (the object's pieces)."""
        self._open = '{"%s": "' % key
        self._close = '"' if broken else '"}'
        if tokens == 1:
            self._open = "{" if broken else "{}"
        # Escaped once here: the words between need no escaping (WORD_BYTES), so a token costs no encoding.
        self._open_escaped = orjson.dumps(self._open)[1:-1]
        self._close_escaped = orjson.dumps(self._close)[1:-1]

    def piece(self, k: int) -> str:
        """The text of answer token ``k`` (1-based)."""
        if k == 1:
            return self._open
        if k == self.tokens:
            return self._close
        return WORDS_TEXT[(k - 2) % _N_WORDS]

    def escaped(self, k: int) -> bytes:
        """Answer token ``k``'s text as it stands inside a JSON string."""
        if k == 1:
            return self._open_escaped
        if k == self.tokens:
            return self._close_escaped
        return WORD_BYTES[(k - 2) % _N_WORDS]

    def text(self, tokens: int) -> str:
        """The text after ``tokens`` of them."""
        return "".join(self.piece(k) for k in range(1, tokens + 1))


class ToolCall(JsonText):
    """A function call streamed in place of the answer: its arguments are one JsonText."""

    __slots__ = ("name", "call_id")

    def __init__(self, name: str, key: str, call_id: str, tokens: int, broken: bool = False) -> None:
        super().__init__(key, tokens, broken)
        self.name = name
        self.call_id = call_id

    def arguments(self, tokens: int) -> str:
        """The arguments' text after ``tokens`` of them."""
        return self.text(tokens)


class StreamEncoder:
    """Pre-built pieces of one streamed chat completion so each token costs one concatenation.

    What a stream writes, in order: ``opening()`` with the headers, ``role()`` before token 1, ``token()`` per
    token, ``closing()`` after the last (or ``error_event()`` when a fault breaks it); ``call`` makes the answer a
    function call (``delta.tool_calls``, finish_reason tool_calls), ``json_text`` a JSON object (response_format).
    """

    __slots__ = ("_head", "_reasoning", "_content", "_call_next", "_tail", "_usage_tail", "prompt_tokens",
                 "continuous_usage", "call", "json_text", "usage_style")

    def __init__(self, chat_id: str, created: int, model: str, prompt_tokens: int,
                 continuous_usage: bool, reasoning_key: str = "reasoning", usage_style: str = "vllm") -> None:
        # orjson quotes and escapes the client-controlled id and model once per request.
        self._head = (b'data: {"id":%b,"object":"chat.completion.chunk","created":%d,"model":%b,'
                      % (orjson.dumps(chat_id), created, orjson.dumps(model)))
        choice = self._head + b'"choices":[{"index":0,"delta":{'
        self._reasoning = choice + b'"%b":"' % reasoning_key.encode()  # the dialect's field (sim/dialects.py)
        self._content = choice + b'"content":"'
        self._call_next = choice + b'"tool_calls":[{"index":0,"function":{"arguments":'
        self._tail = {
            None: b'"},"logprobs":null,"finish_reason":null}]',
            "stop": b'"},"logprobs":null,"finish_reason":"stop"}]',
            "length": b'"},"logprobs":null,"finish_reason":"length"}]',
        }
        self._usage_tail = b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}\n\n'
        self.prompt_tokens = prompt_tokens
        self.continuous_usage = continuous_usage
        self.call: ToolCall | None = None
        """Set (before token 1) when the answer is a function call."""
        self.json_text: JsonText | None = None
        """Set (before token 1) when the answer is a JSON object (response_format json_object or json_schema)."""
        self.usage_style = usage_style
        """The usage chunk's shape: vllm, sglang or trtllm (sim/dialects.py)."""

    def _close(self, completion_tokens: int) -> bytes:
        """End of a choices chunk: optional cumulative usage, then the event terminator."""
        if self.continuous_usage:
            p = self.prompt_tokens
            return self._usage_tail % (p, p + completion_tokens, completion_tokens)
        return b"}\n\n"

    def opening(self) -> bytes:
        """Nothing: a chat stream's first bytes come with its first token."""
        return b""

    def role(self) -> bytes:
        """The role-only first chunk (content "" is not a token)."""
        body = (self._head + b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
                b'"logprobs":null,"finish_reason":null}]' + self._close(0))
        return http_chunk(body)

    def token(self, generated: int, reasoning_tokens: int, finish_reason: str | None) -> bytes:
        """HTTP chunk for the generated-th token (1-based); reasoning first, then content (or the call)."""
        if generated <= reasoning_tokens:
            start, word = self._reasoning, WORD_BYTES[(generated - 1) % _N_WORDS]
        elif self.call is None:
            k = generated - reasoning_tokens
            start = self._content
            word = WORD_BYTES[(k - 1) % _N_WORDS] if self.json_text is None else self.json_text.escaped(k)
        else:
            return self._call_token(generated, generated - reasoning_tokens, finish_reason)
        body = start + word + self._tail[finish_reason] + self._close(generated)
        return b"%x\r\n%b\r\n" % (len(body), body)

    def tokens(self, first: int, last: int, reasoning_tokens: int, finish_reason: str | None) -> bytes:
        """Tokens ``first``..``last`` in as few events as vLLM's --stream-interval sends them: one per channel they
        span (the reasoning's words in one delta, the answer's in the next); a function call's pieces one by one."""
        if first == last or self.call is not None and last > reasoning_tokens:
            return b"".join(self.token(g, reasoning_tokens, finish_reason if g == last else None)
                            for g in range(first, last + 1))
        out = b""
        if first <= reasoning_tokens:
            end = min(last, reasoning_tokens)
            words = b"".join(WORD_BYTES[(g - 1) % _N_WORDS] for g in range(first, end + 1))
            body = self._reasoning + words + self._tail[finish_reason if end == last else None] + self._close(end)
            out += b"%x\r\n%b\r\n" % (len(body), body)
        if last > reasoning_tokens:
            start_k, end_k = max(first, reasoning_tokens + 1) - reasoning_tokens, last - reasoning_tokens
            words = b"".join(WORD_BYTES[(k - 1) % _N_WORDS] if self.json_text is None else self.json_text.escaped(k)
                             for k in range(start_k, end_k + 1))
            body = self._content + words + self._tail[finish_reason] + self._close(last)
            out += b"%x\r\n%b\r\n" % (len(body), body)
        return out

    def _call_token(self, generated: int, k: int, finish_reason: str | None) -> bytes:
        """An argument piece of the call; the first names the function, as vLLM's harmony parser sends it."""
        call = self.call
        assert call is not None
        piece = b'"%b"' % call.escaped(k)
        if k == 1:
            body = (self._head + b'"choices":[{"index":0,"delta":{"tool_calls":[{"id":%b,"type":"function","index":0,'
                    b'"function":{"name":%b,"arguments":%b}}]}' % (orjson.dumps(call.call_id), orjson.dumps(call.name), piece))
        else:
            body = self._call_next + piece + b"}}]}"
        finish = b"null" if finish_reason is None else b'"tool_calls"' if finish_reason == "stop" else b'"%b"' % finish_reason.encode()
        body += b',"logprobs":null,"finish_reason":%b}]' % finish + self._close(generated)
        return http_chunk(body)

    def closing(self, completion_tokens: int, reasoning_tokens: int, cached_tokens: int, finish_reason: str,
                include_usage: bool, terminal: bool = True) -> bytes:
        """After the last token: the usage-only chunk (when asked for), ``data: [DONE]`` (unless ``terminal`` is
        off, a fault), the end of the body."""
        usage = self.usage(completion_tokens, reasoning_tokens, cached_tokens) if include_usage else b""
        return usage + (DONE_AND_END if terminal else END)

    def usage(self, completion_tokens: int, reasoning_tokens: int, cached_tokens: int) -> bytes:
        """The usage-only chunk sent after the last token when include_usage is set (prompt_tokens_details as vLLM
        sends it with --enable-prompt-tokens-details); SGLang's and trtllm-serve's as sim/dialects.py says."""
        p = self.prompt_tokens
        counts = (p, p + completion_tokens, completion_tokens)
        if self.usage_style == "sglang":  # reasoning_tokens on top; its details only when some; no cache report
            details = b'{"reasoning_tokens":%d}' % reasoning_tokens if reasoning_tokens else b"null"
            usage = (b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":null,'
                     b'"reasoning_tokens":%d,"completion_tokens_details":%b}' % (*counts, reasoning_tokens, details))
        elif self.usage_style == "trtllm":  # the three counts only
            usage = b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}' % counts
        else:
            usage = (b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,'
                     b'"completion_tokens_details":{"reasoning_tokens":%d},"prompt_tokens_details":{"cached_tokens":%d}}'
                     % (*counts, reasoning_tokens, cached_tokens))
        return http_chunk(self._head + b'"choices":[],"usage":%b}\n\n' % usage)

    def error_event(self, message: str) -> bytes:
        """An error object inside the stream, then ``data: [DONE]`` and the end, as vLLM sends a failed generation."""
        return stream_error_event(message) + DONE_AND_END


def stream_error_event(message: str) -> bytes:
    """An error object inside a stream, as vLLM sends it when generation fails after the headers."""
    return http_chunk(b"data: %b\n\n" % orjson.dumps(
        {"error": {"message": message, "type": "InternalServerError", "param": None, "code": 500}}))


def usage_dict(prompt_tokens: int, completion_tokens: int, reasoning_tokens: int, cached_tokens: int) -> dict[str, Any]:
    """The final usage object, vLLM field order."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def completion_body(chat_id: str, created: int, model: str, prompt_tokens: int, cached_tokens: int,
                    reasoning_tokens: int, answer_tokens: int, finish_reason: str, call: ToolCall | None = None,
                    json_text: JsonText | None = None) -> bytes:
    """Full non-stream chat.completion JSON body (the answer a function call when ``call`` is given, a JSON object
    when ``json_text`` is)."""
    reasoning = tokens_text(reasoning_tokens) if reasoning_tokens else None
    content = answer_text(answer_tokens, json_text) if answer_tokens and call is None else None
    tool_calls = [] if call is None else [{"id": call.call_id, "type": "function",
                                           "function": {"name": call.name, "arguments": call.arguments(answer_tokens)}}]
    if call is not None and finish_reason == "stop":
        finish_reason = "tool_calls"
    return orjson.dumps({
        "id": chat_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "reasoning": reasoning,
                        "reasoning_content": reasoning, "tool_calls": tool_calls},
            "logprobs": None,
            "finish_reason": finish_reason,
        }],
        "usage": usage_dict(prompt_tokens, reasoning_tokens + answer_tokens, reasoning_tokens, cached_tokens),
    })


def answer_text(answer_tokens: int, json_text: JsonText | None) -> str:
    """The text answer after ``answer_tokens``: words, or the JSON object's pieces."""
    return tokens_text(answer_tokens) if json_text is None else json_text.text(answer_tokens)


def error_body(status: int, message: str) -> bytes:
    """vLLM's error JSON for a status code."""
    kind = {400: "BadRequestError", 404: "NotFoundError", 405: "MethodNotAllowedError",
            413: "BadRequestError", 500: "InternalServerError",
            501: "NotImplementedError"}.get(status, "BadRequestError")
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": status}})
