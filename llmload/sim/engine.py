"""The built-in target's engine: requests in, tokens out at their due times, on asyncio (no HTTP here).

How long things take is a timing's business: the profile's step-time model played step by step (stepped.py,
the default), or exact fixed times for tests (fixed.py: FIXED_TTFT_MS, FIXED_ITL_MS). Both keep vLLM's prefix
cache (prefix_cache.py) over the prompt blocks a request brings. The engine draws each request's output lengths,
injects faults, counts what vLLM's /metrics count, and drives the timing on the loop.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from typing import Callable

from .fixed import FixedTiming
from .histograms import RequestHistograms
from .profiles import Profile, sample_lengths
from .sequence import CANCELLED, DONE, FAILED, RUNNING, WAITING, Sequence, TokenSink, plan_output
from .stepped import SteppedTiming

__all__ = ["Engine", "Sequence", "TokenSink", "plan_output", "WAITING", "RUNNING", "DONE", "CANCELLED", "FAILED",
           "EMIT_BUDGET", "MILLISECOND_WINDOW_S", "send_window_s"]

# Max tokens emitted per wake before yielding to the event loop, so socket reads and
# new arrivals are served even when fixed ITL 0 makes every token due immediately.
EMIT_BUDGET = 64
MILLISECOND_WINDOW_S = 0.0005
"""Where timers wake up to 1 ms late (epoll's milliseconds), the sender aims this much early and sends what falls due
within it: send error about +-0.5 ms without busy-polling, nearby tokens sharing one wake-up."""


def send_window_s(loop: asyncio.AbstractEventLoop) -> float:
    """How early the token sender wakes, sending what falls due in that window: none on a loop whose timers are exact
    (sim/loop.py's PreciseEventLoop with a timerfd: a token never leaves before its instant), else
    MILLISECOND_WINDOW_S."""
    return 0.0 if getattr(loop, "timers_exact", False) else MILLISECOND_WINDOW_S


class _NullSink:
    """Sink that ignores tokens (engine used without a consumer)."""

    def on_token(self, seq: Sequence, due_s: float) -> None:
        """Ignore the token."""


class Engine:
    """vLLM-like serving of one profile: a timing decides when each token is due; the engine sends it then."""

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
        if fixed_ttft_s is None and fixed_itl_s is None:
            self.timing: FixedTiming | SteppedTiming = SteppedTiming(profile, scale, self._emit, itl_per_seq_s)
        else:
            self.timing = FixedTiming(profile, scale, self._emit, fixed_ttft_s, fixed_itl_s, itl_per_seq_s)
        self._arrivals = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.request_success_total = {"stop": 0, "length": 0}
        self.stream_pauses_total = 0  # streams held back because their reader fell behind
        self.latency = RequestHistograms()  # vLLM's request histograms, observed at each token's scheduled time
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._wake_due_s = math.inf

    # ---- bookkeeping views -------------------------------------------------------
    @property
    def running(self) -> int:
        """Sequences in the engine's batch."""
        return self.timing.running

    @property
    def waiting(self) -> int:
        """Number of requests queued for admission."""
        return self.timing.waiting

    @property
    def kv_used_tokens(self) -> int:
        return self.timing.kv_used_tokens

    @property
    def num_preemptions_total(self) -> int:
        return self.timing.preemptions

    def reset_prefix_cache(self) -> bool:
        """vLLM's reset: every cached block nobody holds forgotten; False (nothing done) while requests run."""
        return self.timing.prefix_cache.reset()

    @property
    def prefix_cache_queries_total(self) -> int:
        """Prompt tokens looked up in the prefix cache (vLLM's counter)."""
        return self.timing.prefix_cache.queries

    @property
    def prefix_cache_hits_total(self) -> int:
        """Of them, tokens found cached."""
        return self.timing.prefix_cache.hits

    @property
    def kv_usage(self) -> float:
        """Fraction of KV capacity held by running sequences (clamped to 1)."""
        return min(1.0, self.kv_used_tokens / self.profile.engine.kv_capacity_tokens)

    def next_due_s(self) -> float | None:
        """Earliest time something is due (a token, a step's end), or None when nothing is scheduled."""
        return self.timing.next_due_s()

    # ---- request lifecycle -------------------------------------------------------
    def submit(self, prompt_tokens: int, *, effort: str | None = None,
               max_tokens: int | None = None, ignore_eos: bool = False,
               sink: TokenSink | None = None, now_s: float | None = None, prompt_blocks: tuple[int, ...] = ()) -> Sequence:
        """Register an arrival; returns its Sequence (state FAILED if fault-injected). ``prompt_blocks``: the hashes
        of its prompt's full KV blocks (tokens.prompt_blocks), for the prefix cache; none: nothing cached."""
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        now = self._clock() if now_s is None else now_s
        index = self._arrivals
        natural_r, natural_a = sample_lengths(effort, self.seed, index)  # validates effort first
        self._arrivals += 1
        r, a, finish = plan_output(natural_r, natural_a, max_tokens, ignore_eos)
        seq = Sequence(index, prompt_tokens, r, a, finish, sink or _NullSink(), now, prompt_blocks)
        # Faults use their own stream so enabling them never changes output lengths.
        faults = random.Random(f"faults/{self.seed}/{index}")
        fail_draw, disconnect_draw = faults.random(), faults.random()
        if fail_draw < self.fail_rate:
            seq.fail = True
            seq.state = FAILED
            return seq
        if disconnect_draw < self.disconnect_rate:
            seq.disconnect_after = seq.total_tokens // 2
        self.timing.add(seq, now)
        self._wake_if_sooner()
        return seq

    def cancel(self, seq: Sequence) -> None:
        """Stop a sequence (client went away) and free its slot; idempotent."""
        if seq.state in (WAITING, RUNNING):
            self.timing.cancel(seq, self._clock())
            seq.state = CANCELLED
            self._wake_if_sooner()

    def pause(self, seq: Sequence) -> None:
        """Hold back a sequence's tokens while its socket buffer is full."""
        seq.paused = True
        self.stream_pauses_total += 1
        self.timing.pause(seq)

    def resume(self, seq: Sequence) -> None:
        """Release a paused sequence."""
        seq.paused = False
        if seq.state == RUNNING:
            self.timing.resume(seq)
            self._wake_if_sooner()

    def advance(self, now_s: float, budget: int | None = None) -> int:
        """Emit every token due at or before now_s (at most budget); return tokens emitted."""
        return self.timing.advance(now_s, budget)

    def _emit(self, seq: Sequence, due_s: float) -> None:
        """One token of seq goes out at its scheduled time: count it, then hand it to the sink."""
        seq.generated += 1
        self.generation_tokens_total += 1
        latency = self.latency
        if seq.generated == 1:
            seq.first_token_s = due_s
            self.prompt_tokens_total += seq.prompt_tokens
            latency.time_to_first_token.observe(due_s - seq.arrival_s)
        else:
            latency.inter_token_latency.observe(due_s - seq.last_token_s)
        seq.last_token_s = due_s
        if seq.generated >= seq.total_tokens:
            seq.state = DONE
            self.request_success_total[seq.finish_reason] += 1
            latency.e2e_request_latency.observe(due_s - seq.arrival_s)
            queued_s = seq.arrival_s if seq.queued_s is None else seq.queued_s
            latency.request_queue_time.observe(0.0 if seq.admit_s is None else seq.admit_s - queued_s)
            if seq.generated > 1:
                latency.request_time_per_output_token.observe((due_s - seq.first_token_s) / (seq.generated - 1))
        seq.sink.on_token(seq, due_s)

    def _wake_if_sooner(self) -> None:
        """Wake the driver when something became due before the time it sleeps until."""
        due = self.timing.next_due_s()
        if due is not None and due < self._wake_due_s and self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

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
        window_s = send_window_s(loop)
        while True:
            if self.advance(self._clock() + window_s, EMIT_BUDGET) >= EMIT_BUDGET:
                await asyncio.sleep(0)  # more is due; let I/O run first
                continue
            due = self.next_due_s()
            fut: asyncio.Future[None] = loop.create_future()
            handle = None
            if due is not None:
                handle = loop.call_later(due - window_s - self._clock(), _resolve, fut)
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
