"""A closed-loop load played through the step scheduler on virtual time: what each request would have seen.

``users`` clients each send a request, wait for its last token, and send the next at once (``users`` equal to the
number of requests: all sent at the start, as ``vllm bench serve`` with no --max-concurrency does). Requests pass
the API server (``Frontend``: one process, first come first served; a request's work there grows with its prompt) on
the way in and every step's tokens pass it on the way out. An asynchronous engine (``limits.async_scheduling``,
vLLM's --async-scheduling, on by default in 0.25) schedules each step when the one before it starts, so a
request that reaches it while a step runs is first computed in the step after the next; one that reaches an idle
engine (or one with nothing else left to run) at once. Runs of decode-only steps are taken at once, so a replay costs about one unit of work per
admission, prefill chunk and finish, not per token. Used by ``llmload calibrate`` and the tests; no I/O.

A request may bring ``cached_tokens``: the leading part of its prompt the server's prefix cache held (a measured
hit rate's share of it, in whole KV blocks). It prefills only the rest, which attends the cached part, and its
cached blocks take KV space from its admission, as a prefix-cache hit does on vLLM. They are its own (requests share
none) and are found at its admission, a preempted request's again at its next, however full the KV cache was
before: the hit rate was measured, not modelled.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Hashable, Sequence

from .prefix_cache import PrefixCache
from .scheduler import StepScheduler, Work
from .stepmodel import ApiServer, EngineLimits, Frontend, StepTimes

__all__ = ["RequestTiming", "replay_closed_loop"]


@dataclass(frozen=True)
class RequestTiming:
    """One replayed request: times in seconds from the start of the load."""

    sent_s: float
    engine_arrival_s: float
    """After the API server's request work: vLLM's arrival for its own TTFT."""
    first_engine_s: float
    """The step that sampled its first token ended."""
    first_delivered_s: float
    last_engine_s: float
    last_delivered_s: float
    output_tokens: int

    @property
    def ttft_s(self) -> float:
        return self.first_delivered_s - self.sent_s

    @property
    def e2e_s(self) -> float:
        return self.last_delivered_s - self.sent_s

    @property
    def tpot_s(self) -> float | None:
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1) if self.output_tokens > 1 else None

    @property
    def server_e2e_s(self) -> float:
        """vLLM's e2e_request_latency: from its arrival to the last token's output leaving the engine's queue."""
        return self.last_delivered_s - self.engine_arrival_s

    @property
    def server_ttft_s(self) -> float:
        """vLLM's time_to_first_token: from its arrival to the first token's output leaving the engine's queue."""
        return self.first_delivered_s - self.engine_arrival_s


