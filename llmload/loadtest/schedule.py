"""When a run's requests go: the closed loop's REQUESTS (or DURATION), or the open loop's schedule (RATE's arrivals,
TRACE's rows) on the target's clock, shared over the workers from one instant; MAX_CONCURRENCY's cap."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Iterator

from gevent.event import Event

from llmload.loadtest.arrivals import Arrivals, Replay
from llmload.loadtest.plan import Plan

__all__ = ["Schedule"]


@dataclass
class Schedule:
    """This process's part of the run's schedule."""

    plan: Plan
    arrivals: Arrivals | Replay | None
    """RATE's arrival process or TRACE's rows, their rates on the target's clock; None in a closed loop."""
    requests: int
    """Measured requests (REQUESTS, or a trace's rows after its warm-ups); 0: DURATION ends the test."""
    warmup_rows: int
    """A trace's warm-ups: its first rows, never replayed in the measured schedule."""
    max_concurrency: int
    """This process's share of MAX_CONCURRENCY (0: no cap)."""
    seed: int
    start_unix_s: float | None = None
    """On a worker: the master's instant the schedule starts at (the measured one after the warm-ups)."""
    stopping: Event = field(default_factory=Event)
    """Set when Locust starts stopping the test: the dispatcher sends nothing more."""
    dispatcher_started: bool = False

    def offsets(self, measured: bool = False) -> Iterator[tuple[int, float]]:
        """This process's arrivals, (number, due time as an offset from the schedule's start): on worker ``position`` of
        ``workers``, the schedule's arrivals position, position + workers, ... (one process: all).

        A trace's warm-ups are its first rows: the measured schedule starts at the row after them, so no row is sent
        twice."""
        assert self.arrivals is not None
        if isinstance(self.arrivals, Replay):
            skip = self.warmup_rows if measured else 0
            numbered = enumerate(self.arrivals.offsets_s(self.seed, skip), skip)
        else:
            numbered = enumerate(self.arrivals.offsets_s(self.seed))
        return itertools.islice(numbered, self.plan.position, None, self.plan.workers)

    def start_s(self) -> float:
        """When the schedule starts, on this process's monotonic clock: the master's instant on a worker, else now."""
        if self.start_unix_s is None:
            return time.monotonic()
        return time.monotonic() + (self.start_unix_s - time.time())
