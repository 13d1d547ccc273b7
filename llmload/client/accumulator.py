"""Turns the events of one streamed request into a RequestRecord: a chat completion's chunks, or a Responses stream's.

Both clients feed it: the raw client with the parsed JSON of each SSE event, the openai SDK client
with each chunk as a dict. This is the only place where a chunk's meaning is decided: which
channel a token is on, what counts as a token-bearing event, which usage figure wins, when the
stream ended (chat: ``data: [DONE]``; Responses: its terminal event).

Reasoning comes in ``delta.reasoning`` (vLLM 0.32, trtllm-serve's gpt-oss stream) or ``delta.reasoning_content``
(older vLLM, SGLang); its count in ``usage.completion_tokens_details.reasoning_tokens`` (vLLM, SGLang 0.5.23 when
some) or SGLang's top-level ``usage.reasoning_tokens``; trtllm-serve gives none, so the stream's events count it.
"""

from __future__ import annotations

from typing import Any

from llmload.client.toolcalls import ToolCall, ToolUse, invalid_call
from llmload.results.records import RequestRecord, tpot_s

__all__ = ["StreamAccumulator", "ResponsesAccumulator", "AnswerAccumulator", "ResponsesAnswerAccumulator",
           "ToolCallAccumulator", "ResponsesToolCallAccumulator"]


