"""What the client saw of its own lateness: events found waiting per wake-up, arrival-to-read lag, streams in flight.

One ``ReadStats`` per process (``PROCESS_READ_STATS``) collects from every client in it; the
generator self-check reports it. Lag exists only where the kernel stamped the arrival.
"""

from __future__ import annotations

import math

from llmload.results.histogram import LogHistogram

__all__ = ["ReadStats", "PROCESS_READ_STATS"]


class ReadStats:
    """Counters updated by the arrival readers and by each request; cheap enough to run on every read."""

    __slots__ = ("wakeups", "events", "max_events_per_wakeup", "lag", "shared_stamps", "in_flight", "max_in_flight",
                 "first_start_s", "last_end_s")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything counted so far."""
        self.wakeups = 0  # reads that found data waiting; a peek and the reads after it count once
        self.events = 0
        self.max_events_per_wakeup = 0
        self.lag = LogHistogram()  # kernel arrival to the moment the client had the bytes, per piece
        self.shared_stamps = 0  # pieces whose segment the kernel merged into the next one's (same stamp)
        self.in_flight = 0
        self.max_in_flight = 0
        self.first_start_s = math.inf  # monotonic: the measured window, first request start to last end
        self.last_end_s = -math.inf

    def on_wakeup(self, events: int) -> None:
        self.wakeups += 1
        self.events += events
        if events > self.max_events_per_wakeup:
            self.max_events_per_wakeup = events

    def on_lag(self, lag_s: float) -> None:
        self.lag.add(lag_s)

    def on_request_start(self, start_s: float) -> None:
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        if start_s < self.first_start_s:
            self.first_start_s = start_s

    def on_request_end(self, end_s: float) -> None:
        self.in_flight -= 1
        if end_s > self.last_end_s:
            self.last_end_s = end_s


PROCESS_READ_STATS = ReadStats()
