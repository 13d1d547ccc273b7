"""One request's generation state and planned output, shared by the engine and its timings."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["WAITING", "RUNNING", "DONE", "CANCELLED", "FAILED", "TokenSink", "Sequence", "plan_output"]

WAITING, RUNNING, DONE, CANCELLED, FAILED = "waiting", "running", "done", "cancelled", "failed"


class TokenSink(Protocol):
    """Receives each token of a sequence when it is due."""

    def on_token(self, seq: "Sequence", due_s: float) -> None:
        """Called once per token, after seq.generated/state were updated."""


class Sequence:
    """One request's generation state and planned output."""

    __slots__ = (
        "index", "prompt_tokens", "prompt_blocks", "cached_tokens", "reasoning_tokens", "answer_tokens", "total_tokens",
        "finish_reason", "state", "fail", "disconnect_after", "arrival_s", "queued_s", "admit_s",
        "first_token_s", "last_token_s", "generated", "sink", "paused", "parked_due_s", "work",
    )

    def __init__(self, index: int, prompt_tokens: int, reasoning: int, answer: int,
                 finish_reason: str, sink: TokenSink, arrival_s: float, prompt_blocks: tuple[int, ...] = ()) -> None:
        self.index = index
        self.prompt_tokens = prompt_tokens
        self.prompt_blocks = prompt_blocks
        """Hashes of the prompt's full KV blocks, for the prefix cache (tokens.prompt_blocks)."""
        self.cached_tokens = 0
        """Prompt tokens its admission found in the prefix cache (set by the timing by its first token)."""
        self.reasoning_tokens = reasoning
        self.answer_tokens = answer
        self.total_tokens = reasoning + answer
        self.finish_reason = finish_reason
        self.state = WAITING
        self.fail = False
        self.disconnect_after: int | None = None  # tokens delivered before a fault disconnect
        self.arrival_s = arrival_s
        """Where vLLM's TTFT, E2E and queue time start: the request's arrival, or (stepped timing) its engine arrival,
        after the API server's latency_s and request_s, as vLLM's gpt-oss path stamps it."""
        self.queued_s: float | None = None
        """Where vLLM's queue time starts (stepped timing): the step start at which the engine took the request into
        its waiting queue. vLLM's engine core does that between steps, so the running step's rest counts in its TTFT,
        not in its queue time. None: arrival_s."""
        self.admit_s: float | None = None
        self.first_token_s: float | None = None
        self.last_token_s = 0.0
        self.generated = 0  # tokens delivered to the sink
        self.sink = sink
        self.paused = False
        self.parked_due_s: float | None = None  # due time of a token held back while paused (fixed timing)
        self.work: Any = None  # the step scheduler's Work (stepped timing)

    @property
    def state_running(self) -> bool:
        return self.state == RUNNING

    def admitted(self, now_s: float) -> None:
        """The engine took it into its batch."""
        self.state = RUNNING
        self.admit_s = now_s


def plan_output(reasoning: int, answer: int, max_tokens: int | None,
                ignore_eos: bool) -> tuple[int, int, str]:
    """Cut the natural (reasoning, answer) lengths to max_tokens; return (r, a, finish_reason)."""
    natural = reasoning + answer
    if max_tokens is None:
        return reasoning, answer, "stop"
    if ignore_eos:
        # Exactly max_tokens, split in the sampled reasoning/answer proportion.
        r = min(max_tokens, round(max_tokens * reasoning / natural))
        return r, max_tokens - r, "length"
    if natural <= max_tokens:
        return reasoning, answer, "stop"
    r = min(reasoning, max_tokens)
    return r, max_tokens - r, "length"
