"""vLLM V1's scheduler, one engine step at a time, on no clock: what each step runs, how long it takes, what it yields.

Each step first gives every decoding sequence its next token, then spends what is left of the token budget
(--max-num-batched-tokens) on prompts: those part-way through their prefill first, then waiting requests in
arrival order while fewer than --max-num-seqs run and the KV cache holds their chunk (chunked prefill: a prompt
longer than the budget is spread over several steps). A prompt's last chunk samples its first token. When the KV
cache cannot hold one more token per decoding sequence, the newest running request is preempted: it waits at the
head of the queue and later recomputes its prompt and the tokens it had generated (vLLM's recompute). A request that
brings its prompt's block hashes finds its leading blocks in the prefix cache (prefix_cache.py) at admission and
prefills only the rest; its prompt's blocks join the cache as they are computed.

A decoding sequence's counts are implicit (its join step plus the steps since), so a step costs O(1) bookkeeping
however many sequences decode; ``pure_decode_steps`` and ``skip`` let an offline replay take many such steps at
once. The caller owns time: ``plan`` says how long the next step takes, ``finish`` applies it.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from typing import Any

from .prefix_cache import PrefixCache
from .stepmodel import EngineLimits, StepTimes, experts_read, prefill_pairs, step_time_s

__all__ = ["Work", "StepScheduler", "WAITING", "PREFILL", "DECODE", "HELD", "FINISHED", "GONE"]

WAITING, PREFILL, DECODE, HELD, FINISHED, GONE = "waiting", "prefill", "decode", "held", "finished", "gone"


class Work:
    """One request inside the scheduler; ``owner`` is whatever the caller attached (a Sequence)."""

    __slots__ = ("owner", "prompt_tokens", "total_tokens", "blocks", "cached_tokens", "blocks_cached", "state", "target",
                 "computed", "gen", "gen0", "kv0", "joined", "finish_step", "held")

    def __init__(self, owner: Any, prompt_tokens: int, total_tokens: int, blocks: tuple[int, ...] = ()) -> None:
        self.owner = owner
        self.prompt_tokens = prompt_tokens
        self.total_tokens = total_tokens
        self.blocks = blocks
        """Hashes of the prompt's full blocks (none: the prefix cache is not asked)."""
        self.cached_tokens: int | None = None
        """Prompt tokens found cached at its first admission (None before it)."""
        self.blocks_cached = 0  # leading blocks of ``blocks`` found or put in the cache since its admission
        self.state = WAITING
        self.target = prompt_tokens  # tokens to prefill: the prompt, or prompt + generated after a preemption
        self.computed = 0  # of target, while waiting or prefilling
        self.gen = 0  # tokens generated, while not decoding (a decoder's is gen0 + steps since it joined)
        self.gen0 = 0
        self.kv0 = 0
        self.joined = 0
        self.finish_step = 0
        self.held = False  # paused by its reader: it keeps its slot and KV but takes no decode steps


