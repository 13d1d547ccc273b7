"""The per-request record: what one streamed chat completion measured, as one JSON line.

Times are seconds. ``start_monotonic_s`` is ``time.monotonic()`` (CLOCK_MONOTONIC, shared by every
process on the machine, so the built-in target's send times can be compared with it); every other
``*_s`` duration is relative to the request's start.

samples.jsonl's versions (each line's ``schema_version``; a reader reads every version up to its own, what an
older line lacks taking its default, and names a newer one in one line):

    1  2026-12-02: the first records. warmup, effort, scheduled_monotonic_s, slot_wait_s and arrival_stamps
       were added later without a new version: a version-1 line may lack them.
    2  2026-12-04: the same fields, every one always written; tpot_s is None when the tokens came in fewer
       than two events (a version-1 line may hold about 0 there).
    3  2026-12-04: cached_tokens (the server's usage.prompt_tokens_details.cached_tokens), conversation_id and turn
       (TURNS above 1).
    4  2026-12-04: task_id and round (TOOL_ROUNDS above 1: each round of a task, its function calls handed back);
       error tool_call_invalid.
    5  2026-12-04: answer_json, answer_valid and answer_invalid (RESPONSE_FORMAT: the answer judged after its request).
    6  2026-12-06: declared_cached_tokens (what the workload declares shareable in the server's prefix cache) and
       prompt_reused (the prompt was sent before in the run).

tests/test_versions.py pins each version's fields: a change of fields needs a new version and its line here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import orjson

from llmload.results.decode import check_schema_version
from llmload.results.jsonl import iter_json_lines

__all__ = ["RECORD_SCHEMA_VERSION", "RequestRecord", "tpot_s", "record_rows", "read_records", "run_span_s"]

RECORD_SCHEMA_VERSION = 6


def tpot_s(e2e_s: float, ttft_s: float | None, output_tokens: int | None, token_events: int) -> float | None:
    """Time per output token after the first, as vLLM defines it: (E2E - TTFT) / (tokens - 1).

    None when the tokens came in fewer than two events: a server that sends an answer whole leaves
    nothing to time between its tokens (the formula would give about 0).
    """
    if ttft_s is None or output_tokens is None or output_tokens < 2 or token_events < 2:
        return None
    return (e2e_s - ttft_s) / (output_tokens - 1)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request, as measured by the client."""

    request_id: str
    prompt_id: str
    start_unix_s: float
    """Wall-clock start, for people and for joining with server logs."""
    start_monotonic_s: float
    """Stamped by measure_request before the body is JSON-encoded and before a connection is opened
    (a new one) or reused: every duration below includes encoding and, on a new connection, connect."""
    e2e_s: float
    """Start to the arrival of ``data: [DONE]`` (raw client) or the SDK's end of the stream (openai
    client); vLLM's bench ends its latency at the last chunk with choices, before the usage chunk."""
    ttft_s: float | None
    """Start to the arrival of the first event with a token on any channel (reasoning or answer); a
    role-only chunk is not a token. vLLM's bench stops at the first chunk with choices, role-only included."""
    ttfvt_s: float | None
    """Start to the first visible (final-answer, ``delta.content``) token."""
    tpot_s: float | None
    """(e2e - ttft) / (completion_tokens - 1): vLLM's formula, over our E2E (so it includes the wait
    for the usage chunk and [DONE]); None when the tokens came in one event (see ``tpot_s``)."""
    itl_s: list[float] = field(default_factory=list)
    """Gaps between consecutive token-bearing events."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    """Prompt tokens the server found in its prefix cache (usage.prompt_tokens_details.cached_tokens; vLLM sends it
    with --enable-prompt-tokens-details); None when it does not say."""
    declared_cached_tokens: int | None = None
    """Prompt tokens the workload declares the server may find cached: the chat frame and the set's shared prefixes on
    a first turn (promptsets/sharing.py), the history on a later turn or round; None in older files."""
    prompt_reused: bool = False
    """Its prompt was sent before in this run (CACHE=cold: with a nonce in front, sharing only its frame)."""
    token_source: str = "server"
    """Where completion_tokens came from: "server" (usage) or "stream" (counted events)."""
    reasoning_source: str = "server"
    """Where reasoning_tokens came from: "server", "stream" (counted), or "none"."""
    finish_reason: str | None = None
    answered: bool = False
    """A visible answer (non-empty delta.content) or a function call arrived."""
    answer_json: bool | None = None
    """With RESPONSE_FORMAT, on a successful request: its answer's text parsed as JSON; None when not judged."""
    answer_valid: bool | None = None
    """With RESPONSE_FORMAT, on a successful request: its answer was what the format asks (a JSON object for
    json_object, valid against the schema for json_schema); None when not judged."""
    answer_invalid: str | None = None
    """Why answer_valid is False, one short line (not JSON, or the schema's first complaint)."""
    error: str | None = None
    """None when the request succeeded; else a category: connect, timeout, http_<code>,
    stream_error, protocol, disconnected, tool_call_invalid, interrupted."""
    error_detail: str | None = None
    warmup: bool = False
    """Sent before the measured requests (WARMUP_REQUESTS); kept, but left out of the summary."""
    effort: str | None = None
    """reasoning_effort sent (none: left out); drawn per request under EFFORT=mix:...; None in older files."""
    conversation_id: str | None = None
    """With TURNS above 1: the conversation this request is a turn of; None for single requests."""
    turn: int | None = None
    """With TURNS above 1: which turn of its conversation, from 1 (its prompt_tokens include the history so far)."""
    task_id: str | None = None
    """With TOOL_ROUNDS above 1: the task this request is a round of (its conversation's id and turn, ``7.1``)."""
    round: int | None = None
    """With TOOL_ROUNDS above 1: which round of its task, from 1; round n+1 sends round n's function calls and the
    tools' results."""
    scheduled_monotonic_s: float | None = None
    """With RATE: when the schedule had the request sent (start_monotonic_s is when it was); None in closed loop."""
    slot_wait_s: float | None = None
    """With RATE: how long the request, once due, waited for one of MAX_CONCURRENCY slots (0 without a cap)."""
    arrival_stamps: str = "user"
    """Where event arrival times came from: "kernel" (the kernel's receive stamp of the segment that
    completed each event), "user" (the moment the client's read returned), or "mixed"."""
    schema_version: int = RECORD_SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def token_events(self) -> int:
        """Events that carried tokens: the first, then one per inter-token gap."""
        return 0 if self.ttft_s is None else len(self.itl_s) + 1

    @property
    def decode_s(self) -> float | None:
        """E2E - TTFT: the stream after its first token, the client's view of the decode phase vLLM times itself
        (``vllm:request_decode_time_seconds``), plus the wait for the usage chunk and [DONE]. None when the tokens
        came in fewer than two events: the server decoded the answer before the client saw any of it."""
        if self.ttft_s is None or self.token_events < 2:
            return None
        return self.e2e_s - self.ttft_s

    def to_json_line(self) -> bytes:
        return orjson.dumps(self) + b"\n"

    @classmethod
    def from_json(cls, row: dict) -> "RequestRecord":
        """The record of one decoded samples.jsonl line (or of one a worker sent)."""
        return cls(**row)


def record_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Each line of a samples.jsonl file as decoded JSON, skipping a torn last line from a killed run;
    ResultsError (one line) for a line of a newer version than this llmload reads."""
    for row in iter_json_lines(path):
        check_schema_version(row, path, RECORD_SCHEMA_VERSION)
        yield row


def read_records(path: Path) -> Iterator[RequestRecord]:
    """Yield the records of a samples.jsonl file (see ``record_rows``)."""
    for row in record_rows(path):
        yield RequestRecord.from_json(row)


def run_span_s(records: Sequence[RequestRecord]) -> tuple[float, float]:
    """First start and last end of ``records`` (monotonic seconds); (0, 0) when there are none."""
    if not records:
        return 0.0, 0.0
    return min(r.start_monotonic_s for r in records), max(r.start_monotonic_s + r.e2e_s for r in records)
