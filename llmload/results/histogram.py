"""A mergeable histogram of small durations with log-spaced buckets, for counts too large to keep.

Bucket edges grow by 2**(1/16) (4.4% apart) from 1 µs; quantiles are the geometric middle of the
bucket they fall in, so within 2.2% of the exact value. The maximum is kept exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LogHistogram"]

_BUCKETS_PER_OCTAVE = 16
_FLOOR_S = 1e-6
_BUCKETS = _BUCKETS_PER_OCTAVE * 40 + 1  # 1 µs to about 12 days


@dataclass
class LogHistogram:
    """Counts of durations in seconds; bucket 0 holds everything under 1 µs."""

    counts: list[int] = field(default_factory=lambda: [0] * _BUCKETS)
    count: int = 0
    max_s: float = 0.0

    def add(self, value_s: float) -> None:
        if value_s < _FLOOR_S:
            index = 0
        else:
            index = min(_BUCKETS - 1, int(math.log2(value_s / _FLOOR_S) * _BUCKETS_PER_OCTAVE) + 1)
        self.counts[index] += 1
        self.count += 1
        if value_s > self.max_s:
            self.max_s = value_s

    def merge(self, other: "LogHistogram") -> None:
        """Add another histogram's counts (another process's, for instance)."""
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.count += other.count
        self.max_s = max(self.max_s, other.max_s)

    def quantile_s(self, q: float) -> float | None:
        """The ``q`` quantile (0..1) in seconds, or None when empty."""
        if not self.count:
            return None
        if q >= 1.0:
            return self.max_s
        rank = q * self.count
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if n and seen >= rank:
                if index == 0:
                    return 0.0
                middle_s = _FLOOR_S * 2 ** ((index - 0.5) / _BUCKETS_PER_OCTAVE)
                return min(middle_s, self.max_s)
        return self.max_s

    def to_dict(self) -> dict[str, Any]:
        """Sparse form for JSON: {"count", "max_s", "buckets": {index: count}}."""
        return {"count": self.count, "max_s": self.max_s,
                "buckets": {str(i): n for i, n in enumerate(self.counts) if n}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LogHistogram":
        counts = [0] * _BUCKETS
        for index, n in data["buckets"].items():
            counts[int(index)] = n
        return cls(counts, data["count"], data["max_s"])