class StepScheduler:
    """Continuous batching with chunked prefill, KV capacity and preemption, as vLLM V1 schedules."""

    def __init__(self, limits: EngineLimits, times: StepTimes, per_running_s: float = 0.0) -> None:
        self.limits = limits
        self.times = times
        self.per_running_s = per_running_s
        """Added to every step per running sequence (ITL_PER_SEQ_MS: a known slope, for tests)."""
        self.waiting: deque[Work] = deque()
        self.running: dict[Work, None] = {}  # admission order; the last is preempted first
        self.prefilling: list[Work] = []
        self.decoding: dict[Work, None] = {}
        self.steps_done = 0
        self.kv_used = 0
        self.decode_context = 0
        """Sum over decoding sequences of the context the next step attends."""
        self.preemptions = 0
        self.first_admitted: list[Work] = []
        """What the last plan took out of the waiting queue for the first time (its queue time ends there)."""
        self.cache = PrefixCache(limits.block_size)
        self._finishes: list[tuple[int, int, Work]] = []
        self._order = itertools.count()
        self._chunks: list[tuple[Work, int]] = []

    # ---- views -------------------------------------------------------------------------------
    def generated(self, w: Work) -> int:
        """Tokens ``w`` has generated so far."""
        return w.gen0 + self.steps_done - w.joined if w.state == DECODE else w.gen

    def _kv(self, w: Work) -> int:
        return w.kv0 + self.steps_done - w.joined if w.state == DECODE else w.computed

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    # ---- what the server asks ------------------------------------------------------------------
    def add(self, w: Work) -> None:
        """A request reaches the engine: it waits for the next step that has room."""
        self.waiting.append(w)

    def cancel(self, w: Work) -> None:
        """The client went away: free its slot and KV (idempotent)."""
        if w.state == WAITING:
            self.waiting.remove(w)
        elif w.state in (PREFILL, DECODE, HELD):
            self._leave(w)
        w.state = GONE

    def hold(self, w: Work) -> None:
        """Stop giving ``w`` tokens (its reader fell behind); it keeps its slot and KV."""
        w.held = True
        if w.state == DECODE:
            w.gen, w.computed = self.generated(w), self._kv(w)
            self._stop_decoding(w)
            w.state = HELD

    def release(self, w: Work) -> None:
        """Give ``w`` tokens again."""
        w.held = False
        if w.state == HELD:
            self._start_decoding(w)

    # ---- steps ---------------------------------------------------------------------------------
    def plan(self) -> float | None:
        """Choose the next step's work; its duration in seconds, or None when there is nothing to run."""
        limits = self.limits
        cap = limits.kv_capacity_tokens
        preempted = False
        self.first_admitted.clear()
        while len(self.running) > 1 and self.decoding and self.kv_used + len(self.decoding) > cap:
            self._preempt(next(reversed(self.running)))
            preempted = True
        decoders = len(self.decoding)
        budget = limits.max_num_batched_tokens - decoders
        reserved = self.kv_used + decoders
        chunks = self._chunks = []
        pairs = 0.0
        for w in self.prefilling:
            if budget <= 0:
                break
            chunk = min(w.target - w.computed, budget)
            if reserved + chunk > cap and len(self.running) > 1:
                break
            chunks.append((w, chunk))
            budget -= chunk
            reserved += chunk
            pairs += prefill_pairs(w.computed, chunk)
        cache = self.cache
        while self.waiting and budget > 0 and len(self.running) < limits.max_num_seqs and not preempted:
            w = self.waiting[0]
            found, revived = cache.match(w.blocks, w.target) if w.blocks else (0, 0)
            start = found * cache.block_size
            chunk = min(w.target - start, budget)
            taken = revived * cache.block_size  # cached blocks nobody holds become used again
            if reserved + taken + chunk > cap and self.running:  # an empty engine takes even an oversize prompt
                break
            self.waiting.popleft()
            if found:
                cache.hold(w, w.blocks[:found])
                self.kv_used += taken
            if w.cached_tokens is None:
                w.cached_tokens = start
                cache.count(w.prompt_tokens, start)
                self.first_admitted.append(w)
            w.state = PREFILL
            w.computed = start
            w.blocks_cached = found
            self.running[w] = None
            self.prefilling.append(w)
            chunks.append((w, chunk))
            budget -= chunk
            reserved += taken + chunk
            pairs += prefill_pairs(start, chunk)
        tokens = limits.max_num_batched_tokens - budget
        if tokens == 0:
            if len(self.running) < 2:
                return None
            self._preempt(next(reversed(self.running)))  # prompts part-way in, no room left: as vLLM, free the newest
            return self.plan()
        cache.evict(cap - reserved)  # the step's new tokens take the space of the least recently used free blocks
        return step_time_s(self.times, tokens, self.decode_context, pairs) + self.per_running_s * len(self.running)

    def finish(self) -> tuple[list[Work], list[Work]]:
        """Apply the planned step: every decoder gains a token; returns (prefills that sampled a token, requests done).

        A request cancelled or held while the step ran gets nothing from it.
        """
        self.steps_done += 1
        grown = len(self.decoding)
        self.kv_used += grown
        self.decode_context += grown
        sampled: list[Work] = []
        done: list[Work] = []
        for w, chunk in self._chunks:
            if w.state != PREFILL:
                continue
            w.computed += chunk
            self.kv_used += chunk
            if w.blocks_cached < len(w.blocks):
                self._cache_blocks(w)
            if w.computed < w.target:
                continue
            w.gen += 1
            sampled.append(w)
            if w.gen >= w.total_tokens:
                self._leave(w)
                w.state = FINISHED
                done.append(w)
                continue
            self.prefilling.remove(w)
            if w.held:
                w.state = HELD
            else:
                self._start_decoding(w)
        self._chunks = []
        finishes = self._finishes
        while finishes and finishes[0][0] <= self.steps_done:
            step, _, w = heapq.heappop(finishes)
            if w.state == DECODE and w.finish_step == step:
                w.gen = self.generated(w)
                self._leave(w)
                w.state = FINISHED
                done.append(w)
        return sampled, done

    # ---- many decode-only steps at once (offline replay) -----------------------------------------
    def pure_decode_steps(self) -> int:
        """How many steps from now would only decode (no prefill, admission, preemption or finish): 0 if the next would not."""
        if not self.decoding or self.prefilling:
            return 0
        limits = self.limits
        decoders = len(self.decoding)
        if self.waiting and len(self.running) < limits.max_num_seqs and limits.max_num_batched_tokens > decoders and \
                self.kv_used + decoders + min(self.waiting[0].target, limits.max_num_batched_tokens - decoders) \
                <= limits.kv_capacity_tokens:
            return 0
        until_finish = self._next_finish_step() - self.steps_done - 1  # the finishing step itself runs alone
        room = (limits.kv_capacity_tokens - self.kv_used) // decoders
        return max(0, min(until_finish, room))

    def _next_finish_step(self) -> int:
        finishes = self._finishes
        while finishes and not (finishes[0][2].state == DECODE and finishes[0][2].finish_step == finishes[0][0]):
            heapq.heappop(finishes)
        return finishes[0][0] if finishes else self.steps_done + 1

    def decode_step_s(self, index: int) -> float:
        """Duration of the ``index``-th (from 0) of the next decode-only steps: the context grows by one per decoder each."""
        d = len(self.decoding)
        return self._decode_base_s() + self.times.context_token_s * (self.decode_context + d * index)

    def _decode_base_s(self) -> float:
        d, t = len(self.decoding), self.times
        return t.overhead_s + t.expert_weights_s * experts_read(t, d) + t.token_s * d + self.per_running_s * len(self.running)

    def decode_steps_s(self, steps: int) -> float:
        """Total duration of the next ``steps`` decode-only steps."""
        d = len(self.decoding)
        return steps * self._decode_base_s() + self.times.context_token_s * (steps * self.decode_context + d * steps * (steps - 1) / 2)

    def decode_steps_within(self, span_s: float) -> int:
        """How many of the next decode-only steps start before ``span_s`` has passed (at least 1)."""
        a, b = self._decode_base_s() + self.times.context_token_s * self.decode_context, self.times.context_token_s * len(self.decoding)
        # steps k with start time S(k) = k a + b k (k-1)/2 < span_s
        if b > 0:
            k = math.ceil((-(a - b / 2) + math.sqrt((a - b / 2) ** 2 + 2 * b * span_s)) / b)
        else:
            k = math.ceil(span_s / a)
        while k > 1 and self.decode_steps_s(k - 1) >= span_s:
            k -= 1
        while self.decode_steps_s(k) < span_s:
            k += 1
        return max(1, k)

    def decode_steps_ending_by(self, span_s: float) -> int:
        """How many of the next decode-only steps end by ``span_s`` (perhaps 0)."""
        if span_s <= 0:
            return 0
        steps = self.decode_steps_within(span_s)
        return steps if self.decode_steps_s(steps) <= span_s else steps - 1

    def skip(self, steps: int) -> None:
        """Take ``steps`` decode-only steps at once (``pure_decode_steps`` says how many may be)."""
        d = len(self.decoding)
        self.steps_done += steps
        self.kv_used += d * steps
        self.decode_context += d * steps
        self.cache.evict(self.limits.kv_capacity_tokens - self.kv_used)

    # ---- moving between states ---------------------------------------------------------------
    def _cache_blocks(self, w: Work) -> None:
        """The prompt's blocks its prefill has now computed in full join the prefix cache."""
        full = min(len(w.blocks), w.computed // self.cache.block_size)
        if full > w.blocks_cached:
            self.cache.add(w, w.blocks[w.blocks_cached:full])
            w.blocks_cached = full

    def _start_decoding(self, w: Work) -> None:
        w.state = DECODE
        w.joined, w.gen0, w.kv0 = self.steps_done, w.gen, w.computed
        w.finish_step = self.steps_done + w.total_tokens - w.gen
        self.decoding[w] = None
        self.decode_context += w.kv0
        heapq.heappush(self._finishes, (w.finish_step, next(self._order), w))

    def _stop_decoding(self, w: Work) -> None:
        del self.decoding[w]
        self.decode_context -= w.computed  # hold() or _leave() set it to the context it had

    def _leave(self, w: Work) -> None:
        """Free ``w``'s slot and KV, whatever it was doing."""
        if w.state == DECODE:
            w.gen, w.computed = self.generated(w), self._kv(w)
            self._stop_decoding(w)
        elif w.state == PREFILL:
            self.prefilling.remove(w)
        self.kv_used -= w.computed - self.cache.release(w)  # its blocks others hold stay used
        del self.running[w]

    def _preempt(self, w: Work) -> None:
        """Free the newest running request; it waits first in line to recompute its prompt and output so far."""
        self._leave(w)
        w.state = WAITING
        w.target = w.prompt_tokens + w.gen
        w.computed = 0
        self.waiting.appendleft(w)
        self.preemptions += 1
