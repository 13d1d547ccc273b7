"""TOOLS and TOOL_ROUNDS as a run applies them: what each request offers, and what a tool round sends back.

A task is one turn of a conversation (a single request's, without TURNS): its first request, then, while the
answer is a function call and TOOL_ROUNDS allows, one more request (round) with the calls and the tools' results
appended (apis.Api.round_messages). Each round is a record; under TOOL_ROUNDS above 1 it carries ``task_id`` (the
conversation's id and turn) and ``round``, from which the summary's ``tasks`` figures come (results/tasks.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmload.client.apis import Api
from llmload.client.toolcalls import ToolUse
from llmload.promptsets.conversation import Conversation
from llmload.promptsets.tools import tool_names
from llmload.results.records import RequestRecord

__all__ = ["ToolRounds"]


@dataclass(frozen=True)
class ToolRounds:
    """The tools a run offers and how its tasks go on after a function call."""

    offered: frozenset[str]
    rounds: int
    """TOOL_ROUNDS: the most requests a task makes."""
    results: dict[str, tuple[str, ...]]
    """Each function's results (exactly TOOL_RESULT_TOKENS tokens each), taken in turn; empty when rounds is 1."""
    api: Api

    @classmethod
    def of(cls, tools: tuple[dict[str, Any], ...], rounds: int, results: dict[str, tuple[str, ...]], api: Api) -> ToolRounds | None:
        """The run's tool rounds; None without TOOLS."""
        return cls(tool_names(tools), rounds, results, api) if tools else None

    def use(self) -> ToolUse:
        """What one request offers, for its accumulator to fill with the answer's calls."""
        return ToolUse(self.offered)

    def fields(self, conversation: Conversation) -> dict[str, Any]:
        """The record fields of the conversation's next request: its task and round under TOOL_ROUNDS, else none."""
        if self.rounds == 1:
            return {}
        return {"task_id": f"{conversation.id}.{conversation.turn}", "round": conversation.round}

    def next_round(self, record: RequestRecord, conversation: Conversation, tool_use: ToolUse, text: str) -> list[dict[str, Any]] | None:
        """What the task's next round appends (the answer's calls, then their results) when ``record``, a success,
        ended in function calls with rounds left; None when the task is over."""
        if record.finish_reason != "tool_calls" or not tool_use.calls or not conversation.rounds_left:
            return None
        results = [self.results[call.name][(conversation.round + i) % len(self.results[call.name])]
                   for i, call in enumerate(tool_use.calls)]
        return self.api.round_messages(tool_use.calls, text, results)
