"""The step-time model played live: the step scheduler's steps on the event loop's clock, tokens through the API server.

A request first waits ``frontend.latency_s`` and costs the API server ``frontend.request_s`` plus
``frontend.prompt_token_s`` per prompt token (then the engine sees it); the engine runs step after step while it has
work (scheduler.py), an asynchronous one (the profile's ``engine.async_scheduling``) taking a request that came while
a step ran into the step after the next; when a step ends, every sequence it advanced has a token, and the API
server, one process serving everything in turn (first come, first served), sends them after
``frontend.output_token_s`` each. All durations are divided by SPEEDUP.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Callable

from .prefix_cache import PrefixCache
from .profiles import Profile
from .scheduler import WAITING as WORK_WAITING
from .scheduler import StepScheduler, Work
from .stepmodel import ApiServer
from .sequence import CANCELLED, Sequence

__all__ = ["SteppedTiming"]


class SteppedTiming:
    """vLLM's engine steps and API server, live."""

    def __init__(self, profile: Profile, scale: float, emit: Callable[[Sequence, float], None],
                 per_seq_s: float | None) -> None:
        self.profile = profile
        self._scale = scale
        self._emit = emit
        self._api = ApiServer(profile.frontend, scale)
        self.sched = StepScheduler(profile.engine, profile.step, per_seq_s or 0.0)
        self._arrivals: deque[tuple[float, Work]] = deque()  # past the API server, not yet seen by the engine
        self._deliveries: deque[list] = deque()  # [due_s, sequences, next index]: tokens the API server sends
        self._step_end_s: float | None = None
        self._step_start_s = -math.inf  # when the running step started: an asynchronous engine scheduled the next then
        self._kick = False  # a held sequence was released while the engine idled: step at the next look

    # ---- engine views ------------------------------------------------------------------------
    @property
    def running(self) -> int:
        return len(self.sched.running)

    @property
    def waiting(self) -> int:
        """vLLM's num_requests_waiting: its scheduler's queue. Requests still in the API server, or sent to the engine
        core during the running step (taken in when it ends), are not in it yet."""
        return len(self.sched.waiting)

    @property
    def kv_used_tokens(self) -> int:
        return self.sched.kv_used

    @property
    def preemptions(self) -> int:
        return self.sched.preemptions

    @property
    def prefix_cache(self) -> PrefixCache:
        return self.sched.cache

    def next_due_s(self) -> float | None:
        idle = self._step_end_s is None
        due = [t for t in (self._step_end_s, self._deliveries[0][0] if self._deliveries else None,
                           self._arrivals[0][0] if self._arrivals and idle else None, 0.0 if self._kick and idle else None,
                           self._api.pending[0][0] if self._api.pending and idle else None)
               if t is not None]
        return min(due) if due else None

    # ---- requests ------------------------------------------------------------------------------
    def add(self, seq: Sequence, now_s: float) -> None:
        seq.work = Work(seq, seq.prompt_tokens, seq.total_tokens, seq.prompt_blocks)
        seq.admitted(now_s)
        self._api.send(seq.work, now_s, seq.prompt_tokens)

    def _reach(self, until_s: float) -> None:
        """The API server takes the requests that reached it by ``until_s``, after the tokens queued before them."""
        for arrival_s, work in self._api.reach(until_s):
            self._arrivals.append((arrival_s, work))
            work.owner.arrival_s = arrival_s  # the server's own clock starts here (Sequence.arrival_s)

    def cancel(self, seq: Sequence, now_s: float) -> None:
        work = seq.work
        if work.state == WORK_WAITING and any(entry[1] is work for entry in self._api.pending):
            self._api.pending = deque(entry for entry in self._api.pending if entry[1] is not work)
        elif work.state == WORK_WAITING and any(w is work for _, w in self._arrivals):
            self._arrivals = deque((t, w) for t, w in self._arrivals if w is not work)
        else:
            self.sched.cancel(work)

    def pause(self, seq: Sequence) -> None:
        self.sched.hold(seq.work)

    def resume(self, seq: Sequence) -> None:
        self.sched.release(seq.work)
        self._kick = self._step_end_s is None

    # ---- time ----------------------------------------------------------------------------------
    def advance(self, now_s: float, budget: int | None) -> int:
        """Run every step end and send every token due at or before now_s (at most budget tokens)."""
        emitted = 0
        while budget is None or emitted < budget:
            if self._api.pending:  # those that reach the API server before the running step ends are ahead of its tokens
                self._reach(now_s if self._step_end_s is None else min(now_s, self._step_end_s))
            if self._step_end_s is None and self._kick:
                self._kick = False
                self._start_step(now_s)
            if self._step_end_s is None and self._arrivals and self._arrivals[0][0] <= now_s:
                self._start_step(self._arrivals[0][0])
            delivery = self._deliveries[0][0] if self._deliveries else math.inf
            step_end = math.inf if self._step_end_s is None else self._step_end_s
            if min(delivery, step_end) > now_s or delivery == step_end == math.inf:
                break
            if step_end <= delivery:
                self._end_step(step_end)
            else:
                emitted += self._deliver(None if budget is None else budget - emitted)
        return emitted

    def _start_step(self, start_s: float, busy: bool = False) -> None:
        """Let in what the API server passed on by ``start_s`` and plan the next step (none: the engine idles).

        ``busy``: the step follows the one that just ended. An asynchronous engine (--async-scheduling) scheduled it
        when that one started, so only what had come by then is in it, unless nothing else was left to run."""
        scheduled_s = self._step_start_s if busy and self.profile.engine.async_scheduling else start_s
        self._let_in(scheduled_s)
        duration = None if self.sched.idle else self.sched.plan()
        if duration is None and scheduled_s < start_s:  # nothing else was left to run: what came meanwhile runs now
            scheduled_s = start_s
            self._let_in(scheduled_s)
            duration = self.sched.plan()
        for w in self.sched.first_admitted:  # vLLM's queue time ends when the scheduler takes a request in
            w.owner.admit_s = scheduled_s
        self._step_start_s = start_s
        self._step_end_s = None if duration is None else start_s + duration * self._scale

    def _let_in(self, until_s: float) -> None:
        while self._arrivals and self._arrivals[0][0] <= until_s:
            work = self._arrivals.popleft()[1]
            work.owner.queued_s = until_s
            self.sched.add(work)

    def _end_step(self, end_s: float) -> None:
        """The step's tokens go to the API server's queue; the next step starts at once."""
        advanced = [w.owner for w in self.sched.decoding]
        sampled, _ = self.sched.finish()
        for w in sampled:
            if w.gen == 1:  # its first token: what its first admission found cached is known for good
                w.owner.cached_tokens = w.cached_tokens
        advanced += [w.owner for w in sampled]
        self._reach(end_s)  # first come, first served: requests that reached the API server first go first
        if advanced:
            self._deliveries.append([self._api.deliver(end_s, len(advanced)), advanced, 0])
        self._start_step(end_s, busy=True)

    def _deliver(self, budget: int | None) -> int:
        """Send the head delivery's tokens (up to budget); returns tokens sent."""
        head = self._deliveries[0]
        due, seqs, index = head
        end = len(seqs) if budget is None else min(len(seqs), index + budget)
        for seq in seqs[index:end]:
            if seq.state != CANCELLED:
                self._emit(seq, due)
        if end == len(seqs):
            self._deliveries.popleft()
        else:
            head[2] = end
        return end - index
