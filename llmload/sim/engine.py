"""Continuous-batching scheduler: decides when each sequence's tokens are due (no HTTP)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import random
import time
from collections import deque
from typing import Callable, Protocol

from .histograms import RequestHistograms
from .profiles import Profile, sample_lengths

WAITING, RUNNING, DONE, CANCELLED, FAILED = "waiting", "running", "done", "cancelled", "failed"

# Max tokens emitted per wake before yielding to the event loop, so socket reads and
# new arrivals are served even when fixed ITL 0 makes every token due immediately.
EMIT_BUDGET = 64
# Timers wake up to 1 ms late (epoll has millisecond resolution), so the driver aims half a
# window early and sends everything due within the window: send error stays within about
# +-0.5 ms without busy-polling, and nearby tokens share one wake-up.
SEND_WINDOW_S = 0.0005


class TokenSink(Protocol):
    """Receives each token of a sequence when it is due."""

    def on_token(self, seq: "Sequence", due_s: float) -> None:
        """Called once per token, after seq.generated/state were updated."""


class _NullSink:
    """Sink that ignores tokens (engine used without a consumer)."""

    def on_token(self, seq: "Sequence", due_s: float) -> None:
        """Ignore the token."""


class Sequence:
    """One request's generation state and planned output."""

    __slots__ = (
        "index", "prompt_tokens", "reasoning_tokens", "answer_tokens", "total_tokens",
        "finish_reason", "state", "fail", "disconnect_after", "arrival_s", "admit_s",
        "first_token_s", "last_token_s", "generated", "sink", "paused", "parked_due_s",
    )

    def __init__(self, index: int, prompt_tokens: int, reasoning: int, answer: int,
                 finish_reason: str, sink: TokenSink, arrival_s: float) -> None:
        self.index = index
        self.prompt_tokens = prompt_tokens
        self.reasoning_tokens = reasoning
        self.answer_tokens = answer
        self.total_tokens = reasoning + answer
        self.finish_reason = finish_reason
        self.state = WAITING
        self.fail = False
        self.disconnect_after: int | None = None  # tokens delivered before a fault disconnect
        self.arrival_s = arrival_s
        self.admit_s: float | None = None
        self.first_token_s: float | None = None
        self.last_token_s = 0.0
        self.generated = 0
        self.sink = sink
        self.paused = False
        self.parked_due_s: float | None = None  # due time of a token held back while paused


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