class _DeclaredCache(PrefixCache):
    """A replay's prefix cache: a request's blocks (the cached part it was declared) are found at its admission,
    cached since before the load if no one holds them."""

    def match(self, blocks: Sequence[int], tokens: int) -> tuple[int, int]:
        found = min(len(blocks), (tokens - 1) // self.block_size)
        return found, sum(1 for block in blocks[:found] if block not in self._holders)

    def hold(self, owner: Hashable, blocks: Sequence[int]) -> None:
        for block in blocks:
            if block not in self._holders:
                self._free.setdefault(block, None)
        super().hold(owner, blocks)


class _Request:
    __slots__ = ("index", "sent_s", "arrival_s", "first_engine_s", "first_delivered_s", "work")

    def __init__(self, index: int, sent_s: float, prompt: int, output: int, blocks: tuple[int, ...]) -> None:
        self.index, self.sent_s = index, sent_s
        self.arrival_s = self.first_engine_s = self.first_delivered_s = 0.0
        self.work = Work(self, prompt, output, blocks)


def replay_closed_loop(limits: EngineLimits, times: StepTimes, frontend: Frontend, users: int,
                       prompt_tokens: Sequence[int], output_tokens: Sequence[int],
                       cached_tokens: Sequence[int] = ()) -> list[RequestTiming]:
    """Play len(prompt_tokens) requests from ``users`` closed-loop clients; their timings in send order.

    ``cached_tokens``: per request, the leading prompt tokens the prefix cache held (whole blocks of
    ``limits.block_size``, the last prompt token always computed); none: every prompt prefilled whole."""
    total = len(prompt_tokens)
    if cached_tokens and len(cached_tokens) != total:
        raise ValueError(f"cached_tokens gives {len(cached_tokens)} requests, prompt_tokens {total}")
    sched = StepScheduler(limits, times)
    sched.cache = _DeclaredCache(limits.block_size)
    block_size = limits.block_size
    api = ApiServer(frontend)
    arrivals: deque[_Request] = deque()  # past the API server, in engine arrival order
    results: dict[int, RequestTiming] = {}
    state = {"next": 0, "blocks": 0}

    def send(at_s: float) -> None:
        index = state["next"]
        if index >= total:
            return
        state["next"] = index + 1
        cached_blocks = cached_tokens[index] // block_size if cached_tokens else 0
        blocks = tuple(range(state["blocks"], state["blocks"] + cached_blocks))  # hashes no other request has
        state["blocks"] += cached_blocks
        api.send(_Request(index, at_s, prompt_tokens[index], output_tokens[index], blocks), at_s, prompt_tokens[index])

    def reach(until_s: float) -> None:
        """The API server takes the requests that reached it by ``until_s``, in turn with the tokens queued before them."""
        for arrival_s, request in api.reach(until_s):
            request.arrival_s = arrival_s
            arrivals.append(request)

    def next_arrival_s() -> float:
        """When the engine next sees a request (none is stepping: no tokens can come before it)."""
        if not arrivals:
            reach(api.pending[0][0])
        return arrivals[0].arrival_s

    def deliver(end_s: float, outputs: int) -> float:
        reach(end_s)  # first come, first served: a request that reached the API server first is served first
        return api.deliver(end_s, outputs)

    for _ in range(min(users, total)):
        send(0.0)
    now = 0.0
    lag = limits.async_scheduling
    scheduled_s = -math.inf  # when the step starting now was scheduled: asynchronous, at the start of the one before
    while len(results) < total:
        reach(now)
        while arrivals and arrivals[0].arrival_s <= (scheduled_s if lag else now):
            sched.add(arrivals.popleft().work)
        if sched.idle:  # nothing was left to schedule: what came meanwhile is scheduled at once
            while arrivals and arrivals[0].arrival_s <= now:
                sched.add(arrivals.popleft().work)
        if sched.idle:
            now = scheduled_s = next_arrival_s()
            continue
        skip = sched.pure_decode_steps()
        if skip > 1 and arrivals:
            ahead = arrivals[0].arrival_s - now
            before = sched.decode_steps_within(ahead) if ahead > 0 else 0  # steps that start before it comes
            skip = min(skip, before + 1 if lag else max(before, 1))
        if skip > 1 and api.pending:  # only the steps whose tokens reach the API server before the next request does
            skip = min(skip, sched.decode_steps_ending_by(api.pending[0][0] - now))
        if skip > 1:
            decoders = len(sched.decoding)
            first_end = now + sched.decode_step_s(0)
            span = sched.decode_steps_s(skip)
            # The API server's queue after ``skip`` steps of ``decoders`` tokens each: its worst backlog is at
            # the first step or the last (step times only grow), so the closed form is exact.
            work = decoders * api.output_token_s
            api.free_s = max(api.free_s + skip * work, first_end + skip * work, now + span + work)
            scheduled_s = now + sched.decode_steps_s(skip - 1)  # the last step's start: the next was scheduled then
            sched.skip(skip)
            now += span
            continue
        duration = sched.plan()
        if duration is None:  # waiting for room that only a later arrival's step can free: wait for it
            now = scheduled_s = max(now, next_arrival_s())
            continue
        scheduled_s = now
        decoders = len(sched.decoding)
        end = now + duration
        sampled, done = sched.finish()
        delivered = deliver(end, decoders + len(sampled))
        for w in sampled:
            request = w.owner
            if w.gen == 1:
                request.first_engine_s, request.first_delivered_s = end, delivered
        for w in done:
            request = w.owner
            results[request.index] = RequestTiming(request.sent_s, request.arrival_s, request.first_engine_s,
                                                   request.first_delivered_s, end, delivered, w.total_tokens)
            send(delivered)
        now = end
    return [results[i] for i in range(total)]
