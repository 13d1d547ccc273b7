"""The APIs a run can speak (API=...), by name: each one's route, request body and accumulator.

    APIS["chat"]       POST /v1/chat/completions: chunks, ended by ``data: [DONE]``
    APIS["responses"]  POST /v1/responses (the Responses API, gpt-oss's own): typed events, ended by response.completed
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from llmload.client.accumulator import (AnswerAccumulator, ResponsesAccumulator, ResponsesAnswerAccumulator,
                                        ResponsesToolCallAccumulator, StreamAccumulator, ToolCallAccumulator)
from llmload.client.body import ChatOptions, chat_body, responses_body
from llmload.client.toolcalls import ToolCall, chat_round_messages, responses_round_items

__all__ = ["Api", "APIS"]


@dataclass(frozen=True)
class Api:
    """One API: where a request goes, what it sends, what reads its stream."""

    name: str
    path: str
    """The route under the server root; also the request's name in Locust's tables."""
    body: Callable[[ChatOptions, list[dict[str, Any]], dict[str, Any] | None], dict[str, Any]]
    """(the run's options, the messages, the prompt's own request fields) -> the JSON body."""
    accumulator: type[StreamAccumulator]
    answer_accumulator: type[StreamAccumulator]
    """The same, keeping the answer's text (conversations send it back)."""
    tool_accumulator: type[StreamAccumulator]
    """The same, keeping the answer's text and its function calls (TOOLS)."""
    round_messages: Callable[[Sequence[ToolCall], str, Sequence[str]], list[dict[str, Any]]]
    """(the answer's calls, its text, their results) -> what a tool round appends to the history (TOOL_ROUNDS)."""


APIS: dict[str, Api] = {
    "chat": Api("chat", "/v1/chat/completions", chat_body, StreamAccumulator, AnswerAccumulator, ToolCallAccumulator,
                chat_round_messages),
    "responses": Api("responses", "/v1/responses", responses_body, ResponsesAccumulator, ResponsesAnswerAccumulator,
                     ResponsesToolCallAccumulator, responses_round_items),
}