class Engine:
    """vLLM-like continuous batching with a FIFO prefill server and a per-token heap."""

    def __init__(self, profile: Profile, *, seed: int = 0, speedup: float = 1.0,
                 fixed_ttft_s: float | None = None, fixed_itl_s: float | None = None,
                 itl_per_seq_s: float | None = None, fail_rate: float = 0.0, disconnect_rate: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if speedup <= 0:
            raise ValueError("speedup must be > 0")
        self.profile = profile
        self.seed = seed
        self.fail_rate = fail_rate
        self.disconnect_rate = disconnect_rate
        self._clock = clock
        scale = 1.0 / speedup  # every duration is divided by the speedup
        # Ground-truth overrides, independent of each other: fixed_ttft_s replaces prefill
        # (no prefill queue, no KV admission limit; max_num_seqs still applies) and
        # fixed_itl_s replaces the batch-size-dependent ITL (0 = as fast as possible).
        self._fixed_ttft_s = None if fixed_ttft_s is None else fixed_ttft_s * scale
        self._fixed_itl_s = None if fixed_itl_s is None else fixed_itl_s * scale
        self._ttft_base_s = profile.ttft_base_s * scale
        self._prefill_s_per_tok = scale / profile.prefill_tok_s
        self._itl_base_s = profile.itl_base_s * scale
        # itl_per_seq_s replaces the profile's growth of ITL per running sequence, also on top of fixed_itl_s
        self._itl_per_seq_s = (profile.itl_per_seq_s if itl_per_seq_s is None else itl_per_seq_s) * scale
        self._fixed_itl_per_seq_s = 0.0 if itl_per_seq_s is None else self._itl_per_seq_s
        self._heap: list[tuple[float, int, Sequence]] = []
        self._tie = itertools.count()  # FIFO among equal due times -> round-robin at ITL 0
        self._waiting: deque[Sequence] = deque()
        self._prefill_free_s = -math.inf
        self._arrivals = 0
        self.running = 0
        self.kv_used_tokens = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.request_success_total = {"stop": 0, "length": 0}
        self.num_preemptions_total = 0  # we never preempt
        self.prefix_cache_queries_total = 0
        self.prefix_cache_hits_total = 0  # no prefix cache model yet
        self.stream_pauses_total = 0  # streams held back because their reader fell behind
        self.latency = RequestHistograms()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._wake_due_s = math.inf

    # ---- bookkeeping views -------------------------------------------------------
    @property
    def waiting(self) -> int:
        """Number of requests queued for admission."""
        return len(self._waiting)

    @property
    def kv_usage(self) -> float:
        """Fraction of KV capacity held by running sequences (clamped to 1; no preemption)."""
        return min(1.0, self.kv_used_tokens / self.profile.kv_capacity_tokens)

    def itl_s(self) -> float:
        """Inter-token latency for the current batch size."""
        if self._fixed_itl_s is not None:
            return self._fixed_itl_s + self._fixed_itl_per_seq_s * self.running
        return self._itl_base_s + self._itl_per_seq_s * self.running

    def next_due_s(self) -> float | None:
        """Earliest scheduled token time, or None when nothing is scheduled."""
        return self._heap[0][0] if self._heap else None

    # ---- request lifecycle -------------------------------------------------------
    def submit(self, prompt_tokens: int, *, effort: str | None = None,
               max_tokens: int | None = None, ignore_eos: bool = False,
               sink: TokenSink | None = None, now_s: float | None = None) -> Sequence:
        """Register an arrival; returns its Sequence (state FAILED if fault-injected)."""
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        now = self._clock() if now_s is None else now_s
        index = self._arrivals
        natural_r, natural_a = sample_lengths(effort, self.seed, index)  # validates effort first
        self._arrivals += 1
        r, a, finish = plan_output(natural_r, natural_a, max_tokens, ignore_eos)
        seq = Sequence(index, prompt_tokens, r, a, finish, sink or _NullSink(), now)
        # Faults use their own stream so enabling them never changes output lengths.
        faults = random.Random(f"faults/{self.seed}/{index}")
        fail_draw, disconnect_draw = faults.random(), faults.random()
        if fail_draw < self.fail_rate:
            seq.fail = True
            seq.state = FAILED
            return seq
        if disconnect_draw < self.disconnect_rate:
            seq.disconnect_after = seq.total_tokens // 2
        self._waiting.append(seq)
        self._admit(now)
        return seq

    def cancel(self, seq: Sequence) -> None:
        """Stop a sequence (client went away) and free its slot; idempotent."""
        if seq.state == WAITING:
            seq.state = CANCELLED
            self._waiting.remove(seq)
        elif seq.state == RUNNING:
            seq.state = CANCELLED  # its heap entry is skipped lazily
            self.running -= 1
            self.kv_used_tokens -= seq.prompt_tokens + seq.generated
            self._admit(self._clock())

    def pause(self, seq: Sequence) -> None:
        """Hold back a sequence's tokens while its socket buffer is full."""
        seq.paused = True
        self.stream_pauses_total += 1

    def resume(self, seq: Sequence) -> None:
        """Release a paused sequence; a held-back token is re-queued at its original due time."""
        seq.paused = False
        if seq.parked_due_s is not None and seq.state == RUNNING:
            due, seq.parked_due_s = seq.parked_due_s, None
            self._push(due, seq)

    def _admit(self, now_s: float) -> None:
        """Admit waiting sequences FIFO while slots and KV space allow."""
        cap = self.profile.kv_capacity_tokens
        while self._waiting and self.running < self.profile.max_num_seqs:
            seq = self._waiting[0]
            fits = self.kv_used_tokens + seq.prompt_tokens <= cap
            # An empty engine admits even an oversize prompt, so nothing can deadlock.
            if self._fixed_ttft_s is None and not fits and self.running > 0:
                break
            self._waiting.popleft()
            seq.state = RUNNING
            seq.admit_s = now_s
            self.running += 1
            self.kv_used_tokens += seq.prompt_tokens
            if self._fixed_ttft_s is not None:
                first = now_s + self._fixed_ttft_s
            else:
                start = max(now_s, self._prefill_free_s)
                self._prefill_free_s = start + seq.prompt_tokens * self._prefill_s_per_tok
                first = self._prefill_free_s + self._ttft_base_s
            self._push(first, seq)

    def _push(self, due_s: float, seq: Sequence) -> None:
        """Schedule seq's next token and wake the loop if it became the earliest."""
        heapq.heappush(self._heap, (due_s, next(self._tie), seq))
        if due_s < self._wake_due_s and self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def advance(self, now_s: float, budget: int | None = None) -> int:
        """Emit every token due at or before now_s (at most budget); return tokens emitted."""
        heap = self._heap
        emitted = 0
        while heap and heap[0][0] <= now_s:
            if budget is not None and emitted >= budget:
                break
            due, _, seq = heapq.heappop(heap)
            if seq.state != RUNNING:
                continue
            if seq.paused:
                seq.parked_due_s = due
                continue
            self._emit(seq, due)
            emitted += 1
        return emitted

    def _emit(self, seq: Sequence, due_s: float) -> None:
        """Produce one token of seq at its scheduled time and schedule the next."""
        seq.generated += 1
        self.kv_used_tokens += 1
        self.generation_tokens_total += 1
        latency = self.latency
        if seq.generated == 1:
            seq.first_token_s = due_s
            self.prompt_tokens_total += seq.prompt_tokens
            self.prefix_cache_queries_total += seq.prompt_tokens
            latency.time_to_first_token.observe(due_s - seq.arrival_s)
        else:
            latency.inter_token_latency.observe(due_s - seq.last_token_s)
        seq.last_token_s = due_s
        if seq.generated >= seq.total_tokens:
            seq.state = DONE
            self.running -= 1
            self.kv_used_tokens -= seq.prompt_tokens + seq.generated
            self.request_success_total[seq.finish_reason] += 1
            latency.e2e_request_latency.observe(due_s - seq.arrival_s)
            latency.request_queue_time.observe(0.0 if seq.admit_s is None else seq.admit_s - seq.arrival_s)
            if seq.generated > 1:
                latency.request_time_per_output_token.observe((due_s - seq.first_token_s) / (seq.generated - 1))
            self._admit(due_s)  # the slot frees at the scheduled time, not the wake time
        else:
            # Next token is relative to the scheduled time so wake-up lateness never accumulates.
            self._push(due_s + self.itl_s(), seq)
        seq.sink.on_token(seq, due_s)

    # ---- asyncio driver ----------------------------------------------------------
    def start(self) -> None:
        """Start the single scheduling task on the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Stop the scheduling task."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        """Sleep until the earliest due token, emit what is due, repeat."""
        loop = asyncio.get_running_loop()
        while True:
            if self.advance(self._clock() + SEND_WINDOW_S, EMIT_BUDGET) >= EMIT_BUDGET:
                await asyncio.sleep(0)  # more is due; let I/O run first
                continue
            due = self.next_due_s()
            fut: asyncio.Future[None] = loop.create_future()
            handle = None
            if due is not None:
                handle = loop.call_later(due - SEND_WINDOW_S - self._clock(), _resolve, fut)
                self._wake_due_s = due
            self._wake = fut
            try:
                await fut
            finally:
                self._wake = None
                self._wake_due_s = math.inf
                if handle is not None:
                    handle.cancel()


def _resolve(fut: asyncio.Future[None]) -> None:
    """Complete the driver's sleep future unless something woke it already."""
    if not fut.done():
        fut.set_result(None)
