"""One request's path, in one piece: its body built, it measured, its tool round or answer handed to its conversation,
its record kept, and one Locust request event fired. The closed loop (user.py), the open-loop dispatcher (openloop.py)
and every conversation call the same RequestPipeline.send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from llmload.client.apis import Api
from llmload.client.body import ChatOptions
from llmload.client.faults import normalised_detail
from llmload.client.measure import ChatClient, measure_request
from llmload.errors import RequestFailed
from llmload.loadtest.budget import RequestBudget
from llmload.loadtest.pacing import FailRatioGuard
from llmload.loadtest.toolrounds import ToolRounds
from llmload.promptsets.conversation import Conversation
from llmload.results.records import RequestRecord

__all__ = ["RequestPipeline"]


@dataclass
class RequestPipeline:
    """What one request goes through, the same for every way of sending it."""

    api: Api
    chat_by_effort: dict[str, ChatOptions]
    """The request body's options for each effort the run draws."""
    tools: ToolRounds | None
    judge: Callable[[str], Any] | None
    """RESPONSE_FORMAT's check of each successful answer (None: off)."""
    conversations: bool
    """Requests are turns of conversations (TURNS above 1): each answer is kept for the next turn."""
    keep: Callable[[RequestRecord], None]
    """Where each finished request's record goes (the run's outputs in this process)."""
    budget: RequestBudget
    fail_ratio: FailRatioGuard
    report: Callable[..., None]
    """Locust's request event's fire: one event per measured request."""

    def record_fields(self, conversation: Conversation) -> dict[str, Any]:
        """The record fields of the conversation's next request: its id and turn under TURNS, its task and round under
        TOOL_ROUNDS; none for single requests."""
        fields = self.tools.fields(conversation) if self.tools is not None else {}
        if not self.conversations:
            return fields
        return {"conversation_id": conversation.id, "turn": conversation.turn, **fields}

    def send(self, ticket: int, client: ChatClient, conversation: Conversation, effort: str,
             record_fields: dict[str, Any] | None = None) -> RequestRecord:
        """Send request ``ticket``, the conversation's next turn (or its next tool round), with ``client``; record it,
        hand its answer to the conversation (a failure ends it), and report it to Locust unless it is a warm-up."""
        warmup = self.budget.is_warmup(ticket)
        body = self.api.body(self.chat_by_effort[effort], conversation.messages, conversation.request())
        fields = {"effort": effort, "declared_cached_tokens": conversation.declared_cached_tokens,
                  "prompt_reused": conversation.reused, **self.record_fields(conversation), **(record_fields or {})}
        answer: list[str] | None = [] if self.conversations or conversation.rounds > 1 else None
        tool_use = self.tools.use() if self.tools is not None else None
        record = measure_request(client, body, conversation.prompt.id, self.keep, warmup, fields, answer=answer,
                                 tool_use=tool_use, judge=self.judge)
        text = "".join(answer or ())
        conversation.history_tokens = (record.prompt_tokens or 0) + (record.completion_tokens or 0)
        if not record.ok:
            conversation.failed()
        elif tool_use is not None and self.tools is not None and (
                round_messages := self.tools.next_round(record, conversation, tool_use, text)):
            conversation.called(round_messages)
        else:
            conversation.answered(text)
        self.budget.done(ticket)
        if warmup:
            return record  # warm-ups stay out of Locust's statistics too
        # Locust groups failures by the exception's text: ids and numbers stripped, a few rows.
        self.report(request_type="POST", name=self.api.path, response_time=record.e2e_s * 1000.0,
                    response_length=record.completion_tokens or 0, context={"prompt_id": conversation.prompt.id},
                    exception=None if record.ok else RequestFailed(record.error or "", normalised_detail(record.error_detail)))
        self.fail_ratio.add(record.error)
        return record
