"""Function calls an answer made (TOOLS): kept whole, checked against the tools offered, and handed back with results.

A call is what the stream assembled: chat's ``delta.tool_calls`` pieces joined by their index, or a Responses
stream's function_call items as its terminal event sums them up. A call whose arguments are not a JSON object, or
that names a function that was not offered, makes the request's record a ``tool_call_invalid`` failure
(faults.py). With TOOL_ROUNDS, each valid call goes back in the next request with its result: chat as an assistant
message holding the calls and one ``tool`` message per result; Responses as the function_call items and one
function_call_output item per result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import orjson

__all__ = ["ToolCall", "ToolUse", "invalid_call", "chat_round_messages", "responses_round_items"]


@dataclass(frozen=True)
class ToolCall:
    """One function call as the answer made it."""

    call_id: str
    name: str
    arguments: str
    """The arguments' text as streamed (JSON when the call is valid)."""
    item: dict[str, Any] | None = None
    """The Responses API's function_call item as the server sent it (sent back as it is); None over chat."""


@dataclass
class ToolUse:
    """What one request offered and what its answer called: the offered names, and the calls its accumulator filled."""

    offered: frozenset[str]
    calls: list[ToolCall] = field(default_factory=list)


def invalid_call(calls: Sequence[ToolCall], offered: frozenset[str]) -> str | None:
    """Why the first invalid call is invalid (arguments not a JSON object, a function not offered); None when all are valid."""
    for call in calls:
        if call.name not in offered:
            return f"called {call.name!r}, which was not offered (offered: {', '.join(sorted(offered))})"
        try:
            arguments = orjson.loads(call.arguments)
        except orjson.JSONDecodeError:
            return f"{call.name}'s arguments are not JSON: {call.arguments[:120]!r}"
        if not isinstance(arguments, dict):
            return f"{call.name}'s arguments are not a JSON object: {call.arguments[:120]!r}"
    return None


def chat_round_messages(calls: Sequence[ToolCall], text: str, results: Sequence[str]) -> list[dict[str, Any]]:
    """The chat messages a tool round appends: the assistant's calls (with its text, if any), then each result."""
    assistant = {"role": "assistant", "content": text or None, "tool_calls": [
        {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        for call in calls]}
    return [assistant, *({"role": "tool", "tool_call_id": call.call_id, "content": result}
                         for call, result in zip(calls, results))]


def responses_round_items(calls: Sequence[ToolCall], text: str, results: Sequence[str]) -> list[dict[str, Any]]:
    """The Responses input items a tool round appends: any text the answer had, each function_call item, each output."""
    items: list[dict[str, Any]] = [{"role": "assistant", "content": text}] if text else []
    items += [call.item or {"type": "function_call", "call_id": call.call_id, "name": call.name,
                            "arguments": call.arguments} for call in calls]
    items += [{"type": "function_call_output", "call_id": call.call_id, "output": result}
              for call, result in zip(calls, results)]
    return items
