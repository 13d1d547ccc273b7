"""A mergeable histogram of small durations with log-spaced buckets, for counts too large to keep.

Bucket edges grow by 2**(1/16) (4.4% apart) from 1 µs; quantiles are the geometric middle of the
bucket they fall in, so within 2.2% of the exact value. The maximum is kept exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

__all__ = ["LogHistogram", "upper_edge_s", "bucket_of"]

_BUCKETS_PER_OCTAVE = 16
_FLOOR_S = 1e-6
_BUCKETS = _BUCKETS_PER_OCTAVE * 40 + 1  # 1 µs to about 12 days
_VECTOR_FROM = 48
"""add_all takes numpy's path from this many values on (below it the plain loop is faster)."""


def upper_edge_s(index: int) -> float:
    """The upper edge of bucket ``index`` in seconds: it holds values from the previous edge up to this one."""
    return _FLOOR_S * 2 ** (index / _BUCKETS_PER_OCTAVE)


def bucket_of(value_s: float) -> int:
    """The index of the bucket ``value_s`` falls in (0: under 1 µs)."""
    if value_s < _FLOOR_S:
        return 0
    return min(_BUCKETS - 1, int(math.log2(value_s / _FLOOR_S) * _BUCKETS_PER_OCTAVE) + 1)


@dataclass
class LogHistogram:
    """Counts of durations in seconds; bucket 0 holds everything under 1 µs."""

    counts: list[int] = field(default_factory=lambda: [0] * _BUCKETS)
    count: int = 0
    max_s: float = 0.0

    def add(self, value_s: float) -> None:
        self.counts[bucket_of(value_s)] += 1
        self.count += 1
        if value_s > self.max_s:
            self.max_s = value_s

    def add_all(self, values_s: Sequence[float]) -> None:
        """``add`` each value: the same buckets, at a fraction of the cost for a long list (a stream's gaps)."""
        n = len(values_s)
        if n < _VECTOR_FROM:
            for value_s in values_s:
                self.add(value_s)
            return
        values = np.asarray(values_s, dtype=float)
        with np.errstate(divide="ignore"):  # log2(0) is -inf: bucket 0, as under the floor
            octaves = np.log2(values / _FLOOR_S)
        indices = np.clip(np.floor(octaves * _BUCKETS_PER_OCTAVE), -1, _BUCKETS - 2).astype(np.int64) + 1
        per_bucket = np.bincount(indices, minlength=_BUCKETS)
        filled = np.flatnonzero(per_bucket)
        counts = self.counts
        for index, k in zip(filled.tolist(), per_bucket[filled].tolist()):
            counts[index] += k
        self.count += n
        self.max_s = max(self.max_s, float(values.max()))

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
