"""Pure: how the server delivered its tokens, from the records: tokens per token-bearing event.

A server that streams token by token gives about one token per event (gpt-oss's hidden harmony
header adds a few tokens no event carries). One that falls behind sends the tokens made meanwhile
together; one that holds an answer back (vLLM with gpt-oss whose harmony parse fails) sends it whole,
in one event: then a client's TTFT is the answer's end and TPOT and ITL cannot be measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from llmload.results.records import RequestRecord

__all__ = ["BURST_TOKENS_PER_EVENT", "TokenDelivery", "token_delivery"]

BURST_TOKENS_PER_EVENT = 2.0
"""Tokens per token-bearing event from which a server delivered in bursts rather than token by token."""


@dataclass(frozen=True)
class TokenDelivery:
    """Successful requests of two or more output tokens: how many tokens each of their events carried."""

    requests: int
    tokens_per_event: float | None
    """Their output tokens over their token-bearing events; None without such requests."""
    one_event_requests: int
    """Of them, those whose tokens all came in one event: no TPOT or ITL to measure."""

    @property
    def bursts(self) -> bool:
        """The server sent several tokens per event on average."""
        return self.tokens_per_event is not None and self.tokens_per_event >= BURST_TOKENS_PER_EVENT

    @property
    def every_answer_in_one_event(self) -> bool:
        return self.requests > 0 and self.one_event_requests == self.requests

    def describe(self) -> str:
        """``256.0 tokens per event, every answer in one event`` (or ``3 of 10 answers``)."""
        share = ("every answer in one event" if self.every_answer_in_one_event
                 else f"{self.one_event_requests} of {self.requests} answers in one event")
        return f"{self.tokens_per_event or 0:.1f} tokens per event, {share}"


def token_delivery(records: Sequence[RequestRecord]) -> TokenDelivery:
    """The delivery of the successful ``records`` that got two or more tokens."""
    counted = [r for r in records if r.ok and (r.completion_tokens or 0) >= 2 and r.token_events]
    events = sum(r.token_events for r in counted)
    return TokenDelivery(requests=len(counted),
                         tokens_per_event=sum(r.completion_tokens or 0 for r in counted) / events if events else None,
                         one_event_requests=sum(1 for r in counted if r.token_events == 1))
