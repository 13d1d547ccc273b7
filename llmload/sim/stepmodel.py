"""How long one vLLM engine step takes, from what the step computes: the step-time model the built-in target plays.

One step runs the model once over a batch: one token of every decoding sequence, plus chunks of prompts being
prefilled, within vLLM's --max-num-batched-tokens budget. Its time is the sum of what it reads and computes:

    overhead_s                                  launch, scheduling, the dense (attention, embedding) weights
  + expert_weights_s * experts_read(tokens)     the MoE expert weights the batch's tokens route to (memory-bound)
  + token_s * tokens                            matrix work per token in the batch (compute-bound)
  + context_token_s * context_tokens            KV cache the decoding sequences attend to (memory-bound)
  + attention_pair_s * attention_pairs          prefill attention: (query token, earlier token) pairs (compute-bound)

experts_read is the share of experts touched: ``experts_per_token`` of ``experts`` for one token, growing toward
all of them as tokens join (``expert_saturation_tokens`` sets how fast; about 1/-ln(1 - k/E) under balanced routing).
Durations in seconds, counts in tokens. Pure arithmetic: no clock, no state.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["StepTimes", "Frontend", "ApiServer", "EngineLimits", "experts_read", "step_time_s", "prefill_pairs"]


@dataclass(frozen=True)
class StepTimes:
    """The step-time model's parameters for one GPU x model x weights (a profile's ``step`` block)."""

    overhead_s: float
    expert_weights_s: float
    """Time to read every expert's weights once."""
    expert_saturation_tokens: float
    token_s: float
    context_token_s: float
    attention_pair_s: float
    experts: int
    experts_per_token: int


@dataclass(frozen=True)
class Frontend:
    """vLLM's API server, one process serving every stream in turn: a delay and work per request, work per output token.

    Its queue delays each answer once the streams' tokens take more of its time than the engine's steps leave.
    """

    latency_s: float
    """Every request's wait that holds no one else up (hops, awaits), before the API server takes it up in its turn."""
    request_s: float
    """The API server's own work on one request (rendering, tokenizing), one request after another."""
    output_token_s: float
    """Detokenizing, parsing and sending one output token."""
    prompt_token_s: float = 0.0
    """The API server's work on a request per prompt token (parsing, rendering and tokenizing its text), in turn as
    ``request_s``: a request's own work is ``request_s + prompt_token_s * prompt tokens``."""


class ApiServer:
    """A Frontend at work, first come, first served: a request reaches it ``latency_s`` after it was sent and takes
    ``request_s`` in its turn (then the engine sees it); a step's tokens take ``output_token_s`` each, in turn with the
    requests that reached it before the step ended. The live target (stepped.py) and the replay (replay.py) share it."""

    __slots__ = ("latency_s", "request_s", "prompt_token_s", "output_token_s", "free_s", "pending")

    def __init__(self, frontend: Frontend, scale: float = 1.0) -> None:
        self.latency_s = frontend.latency_s * scale
        self.request_s = frontend.request_s * scale
        self.prompt_token_s = frontend.prompt_token_s * scale
        self.output_token_s = frontend.output_token_s * scale
        self.free_s = -math.inf
        """When it has done everything handed to it so far."""
        self.pending: deque[tuple[float, Any, float]] = deque()
        """(when it reaches the API server, request, its work there): sent, still on the way (latency_s)."""

    def send(self, request: Any, sent_s: float, prompt_tokens: int = 0) -> None:
        self.pending.append((sent_s + self.latency_s, request, self.request_s + self.prompt_token_s * prompt_tokens))

    def reach(self, until_s: float) -> list[tuple[float, Any]]:
        """The requests that reached it by ``until_s``, each with when the engine sees it, in that order."""
        passed = []
        pending = self.pending
        while pending and pending[0][0] <= until_s:
            reached_s, request, work_s = pending.popleft()
            self.free_s = max(reached_s, self.free_s) + work_s
            passed.append((self.free_s, request))
        return passed

    def deliver(self, end_s: float, tokens: int) -> float:
        """A step ending at ``end_s`` hands it ``tokens``: when the last is sent."""
        self.free_s = max(end_s, self.free_s) + tokens * self.output_token_s
        return self.free_s


@dataclass(frozen=True)
class EngineLimits:
    """The server's scheduling limits (vLLM's flags, or its defaults for the GPU)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    kv_capacity_tokens: int
    """Tokens of context the KV cache holds across running sequences (vLLM's "GPU KV cache size: N tokens")."""
    block_size: int = 16
    """Tokens per KV block (vLLM's --block-size, 16 by default): the prefix cache's unit."""
    async_scheduling: bool = False
    """vLLM's --async-scheduling: the engine schedules each step while the one before it runs, so a request that
    reaches a busy engine joins the step after next (the next was scheduled before it came)."""


def experts_read(times: StepTimes, tokens: int) -> float:
    """Share of the expert weights a batch of ``tokens`` reads: k/E for one token, toward 1 for many."""
    if tokens <= 0:
        return 0.0
    first = times.experts_per_token / times.experts
    return first + (1.0 - first) * (1.0 - math.exp(-(tokens - 1) / times.expert_saturation_tokens))


def step_time_s(times: StepTimes, tokens: int, context_tokens: float, attention_pairs: float) -> float:
    """Duration of one step over ``tokens`` batched tokens, decoders attending ``context_tokens``, and prefill pairs."""
    return (times.overhead_s + times.expert_weights_s * experts_read(times, tokens) + times.token_s * tokens
            + times.context_token_s * context_tokens + times.attention_pair_s * attention_pairs)


def prefill_pairs(done_tokens: int, chunk_tokens: int) -> float:
    """Attention pairs of a prefill chunk: each of its tokens attends the ``done_tokens`` before it and the chunk's earlier ones."""
    return chunk_tokens * (done_tokens + chunk_tokens / 2.0)
