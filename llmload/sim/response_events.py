"""Byte templates of a Responses API stream (POST /v1/responses) as vLLM 0.32 writes one for gpt-oss.

Read from vLLM 0.32's vllm/entrypoints/openai/responses/ (serving.py, streaming_events.py, api_router.py): each
event is ``event: <type>`` then ``data: <json>`` (pydantic's field order), in its own HTTP chunk, with a
``sequence_number`` counting from 0. response.created and response.in_progress go out before any token; an
output item opens with output_item.added and content_part.added next to its first delta (reasoning_text, then
output_text, or function_call_arguments for a call) and closes with its done events next to the following
item's first delta; the last token's write ends with the answer's done events and response.completed, whose
response holds the output, the status (``incomplete`` when max_output_tokens cut it) and the usage. No
``data: [DONE]`` follows. The Responses API's error event (``{"type": "error", ...}``) is what a broken stream
carries here (vLLM 0.32's own error path fails to build one).
"""

from __future__ import annotations

from typing import Any

import orjson

from .chunks import END, JsonText, ToolCall, answer_text, http_chunk
from .tokens import WORD_BYTES, tokens_text

__all__ = ["ResponsesEncoder", "in_progress_response"]

_N_WORDS = len(WORD_BYTES)


def in_progress_response(response_id: str, created: int, model: str, body: dict[str, Any]) -> dict[str, Any]:
    """The response object response.created carries (vLLM's ResponsesResponse.from_request, in its field order)."""
    reasoning = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else None
    return {
        "id": response_id, "created_at": created, "incomplete_details": None, "instructions": body.get("instructions"),
        "metadata": None, "model": model, "object": "response", "output": [], "parallel_tool_calls": True,
        "temperature": body.get("temperature", 1.0), "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [], "top_p": body.get("top_p", 1.0), "background": False,
        "max_output_tokens": body.get("max_output_tokens"), "max_tool_calls": None, "previous_response_id": None,
        "prompt": None, "reasoning": None if reasoning is None else {"effort": reasoning.get("effort"), "summary": None},
        "service_tier": "auto", "status": "in_progress", "text": body.get("text"), "top_logprobs": None,
        "truncation": "disabled", "usage": None, "user": None,
    }


def _event(kind: bytes, data: bytes) -> bytes:
    return http_chunk(b"event: %b\ndata: %b\n\n" % (kind, data))


