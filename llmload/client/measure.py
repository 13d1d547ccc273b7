"""The streaming clients, by name, and the one function that measures a request with either.

    CLIENTS["raw"]     raw sockets, one monotonic stamp per socket read (the default: faster, more exact)
    CLIENTS["openai"]  the official openai SDK (max_retries=0), one stamp per chunk it yields
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any, Callable, Protocol

from llmload.client.accumulator import StreamAccumulator
from llmload.client.apis import Api
from llmload.client.raw import RawChatClient
from llmload.client.readstats import PROCESS_READ_STATS
from llmload.client.sdk import OpenAIChatClient
from llmload.client.toolcalls import ToolUse
from llmload.errors import RequestFailed
from llmload.results.records import RequestRecord

__all__ = ["ChatClient", "CLIENTS", "make_client", "measure_request"]


class ChatClient(Protocol):
    api: Api
    """The API it speaks: where each request goes and what reads its stream."""

    def stream_chat(self, body: dict[str, Any], request_id: str, acc: StreamAccumulator) -> float:
        """Send ``body``, feed every chunk to ``acc``; return the monotonic end time or raise RequestFailed."""
        ...

    def close(self) -> None: ...


CLIENTS: dict[str, Callable[..., ChatClient]] = {"raw": RawChatClient, "openai": OpenAIChatClient}
"""Each is called (base_url, api_key, timeout_s, api=...)."""


def make_client(name: str, base_url: str, api_key: str = "", timeout_s: float = 600.0, api: str = "chat") -> ChatClient:
    """A client from the registry speaking ``api`` (apis.APIS); ``base_url`` is the server root (``http://host:port``)."""
    return CLIENTS[name](base_url, api_key, timeout_s, api=api)


def measure_request(
    client: ChatClient,
    body: dict[str, Any],
    prompt_id: str,
    on_record: Callable[[RequestRecord], None],
    warmup: bool = False,
    record_fields: dict[str, Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
    answer: list[str] | None = None,
    tool_use: ToolUse | None = None,
    judge: Callable[[str], dict[str, Any]] | None = None,
) -> RequestRecord:
    """Send one request and return its record; ``on_record`` also gets a request cut off mid-flight.

    ``record_fields`` are more RequestRecord fields known before sending, e.g. ``{"effort": "low"}``.
    ``clock`` stamps the start and a failed or cut request's end (the client's own stamps the rest).
    ``answer``, when given, gets the pieces of the answer's text (a conversation's next turn sends it back).
    ``tool_use``, when given (TOOLS), gets the answer's function calls, checked against the tools it offered.
    ``judge``, when given, turns a successful request's whole answer (not a function call) into more record fields
    (RESPONSE_FORMAT's check), once the request has ended: the text is kept, and nothing more is done per event.
    """
    request_id = uuid.uuid4().hex
    if judge is not None and answer is None:
        answer = []
    api = client.api
    if tool_use is not None:
        accumulator = api.tool_accumulator
    elif answer is not None:
        accumulator = api.answer_accumulator
    else:
        accumulator = api.accumulator
    acc = accumulator(request_id, prompt_id, time.time(), clock(), warmup, record_fields)
    if accumulator is not api.accumulator:
        acc.answer = [] if answer is None else answer  # type: ignore[attr-defined]
    if tool_use is not None:
        acc.tool_use = tool_use  # type: ignore[attr-defined]
    PROCESS_READ_STATS.on_request_start(acc.start_monotonic_s)
    try:
        end_s = client.stream_chat(body, request_id, acc)
    except RequestFailed as failure:
        record = acc.finish(clock(), failure.category, failure.detail)
    except BaseException:
        # Killed by the end of the run (gevent's GreenletExit) or Ctrl-C: keep what was measured.
        record = acc.finish(clock(), "interrupted")
        PROCESS_READ_STATS.on_request_end(record.start_monotonic_s + record.e2e_s)
        on_record(record)
        raise
    else:
        record = acc.finish(end_s)
        if judge is not None and record.ok and record.finish_reason != "tool_calls":  # a function call is no answer yet
            record = replace(record, **judge("".join(answer or ())))
    PROCESS_READ_STATS.on_request_end(record.start_monotonic_s + record.e2e_s)
    on_record(record)
    return record