class StreamAccumulator:
    """Collects the arrival times and contents of one chat completion's chunks."""

    end_mark = "data: [DONE]"
    """What ends a complete stream, as a failure's detail names it when it never came."""

    __slots__ = (
        "request_id", "prompt_id", "start_unix_s", "start_monotonic_s", "_token_times_s",
        "_first_content_s", "_reasoning_events", "_reasoning_usage_tokens",
        "_last_completion_tokens", "_usage", "_finish_reason", "_done_s", "_stream_error", "_called", "warmup",
        "record_fields",
        "arrival_stamps",
    )

    def __init__(self, request_id: str, prompt_id: str, start_unix_s: float, start_monotonic_s: float,
                 warmup: bool = False, record_fields: dict[str, Any] | None = None) -> None:
        self.warmup = warmup
        self.record_fields = record_fields or {}  # RequestRecord fields known before sending (effort, schedule)
        self.arrival_stamps = "user"  # the client says "kernel" or "mixed" when it used kernel receive stamps
        self.request_id = request_id
        self.prompt_id = prompt_id
        self.start_unix_s = start_unix_s
        self.start_monotonic_s = start_monotonic_s
        self._token_times_s: list[float] = []
        self._first_content_s: float | None = None
        self._reasoning_events = 0
        self._reasoning_usage_tokens = 0  # reasoning tokens counted from continuous usage stats
        self._last_completion_tokens = 0
        self._usage: dict[str, Any] | None = None
        self._finish_reason: str | None = None
        self._done_s: float | None = None
        self._stream_error: str | None = None
        self._called = False  # a function call streamed: the round's answer, though not visible text

    def on_chunk(self, arrived_s: float, chunk: dict[str, Any]) -> None:
        """One ``chat.completion.chunk`` (or error object) that arrived at monotonic ``arrived_s``."""
        usage = chunk.get("usage")
        choices = chunk.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self._token_times_s.append(arrived_s)
                if self._first_content_s is None:
                    self._first_content_s = arrived_s
            elif delta.get("reasoning") or delta.get("reasoning_content"):
                self._token_times_s.append(arrived_s)
                self._reasoning_events += 1
                if usage:
                    self._reasoning_usage_tokens += usage.get("completion_tokens", 0) - self._last_completion_tokens
            elif delta.get("tool_calls"):  # a function call's piece: output, timed like text
                self._token_times_s.append(arrived_s)
                self._called = True
            finish_reason = choice.get("finish_reason")
            if finish_reason:
                self._finish_reason = finish_reason
        if usage:
            self._usage = usage
            self._last_completion_tokens = usage.get("completion_tokens", self._last_completion_tokens)
        if "error" in chunk:
            error = chunk["error"]
            self._stream_error = str(error.get("message", error) if isinstance(error, dict) else error)

    def on_done(self, arrived_s: float) -> None:
        """The ``[DONE]`` sentinel arrived."""
        self._done_s = arrived_s

    @property
    def done_s(self) -> float | None:
        """When ``[DONE]`` arrived, if it did."""
        return self._done_s

    @property
    def stream_error(self) -> str | None:
        """The message of an error object the stream carried, if any."""
        return self._stream_error

    def finish(self, end_s: float, error: str | None = None, detail: str | None = None) -> RequestRecord:
        """The record, ending at monotonic ``end_s``; ``error`` is a category (see RequestRecord)."""
        if error is None and self._stream_error is not None:
            error, detail = "stream_error", self._stream_error
        start = self.start_monotonic_s
        times = self._token_times_s
        ttft = times[0] - start if times else None
        e2e = end_s - start
        usage = self._usage or {}
        completion = usage.get("completion_tokens")
        token_source = "server"
        if completion is None:
            completion, token_source = len(times), "stream"
        details = usage.get("completion_tokens_details") or {}
        reasoning = details.get("reasoning_tokens")
        reasoning_source = "server"
        if reasoning is None and isinstance(usage.get("reasoning_tokens"), int) and (
                usage["reasoning_tokens"] > 0 or not self._reasoning_events):
            # SGLang's own place (its UsageInfo); before sgl-project/sglang PR 15562 (Dec 2025) it said 0 whatever came
            reasoning = usage["reasoning_tokens"]
        if reasoning is None:
            if self._reasoning_usage_tokens:
                reasoning, reasoning_source = self._reasoning_usage_tokens, "stream"
            elif self._reasoning_events:
                reasoning, reasoning_source = self._reasoning_events, "stream"
            else:
                reasoning_source = "none"
        return RequestRecord(
            request_id=self.request_id,
            prompt_id=self.prompt_id,
            start_unix_s=self.start_unix_s,
            start_monotonic_s=start,
            e2e_s=e2e,
            ttft_s=ttft,
            ttfvt_s=self._first_content_s - start if self._first_content_s is not None else None,
            tpot_s=tpot_s(e2e, ttft, completion, len(times)),
            itl_s=[b - a for a, b in zip(times, times[1:])],
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=completion,
            reasoning_tokens=reasoning,
            cached_tokens=(usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
            token_source=token_source,
            reasoning_source=reasoning_source,
            finish_reason=self._finish_reason,
            answered=self._first_content_s is not None or self._called,
            error=error,
            error_detail=detail,
            warmup=self.warmup,
            **self.record_fields,
            arrival_stamps=self.arrival_stamps,
        )


_ANSWER, _REASONING, _CALL = "answer", "reasoning", "call"
_DELTAS = {
    "response.output_text.delta": _ANSWER,
    "response.reasoning_text.delta": _REASONING,
    "response.function_call_arguments.delta": _CALL,
    "response.refusal.delta": _ANSWER,
}
"""The Responses events that carry output tokens, by channel (vLLM 0.32's serving and the openai SDK's stream types)."""
_TERMINAL = frozenset(("response.completed", "response.incomplete", "response.failed"))
_FINISH_BY_INCOMPLETE_REASON = {"max_output_tokens": "length"}


class ResponsesAccumulator(StreamAccumulator):
    """Collects one streamed ``/v1/responses`` request (the Responses API) into the same record as a chat completion.

    Token events are the delta events of _DELTAS; the stream ends at its terminal event (vLLM 0.32 ends every
    stream with response.completed, whose response's status says completed or incomplete; OpenAI's API sends
    response.incomplete and response.failed too). The finish state is put in chat's words, so records of both APIs
    read alike: completed is ``stop`` (``tool_calls`` when it called a function), incomplete for
    max_output_tokens is ``length``. Usage comes once, in the terminal event's response.
    """

    __slots__ = ("output",)
    end_mark = "a response.completed event"

    def __init__(self, request_id: str, prompt_id: str, start_unix_s: float, start_monotonic_s: float,
                 warmup: bool = False, record_fields: dict[str, Any] | None = None) -> None:
        super().__init__(request_id, prompt_id, start_unix_s, start_monotonic_s, warmup, record_fields)
        self.output: list[dict[str, Any]] = []
        """The terminal event's output items (reasoning, message, function_call), as the server summed them up."""

    def on_chunk(self, arrived_s: float, chunk: dict[str, Any]) -> None:
        """One Responses stream event (or error object) that arrived at monotonic ``arrived_s``."""
        kind = chunk.get("type")
        channel = _DELTAS.get(kind)  # type: ignore[arg-type]
        if channel is not None:
            if chunk.get("delta"):
                self._token_times_s.append(arrived_s)
                if channel is _ANSWER:
                    if self._first_content_s is None:
                        self._first_content_s = arrived_s
                elif channel is _REASONING:
                    self._reasoning_events += 1
                else:
                    self._called = True
        elif kind in _TERMINAL:
            self._on_terminal(arrived_s, kind, chunk.get("response") or {})
        elif kind == "error":  # the Responses API's error event: {"type": "error", "code", "message", ...}
            self._stream_error = str(chunk.get("message") or chunk.get("code") or "error event")
        elif "error" in chunk:  # a chat-style error object, as vLLM writes one for a failed generation
            error = chunk["error"]
            self._stream_error = str(error.get("message", error) if isinstance(error, dict) else error)

    def _on_terminal(self, arrived_s: float, kind: str, response: dict[str, Any]) -> None:
        self._done_s = arrived_s
        output = response.get("output")
        self.output = output if isinstance(output, list) else []
        status = response.get("status")
        if kind == "response.failed" or status == "failed":
            error = response.get("error") or {}
            self._stream_error = str(error.get("message") if isinstance(error, dict) else error) or "response.failed"
        elif status == "incomplete" or kind == "response.incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            self._finish_reason = _FINISH_BY_INCOMPLETE_REASON.get(reason, reason or "incomplete")
        elif status:
            called = any(item.get("type") == "function_call" for item in self.output if isinstance(item, dict))
            self._finish_reason = "tool_calls" if called else "stop" if status == "completed" else status
        usage = response.get("usage")
        if isinstance(usage, dict):  # put in chat's words, so finish() reads both alike
            self._usage = {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens"),
                           "completion_tokens_details": usage.get("output_tokens_details"),
                           "prompt_tokens_details": usage.get("input_tokens_details")}


class AnswerAccumulator(StreamAccumulator):
    """A StreamAccumulator that also keeps the answer's text (``delta.content``) for a conversation's history.

    Only conversations (TURNS above 1) use it: single requests pay nothing for text they never send back.
    """

    __slots__ = ("answer",)
    answer: list[str]
    """Set by the caller: gets each piece of the answer's text as it arrives."""

    def on_chunk(self, arrived_s: float, chunk: dict[str, Any]) -> None:
        StreamAccumulator.on_chunk(self, arrived_s, chunk)
        choices = chunk.get("choices")
        if choices:
            content = (choices[0].get("delta") or {}).get("content")
            if content:
                self.answer.append(content)


class ResponsesAnswerAccumulator(ResponsesAccumulator):
    """A ResponsesAccumulator that also keeps the answer's text (output_text deltas), as AnswerAccumulator does."""

    __slots__ = ("answer",)
    answer: list[str]

    def on_chunk(self, arrived_s: float, chunk: dict[str, Any]) -> None:
        ResponsesAccumulator.on_chunk(self, arrived_s, chunk)
        if chunk.get("type") == "response.output_text.delta" and chunk.get("delta"):
            self.answer.append(chunk["delta"])

def _checked_calls(acc: StreamAccumulator, tool_use: ToolUse, calls: list[ToolCall], error: str | None,
                   detail: str | None) -> tuple[str | None, str | None]:
    """Hand the answer's calls to ``tool_use``; the record's error and detail, ``tool_call_invalid`` for an answer that
    ended in calls (finish tool_calls: one cut by the output limit ends in ``length``) of which one is invalid."""
    tool_use.calls[:] = calls
    if error is None and acc.stream_error is None and acc._finish_reason == "tool_calls":
        why = invalid_call(calls, tool_use.offered)
        if why is not None:
            return "tool_call_invalid", why
    return error, detail


class ToolCallAccumulator(AnswerAccumulator):
    """An AnswerAccumulator that also assembles the answer's function calls from ``delta.tool_calls`` (TOOLS).

    Only runs that offer tools use it: the others pay nothing for calls they never get.
    """

    __slots__ = ("tool_use", "_call_parts")
    tool_use: ToolUse
    """Set by the caller: what was offered, and where the calls go when the stream ends."""

    def __init__(self, request_id: str, prompt_id: str, start_unix_s: float, start_monotonic_s: float,
                 warmup: bool = False, record_fields: dict[str, Any] | None = None) -> None:
        super().__init__(request_id, prompt_id, start_unix_s, start_monotonic_s, warmup, record_fields)
        self._call_parts: dict[int, list[Any]] = {}  # index: [id, name, argument pieces]

    def on_chunk(self, arrived_s: float, chunk: dict[str, Any]) -> None:
        AnswerAccumulator.on_chunk(self, arrived_s, chunk)
        choices = chunk.get("choices")
        if choices:
            for piece in (choices[0].get("delta") or {}).get("tool_calls") or ():
                parts = self._call_parts.setdefault(piece.get("index", 0), ["", "", []])
                function = piece.get("function") or {}
                parts[0] = parts[0] or piece.get("id") or ""  # the id and name come whole, in the call's first piece
                parts[1] = parts[1] or function.get("name") or ""
                if function.get("arguments"):
                    parts[2].append(function["arguments"])

    def finish(self, end_s: float, error: str | None = None, detail: str | None = None) -> RequestRecord:
        calls = [ToolCall(call_id, name, "".join(arguments))
                 for _, (call_id, name, arguments) in sorted(self._call_parts.items())]
        return super().finish(end_s, *_checked_calls(self, self.tool_use, calls, error, detail))


class ResponsesToolCallAccumulator(ResponsesAnswerAccumulator):
    """A ResponsesAnswerAccumulator that also keeps the answer's function_call items, from its terminal event."""

    __slots__ = ("tool_use",)
    tool_use: ToolUse

    def finish(self, end_s: float, error: str | None = None, detail: str | None = None) -> RequestRecord:
        calls = [ToolCall(str(item.get("call_id", "")), str(item.get("name", "")), str(item.get("arguments", "")), item)
                 for item in self.output if isinstance(item, dict) and item.get("type") == "function_call"]
        return super().finish(end_s, *_checked_calls(self, self.tool_use, calls, error, detail))
