"""A sample's distribution and a per-request count's statistics, as every block of summary.json reports them.

Percentiles are exact (numpy's linear interpolation over every sample, as vLLM's bench serve computes them), never
Locust's rounded histogram buckets; each median and percentile has its 95% interval beside it (intervals.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from llmload.results.intervals import quantile_ci

__all__ = ["Distribution", "TokenStats", "distribution", "token_stats"]


@dataclass(frozen=True)
class Distribution:
    """Mean, median, p90, p99, min and max of a sample; all None when the sample is empty.

    ``<stat>_ci95`` is [lo, hi], the statistic's distribution-free 95% interval, or None when the
    sample is too small to give one (e.g. fewer than 299 samples for p99).
    """

    count: int
    mean: float | None
    median: float | None
    median_ci95: list[float] | None
    p90: float | None
    p90_ci95: list[float] | None
    p99: float | None
    p99_ci95: list[float] | None
    min: float | None
    max: float | None


@dataclass(frozen=True)
class TokenStats:
    """Total, mean, median, min and max of a per-request token count."""

    count: int
    total: int
    mean: float | None
    median: float | None
    min: int | None
    max: int | None


def distribution(values: Sequence[float], scale: float = 1.0) -> Distribution:
    """The distribution of ``values`` times ``scale`` (1000 turns seconds into ms)."""
    if len(values) == 0:
        return Distribution(0, None, None, None, None, None, None, None, None, None)
    a = np.sort(np.asarray(values, dtype=float) * scale)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return Distribution(
        count=int(a.size), mean=float(a.mean()), median=float(p50), median_ci95=quantile_ci(a, 0.5),
        p90=float(p90), p90_ci95=quantile_ci(a, 0.9), p99=float(p99), p99_ci95=quantile_ci(a, 0.99),
        min=float(a[0]), max=float(a[-1]),
    )


def token_stats(counts: Sequence[int]) -> TokenStats:
    """Statistics of per-request token counts."""
    if len(counts) == 0:
        return TokenStats(0, 0, None, None, None, None)
    a = np.asarray(counts, dtype=np.int64)
    return TokenStats(
        count=int(a.size), total=int(a.sum()), mean=float(a.mean()), median=float(np.median(a)),
        min=int(a.min()), max=int(a.max()),
    )