class ResponsesEncoder:
    """Pre-built pieces of one streamed Responses API answer, written as chunks.StreamEncoder's are (see sim/responses.py)."""

    __slots__ = ("_response", "prompt_tokens", "_seq", "_rs_id", "_msg_id", "_fc_id", "call", "json_text",
                 "_reasoning_delta", "_text_delta", "_call_delta")

    def __init__(self, response: dict[str, Any], prompt_tokens: int, item_suffix: str) -> None:
        """``response`` is in_progress_response's object; ``item_suffix`` makes the output items' ids."""
        self._response = response
        self.prompt_tokens = prompt_tokens
        self._seq = 0
        self._rs_id = f"rs_{item_suffix}"
        self._msg_id = f"msg_{item_suffix}"
        self._fc_id = f"fc_{item_suffix}"
        self.call: ToolCall | None = None
        """Set (before token 1) when the answer is a function call."""
        self.json_text: JsonText | None = None
        """Set (before token 1) when the answer is a JSON object (text.format json_object or json_schema)."""
        self._reasoning_delta = self._delta_template(b"response.reasoning_text.delta", self._rs_id, 0)
        self._text_delta: tuple[bytes, bytes] | None = None  # the message's output_index is known at its first token
        self._call_delta: tuple[bytes, bytes] | None = None

    @staticmethod
    def _delta_template(kind: bytes, item_id: str, index: int) -> tuple[bytes, bytes]:
        """A delta event's bytes before and after its delta text and around its sequence number."""
        if kind == b"response.function_call_arguments.delta":
            before = b'{"delta":'
            after = b',"item_id":"%b","output_index":%d,"sequence_number":' % (item_id.encode(), index)
        else:
            before = b'{"content_index":0,"delta":"'
            logprobs = b'"logprobs":[],' if kind == b"response.output_text.delta" else b""
            after = b'","item_id":"%b",%b"output_index":%d,"sequence_number":' % (item_id.encode(), logprobs, index)
        return b"event: %b\ndata: %b" % (kind, before), after + b'%d,"type":"' + kind + b'"}\n\n'

    def _next_seq(self) -> int:
        seq = self._seq
        self._seq += 1
        return seq

    def _typed(self, kind: str, fields: dict[str, Any]) -> bytes:
        """A whole (non-delta) event with its sequence number, fields in vLLM's order then ``type``."""
        return _event(kind.encode(), orjson.dumps({**fields, "sequence_number": self._next_seq(), "type": kind}))

    def _item_event(self, kind: str, item: dict[str, Any], index: int) -> bytes:
        return _event(kind.encode(), orjson.dumps({"item": item, "output_index": index,
                                                   "sequence_number": self._next_seq(), "type": kind}))

    def opening(self) -> bytes:
        """response.created and response.in_progress, sent with the headers."""
        return (self._typed("response.created", {"response": self._response})
                + self._typed("response.in_progress", {"response": self._response}))

    def role(self) -> bytes:
        """Nothing: an output item opens with its first token."""
        return b""

    def tokens(self, first: int, last: int, reasoning_tokens: int, finish_reason: str | None) -> bytes:
        """Tokens ``first``..``last`` written together (--stream-interval): each its own events, as the Responses API
        keeps one delta per token here."""
        return b"".join(self.token(g, reasoning_tokens, finish_reason if g == last else None) for g in range(first, last + 1))

    def token(self, generated: int, reasoning_tokens: int, finish_reason: str | None) -> bytes:
        """The events of the generated-th token (1-based): its delta, with the item lifecycle events around it."""
        if generated <= reasoning_tokens:
            before = self._open_reasoning() if generated == 1 else b""
            start, end = self._reasoning_delta
            body = start + WORD_BYTES[(generated - 1) % _N_WORDS] + end % self._next_seq()
            return before + b"%x\r\n%b\r\n" % (len(body), body)
        k = generated - reasoning_tokens
        before = b""
        if k == 1:
            if reasoning_tokens:
                before = self._close_reasoning(self._reasoning_item(reasoning_tokens))
            before += self._open_answer(1 if reasoning_tokens else 0)
        if self.call is None:
            assert self._text_delta is not None
            start, end = self._text_delta
            word = WORD_BYTES[(k - 1) % _N_WORDS] if self.json_text is None else self.json_text.escaped(k)
            body = start + word + end % self._next_seq()
        else:
            assert self._call_delta is not None
            start, end = self._call_delta
            body = start + orjson.dumps(self.call.piece(k)) + end % self._next_seq()
        return before + b"%x\r\n%b\r\n" % (len(body), body)

    def _reasoning_item(self, reasoning_tokens: int | None) -> dict[str, Any]:
        content = None if reasoning_tokens is None else [{"text": tokens_text(reasoning_tokens), "type": "reasoning_text"}]
        return {"id": self._rs_id, "summary": [], "type": "reasoning", "content": content, "encrypted_content": None,
                "status": "in_progress" if reasoning_tokens is None else "completed"}

    def _open_reasoning(self) -> bytes:
        return (self._item_event("response.output_item.added", self._reasoning_item(None), 0)
                + self._typed("response.content_part.added", {"content_index": 0, "item_id": self._rs_id,
                                                              "output_index": 0,
                                                              "part": {"text": "", "type": "reasoning_text"}}))

    def _close_reasoning(self, item: dict[str, Any]) -> bytes:
        """The done events of the complete reasoning ``item`` (its text built once, for them and the response)."""
        part = item["content"][0]
        where = {"content_index": 0, "item_id": self._rs_id, "output_index": 0}
        return (self._typed("response.reasoning_text.done", {**where, "text": part["text"]})
                + self._typed("response.content_part.done", {**where, "part": part})
                + self._item_event("response.output_item.done", item, 0))

    def _answer_item(self, answer_tokens: int | None) -> dict[str, Any]:
        """The message (or function_call) item: in progress (None), or complete after ``answer_tokens``."""
        status = "in_progress" if answer_tokens is None else "completed"
        call = self.call
        if call is not None:
            arguments = "" if answer_tokens is None else call.arguments(answer_tokens)
            return {"arguments": arguments, "call_id": call.call_id, "name": call.name, "type": "function_call",
                    "id": self._fc_id, "async": None, "caller": None, "namespace": None, "status": status}
        content = [] if answer_tokens is None else [{"annotations": [], "text": answer_text(answer_tokens, self.json_text),
                                                     "type": "output_text",
                                                     "logprobs": None}]
        return {"id": self._msg_id, "content": content, "role": "assistant", "status": status, "type": "message",
                "phase": None}

    def _open_answer(self, index: int) -> bytes:
        added = self._item_event("response.output_item.added", self._answer_item(None), index)
        if self.call is not None:
            self._call_delta = self._delta_template(b"response.function_call_arguments.delta", self._fc_id, index)
            return added
        self._text_delta = self._delta_template(b"response.output_text.delta", self._msg_id, index)
        part = {"annotations": [], "text": "", "type": "output_text", "logprobs": []}
        return added + self._typed("response.content_part.added", {"content_index": 0, "item_id": self._msg_id,
                                                                   "output_index": index, "part": part})

    def _close_answer(self, item: dict[str, Any], index: int) -> bytes:
        """The done events of the complete answer ``item`` (its text built once, for them and the response)."""
        if self.call is not None:
            done = self._typed("response.function_call_arguments.done", {
                "arguments": item["arguments"], "item_id": self._fc_id, "output_index": index, "name": self.call.name})
        else:
            part = item["content"][0]
            where = {"content_index": 0, "item_id": self._msg_id}
            done = (self._typed("response.output_text.done", {**where, "logprobs": [], "output_index": index,
                                                               "text": part["text"]})
                    + self._typed("response.content_part.done", {**where, "output_index": index, "part": part}))
        return done + self._item_event("response.output_item.done", item, index)

    def closing(self, completion_tokens: int, reasoning_tokens: int, cached_tokens: int, finish_reason: str,
                include_usage: bool, terminal: bool = True) -> bytes:
        """The last item's done events, then response.completed (unless ``terminal`` is off, a fault) and the end
        of the body; the Responses API always carries its usage, whatever ``include_usage`` says."""
        answer_tokens = completion_tokens - reasoning_tokens
        output = [self._reasoning_item(reasoning_tokens)] if reasoning_tokens else []
        if answer_tokens:
            output.append(self._answer_item(answer_tokens))
            closing = self._close_answer(output[-1], len(output) - 1)
        else:
            closing = self._close_reasoning(output[0]) if reasoning_tokens else b""
        if not terminal:
            return closing + END
        p = self.prompt_tokens
        incomplete = finish_reason == "length"
        usage = {"input_tokens": p,
                 "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0,
                                          "input_tokens_per_turn": [p], "cached_tokens_per_turn": [cached_tokens]},
                 "output_tokens": completion_tokens,
                 "output_tokens_details": {"reasoning_tokens": reasoning_tokens, "tool_output_tokens": 0,
                                           "output_tokens_per_turn": [completion_tokens],
                                           "tool_output_tokens_per_turn": [0]},
                 "total_tokens": p + completion_tokens}
        response = {**self._response, "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
                    "output": output, "status": "incomplete" if incomplete else "completed", "usage": usage}
        return closing + self._typed("response.completed", {"response": response}) + END

    def error_event(self, message: str) -> bytes:
        """The Responses API's error event, then the end of the body (no response.completed)."""
        return self._typed("error", {"code": "server_error", "message": message, "param": None}) + END

