"""Ground-truth timing for tests: an exact TTFT after admission (FIXED_TTFT_MS) and an exact gap between tokens
(FIXED_ITL_MS, growing by ITL_PER_SEQ_MS per running sequence), each sequence on its own clock (a heap of due tokens).

The half not fixed comes from the profile's step-time model: TTFT as a first-come-first-served prefill of the whole
prompt in one step, the gap as a decode step of the running batch. The prefix cache is kept and counted (cached
tokens in the usage, vLLM's hits on /metrics) but never shortens a TTFT here: tests keep their exact times.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from typing import Callable

from .prefix_cache import PrefixCache
from .profiles import Profile
from .sequence import WAITING, Sequence
from .stepmodel import prefill_pairs, step_time_s

__all__ = ["FixedTiming"]


class FixedTiming:
    """Per-sequence token clocks: admission by --max-num-seqs and KV capacity, then first token and gaps as set."""

    def __init__(self, profile: Profile, scale: float, emit: Callable[[Sequence, float], None],
                 fixed_ttft_s: float | None, fixed_itl_s: float | None, per_seq_s: float | None) -> None:
        self.profile = profile
        self._scale = scale
        self._emit = emit
        # A fixed TTFT replaces prefill (no prefill queue, no KV admission limit; max_num_seqs still applies).
        self._fixed_ttft_s = None if fixed_ttft_s is None else fixed_ttft_s * scale
        self._fixed_itl_s = None if fixed_itl_s is None else fixed_itl_s * scale
        self._per_seq_s = 0.0 if per_seq_s is None else per_seq_s * scale
        self._heap: list[tuple[float, int, Sequence]] = []
        self._tie = itertools.count()  # FIFO among equal due times -> round-robin at ITL 0
        self._waiting: deque[Sequence] = deque()
        self._prefill_free_s = -math.inf
        self.running = 0
        self.kv_used_tokens = 0
        self.preemptions = 0  # never
        self.prefix_cache = PrefixCache(profile.engine.block_size)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def itl_s(self) -> float:
        """The gap before the next token, for the current batch."""
        if self._fixed_itl_s is not None:
            return self._fixed_itl_s + self._per_seq_s * self.running
        step = step_time_s(self.profile.step, self.running, self.kv_used_tokens, 0.0) * self._scale
        return step + self._per_seq_s * self.running

    def next_due_s(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def add(self, seq: Sequence, now_s: float) -> None:
        self._waiting.append(seq)
        self._admit(now_s)

    def cancel(self, seq: Sequence, now_s: float) -> None:
        """Called before the engine marks it cancelled."""
        if seq.state == WAITING:
            self._waiting.remove(seq)
        elif seq.state_running:
            self.running -= 1  # its heap entry is skipped lazily
            self._free(seq)
            self._admit(now_s)

    def pause(self, seq: Sequence) -> None:
        """Nothing to do now: its next due token is parked when it comes up."""

    def resume(self, seq: Sequence) -> None:
        """A parked token is re-queued at its original due time."""
        if seq.parked_due_s is not None and seq.state_running:
            due, seq.parked_due_s = seq.parked_due_s, None
            self._push(due, seq)

    def _admit(self, now_s: float) -> None:
        """Admit waiting sequences FIFO while slots and KV space allow."""
        cap = self.profile.engine.kv_capacity_tokens
        while self._waiting and self.running < self.profile.engine.max_num_seqs:
            seq = self._waiting[0]
            fits = self.kv_used_tokens + seq.prompt_tokens <= cap
            # An empty engine admits even an oversize prompt, so nothing can deadlock.
            if self._fixed_ttft_s is None and not fits and self.running > 0:
                break
            self._waiting.popleft()
            seq.admitted(now_s)
            self.running += 1
            self.kv_used_tokens += seq.prompt_tokens
            self._look_up(seq)
            if self._fixed_ttft_s is not None:
                first = now_s + self._fixed_ttft_s
            else:
                start = max(now_s, self._prefill_free_s)
                prompt = seq.prompt_tokens
                self._prefill_free_s = start + step_time_s(self.profile.step, prompt, 0.0, prefill_pairs(0, prompt)) * self._scale
                first = self._prefill_free_s
            self._push(first, seq)

    def _look_up(self, seq: Sequence) -> None:
        """Count what the prefix cache holds of the prompt (timing unchanged); its blocks are cached from now."""
        cache, blocks = self.prefix_cache, seq.prompt_blocks
        cache.evict(self.profile.engine.kv_capacity_tokens - self.kv_used_tokens)
        found, _ = cache.match(blocks, seq.prompt_tokens)
        cache.hold(seq, blocks[:found])
        cache.add(seq, blocks[found:])
        seq.cached_tokens = found * cache.block_size
        cache.count(seq.prompt_tokens, seq.cached_tokens)

    def _free(self, seq: Sequence) -> None:
        """A running sequence leaves: its KV is freed, its blocks stay cached (KV use peaks now: evict first)."""
        self.prefix_cache.evict(self.profile.engine.kv_capacity_tokens - self.kv_used_tokens)
        self.prefix_cache.release(seq)
        self.kv_used_tokens -= seq.prompt_tokens + seq.generated

    def _push(self, due_s: float, seq: Sequence) -> None:
        heapq.heappush(self._heap, (due_s, next(self._tie), seq))

    def advance(self, now_s: float, budget: int | None) -> int:
        """Emit every token due at or before now_s (at most budget); return tokens emitted."""
        heap = self._heap
        emitted = 0
        while heap and heap[0][0] <= now_s:
            if budget is not None and emitted >= budget:
                break
            due, _, seq = heapq.heappop(heap)
            if not seq.state_running:
                continue
            if seq.paused:
                seq.parked_due_s = due
                continue
            self.kv_used_tokens += 1
            self._emit(seq, due)
            emitted += 1
            if not seq.state_running:  # its last token, or a fault that cancelled it
                if seq.generated >= seq.total_tokens:
                    self.running -= 1
                    self._free(seq)
                    self._admit(due)  # the slot frees at the scheduled time, not the wake time
            else:
                # Next token is relative to the scheduled time so wake-up lateness never accumulates.
                self._push(due + self.itl_s(), seq)
        return emitted
