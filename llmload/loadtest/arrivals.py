"""RATE's schedule: when each request of an open-loop run is due, as offsets from the schedule's start.

    constant  every 1/RATE seconds
    poisson   exponential gaps of mean 1/RATE (coefficient of variation 1)
    gamma     gamma gaps of shape BURSTINESS and mean 1/RATE, as vLLM bench's --burstiness:
              coefficient of variation 1/sqrt(BURSTINESS); below 1 burstier than Poisson, above 1 more regular

TRACE's is a Replay: the trace's own times, TRACE_SPEED times faster.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator

__all__ = ["Arrivals", "Replay"]


@dataclass(frozen=True)
class Arrivals:
    """An arrival process of ``rate_rps`` requests per second."""

    rate_rps: float
    kind: str
    """constant, poisson or gamma (ARRIVALS)."""
    burstiness: float = 1.0
    """The gamma gaps' shape; poisson is gamma with burstiness 1."""

    def offsets_s(self, seed: int) -> Iterator[float]:
        """Endless due times in seconds from the start, the first at 0; the same for the same seed."""
        rng = random.Random(seed)
        shape = 1.0 if self.kind == "poisson" else self.burstiness
        count, due_s = 0, 0.0
        while True:
            yield due_s
            count += 1
            if self.kind == "constant":
                due_s = count / self.rate_rps  # not a running sum: no drift over a long run
            else:
                due_s += rng.gammavariate(shape, 1.0 / (self.rate_rps * shape))


@dataclass(frozen=True)
class Replay:
    """A trace's schedule: its requests' times after its first, ``speed`` times faster."""

    times_s: tuple[float, ...]
    speed: float = 1.0

    def offsets_s(self, seed: int, skip: int = 0) -> Iterator[float]:
        """The due times in seconds from the start of row ``skip`` on, that row's at 0 (``seed`` unused: a trace is its
        own schedule)."""
        first = self.times_s[skip] if skip < len(self.times_s) else 0.0
        return ((t - first) / self.speed for t in self.times_s[skip:])

    @property
    def rate_rps(self) -> float:
        """The schedule's mean rate in requests per second: its rows over its span (0 for fewer than two rows)."""
        span_s = (self.times_s[-1] - self.times_s[0]) / self.speed if len(self.times_s) > 1 else 0.0
        return (len(self.times_s) - 1) / span_s if span_s > 0 else 0.0
