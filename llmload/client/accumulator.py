"""Turns the chunks of one streamed chat completion into a RequestRecord.

Both clients feed it: the raw client with the parsed JSON of each SSE event, the openai SDK client
with each chunk as a dict. This is the only place where a chunk's meaning is decided: which
channel a token is on, what counts as a token-bearing event, which usage figure wins.
"""

from __future__ import annotations

from typing import Any

from llmload.results.records import RequestRecord, tpot_s

__all__ = ["StreamAccumulator", "AnswerAccumulator"]


class StreamAccumulator:
    """Collects the arrival times and contents of one request's chunks."""

    __slots__ = (
        "request_id", "prompt_id", "start_unix_s", "start_monotonic_s", "_token_times_s",
        "_first_content_s", "_reasoning_events", "_reasoning_usage_tokens",
        "_last_completion_tokens", "_usage", "_finish_reason", "_done_s", "_stream_error", "warmup",
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
            answered=self._first_content_s is not None,
            error=error,
            error_detail=detail,
            warmup=self.warmup,
            **self.record_fields,
            arrival_stamps=self.arrival_stamps,
        )


class AnswerAccumulator(StreamAccumulator):
    """A StreamAccumulator that also keeps the answer's text (``delta.content``) for a conversation's history.

    Only conversations (TURNS above 1) use it: single requests pay nothing for text they never send back.
    """

    __slots__ = ("answer",)

    def __init__(self, request_id: str, prompt_id: str, start_unix_s: float, start_monotonic_s: float,
                 warmup: bool = False, record_fields: dict[str, Any] | None = None, *, answer: list[str]) -> None:
        """``answer`` gets each piece of the answer's text as it arrives."""
        super().__init__(request_id, prompt_id, start_unix_s, start_monotonic_s, warmup, record_fields)
        self.answer = answer

    def on_chunk(self, arrived_s: float, chunk: dict[str, Any]) -> None:
        StreamAccumulator.on_chunk(self, arrived_s, chunk)
        choices = chunk.get("choices")
        if choices:
            content = (choices[0].get("delta") or {}).get("content")
            if content:
                self.answer.append(content)
