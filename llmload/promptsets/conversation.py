"""One conversation as its requests send it: the messages so far, each turn appending to them.

Turn 1 sends the prompt's messages. Each later turn sends every message so far: the earlier user messages, each
answer as it was received (its text only: gpt-oss's harmony format drops earlier turns' reasoning, and vLLM
renders an earlier answer on the final channel), then the new user message. A single request is a conversation of
one turn. With TOOL_ROUNDS a turn is a task of up to that many requests (rounds): while a round's answer is a
function call, ``called`` appends the call and the tool's results and the turn's next round sends again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from llmload.promptsets.catalog import Prompt
from llmload.promptsets.followups import FollowUp
from llmload.promptsets.prefixes import PREFIX_GROUP

__all__ = ["Conversation", "with_nonce"]


def with_nonce(messages: Sequence[dict[str, str]], nonce: str, at: int = 0) -> list[dict[str, str]]:
    """The messages with ``nonce`` on a line of its own before message ``at``'s text (a copy: the set is not changed)."""
    first = messages[at]
    return [*messages[:at], {**first, "content": f"{nonce}\n{first['content']}"}, *messages[at + 1:]]


@dataclass
class Conversation:
    """The messages a conversation has sent and will send, and which turn is next."""

    id: str
    prompt: Prompt
    messages: list[dict[str, Any]]
    """Everything the next request sends, in order."""
    followups: list[FollowUp] = field(default_factory=list)
    """The user messages of turns 2, 3, ..., each appended once the turn before it was answered."""
    sent: int = 0
    """Turns answered so far."""
    ended: bool = False
    """A turn failed: its answer is unknown, so the conversation cannot go on."""
    rounds: int = 1
    """The most requests a turn makes (TOOL_ROUNDS): one more after each answer that is a function call."""
    round: int = 1
    """The next request's round within its turn, from 1."""
    shared_tokens: int = 0
    """Tokens of its first request the workload declares shareable in the server's prefix cache (sharing.py)."""
    history_tokens: int = 0
    """Tokens of the last request and its answer (a later turn or round sends them again: declared shareable)."""
    reused: bool = False
    """Its prompt was sent before in this run (CACHE=cold: it leads with a nonce, so only its frame is shared)."""

    @classmethod
    def start(cls, id: str, prompt: Prompt, followups: Sequence[FollowUp] = (), nonce: str | None = None,
              rounds: int = 1, shared_tokens: int = 0, reused: bool = False) -> Conversation:
        """A conversation on ``prompt``; ``nonce`` (NONCE=on, or a prompt sent again under CACHE=cold) leads its first
        message of its own, after a shared prefix, and stays in the history, so later turns still find their own
        earlier ones in vLLM's prefix cache."""
        messages = list(prompt.messages)
        if nonce is not None:
            messages = with_nonce(messages, nonce, 1 if PREFIX_GROUP in prompt.meta else 0)
        return cls(id, prompt, messages, list(followups), rounds=rounds, shared_tokens=shared_tokens, reused=reused)

    @property
    def declared_cached_tokens(self) -> int:
        """What the next request may find in the server's prefix cache by the workload's own sharing: its first, the
        set's declared share; a later turn or round, everything the request before it sent and got."""
        return self.history_tokens if self.sent or self.round > 1 else self.shared_tokens

    @property
    def turn(self) -> int:
        """The next request's turn, from 1."""
        return self.sent + 1

    @property
    def turns(self) -> int:
        """How many turns it has in all."""
        return 1 + len(self.followups)

    @property
    def done(self) -> bool:
        return self.ended or self.sent >= self.turns

    def request(self) -> dict[str, Any]:
        """The body fields the next turn sets itself: the prompt's, then a later turn's own (a ShareGPT turn's max_tokens)."""
        return self.prompt.request if self.sent == 0 else {**self.prompt.request, **self.followups[self.sent - 1].request}

    @property
    def rounds_left(self) -> bool:
        """Whether the turn may send another round, should this one's answer be a function call."""
        return self.round < self.rounds

    @property
    def mid_turn(self) -> bool:
        """Whether the next request is a later round of its turn (the tool's results go back): no THINK_TIME before it."""
        return self.round > 1

    def called(self, messages: Sequence[dict[str, Any]]) -> None:
        """The round's answer was a function call: ``messages`` (the call, the tool's results) join the history, and
        the turn's next round is next."""
        self.round += 1
        self.messages.extend(messages)

    def answered(self, text: str) -> None:
        """The turn's answer came (``text``: its visible text as received): it joins the history, and so does the next
        turn's user message, if there is one."""
        self.sent += 1
        self.round = 1
        self.add({"role": "assistant", "content": text})
        if not self.done:
            self.add({"role": "user", "content": self.followups[self.sent - 1].text})

    def failed(self) -> None:
        """The turn failed: the conversation ends."""
        self.sent += 1
        self.ended = True

    def add(self, message: dict[str, Any]) -> None:
        """One more message for the next request."""
        self.messages.append(message)
