"""Pure 95% confidence intervals: of a percentile from order statistics, of a rate from batch means, of a share.

A percentile's interval is distribution-free: the number of samples below the true q-quantile is
Binomial(n, q), so two order statistics whose ranks hold it with probability >= 95% bracket the
quantile (exact binomial, no resampling). A rate's interval comes from the rates of equal time
windows (batch means, Student's t). A share's (k of n requests) is Wilson's score interval, which stays
inside [0, 1] and keeps its coverage near 0 and 1, where the normal approximation's does not. Too few samples
give None, never an invented interval.
Samples are taken as independent: for pooled ITL gaps (many per stream) the interval is too narrow.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["CONFIDENCE", "MIN_BATCHES", "MAX_BATCHES", "quantile_ranks", "quantile_ci", "batch_means_ci", "batches_for",
           "proportion_ci"]

CONFIDENCE = 0.95
MIN_BATCHES = 5
"""Fewer windows than this give no rate interval (the spread of 4 numbers says little)."""
MAX_BATCHES = 20
_Z_975 = 1.959963984540054
"""The standard normal's two-sided 97.5% point (CONFIDENCE's)."""

# Student's t two-sided 97.5% points for 4..19 degrees of freedom (MIN_BATCHES-1 .. MAX_BATCHES-1).
_T_975 = {
    4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179,
    13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
}


def _binomial_window(n: int, q: float) -> tuple[int, np.ndarray]:
    """(k0, cdf) with cdf[i] = P(B <= k0 + i) for B ~ Binomial(n, q), over every k with non-negligible mass."""
    spread = 12.0 * math.sqrt(n * q * (1.0 - q)) + 12.0
    k0 = max(0, int(n * q - spread))
    k1 = min(n, int(n * q + spread) + 1)
    k = np.arange(k0, k1 + 1, dtype=float)
    log_pmf = (math.lgamma(n + 1) - np.array([math.lgamma(x + 1) + math.lgamma(n - x + 1) for x in k])
               + k * math.log(q) + (n - k) * math.log1p(-q))
    return k0, np.cumsum(np.exp(log_pmf))


def quantile_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """1-based ranks (l, u) with P(X_(l) <= q-quantile <= X_(u)) >= confidence; None when n is too small.

    Of the qualifying pairs the one with the fewest ranks between them is taken, then the one whose
    two tails are the most equal, so coverage stays close to ``confidence`` rather than far above it.
    """
    if n < 2 or not 0.0 < q < 1.0:
        return None
    k0, cdf = _binomial_window(n, q)

    def below(rank: int) -> float:  # P(B <= rank - 1): fewer than `rank` samples lie below the quantile
        i = rank - 1 - k0
        return 0.0 if i < 0 else 1.0 if i >= cdf.size else float(cdf[i])

    best: tuple[int, float, int, int] | None = None
    for low in range(max(1, k0), min(n, k0 + cdf.size) + 1):
        lower_tail = below(low)
        if lower_tail > 1.0 - confidence:
            break
        # the smallest upper rank u with P(low <= B <= u - 1) >= confidence
        i = int(np.searchsorted(cdf, lower_tail + confidence - 1e-12))
        up = k0 + i + 1
        if up > n or i >= cdf.size:
            continue
        upper_tail = 1.0 - below(up)
        key = (up - low, abs(lower_tail - upper_tail), low, up)
        if best is None or key < best:
            best = key
    return None if best is None else (best[2], best[3])


def quantile_ci(sorted_values: Sequence[float] | np.ndarray, q: float,
                confidence: float = CONFIDENCE) -> list[float] | None:
    """[lo, hi] bracketing the q-quantile (q in 0..1) of ascending ``sorted_values``; None if too few."""
    ranks = quantile_ranks(len(sorted_values), q, confidence)
    if ranks is None:
        return None
    return [float(sorted_values[ranks[0] - 1]), float(sorted_values[ranks[1] - 1])]


def batches_for(duration_s: float, correlation_s: float) -> int:
    """How many equal windows a run is cut into: each at least ``correlation_s`` long, at most MAX_BATCHES."""
    if duration_s <= 0:
        return 0
    if correlation_s <= 0:
        return MAX_BATCHES
    return min(MAX_BATCHES, int(duration_s // correlation_s))


def batch_means_ci(event_times_s: Sequence[float], weights: Sequence[float], start_s: float, end_s: float,
                   batches: int) -> list[float] | None:
    """[lo, hi] of a rate (sum of ``weights`` per second) from its rate in ``batches`` equal windows.

    The windows tile [start_s, end_s], so their mean rate equals the run's rate. None with fewer than
    MIN_BATCHES windows. The lower bound is clipped at 0 (a rate is never negative).
    """
    if batches < MIN_BATCHES or end_s <= start_s:
        return None
    batches = min(batches, MAX_BATCHES)
    width_s = (end_s - start_s) / batches
    index = np.clip(((np.asarray(event_times_s, dtype=float) - start_s) // width_s).astype(int), 0, batches - 1)
    rates = np.bincount(index, weights=np.asarray(weights, dtype=float), minlength=batches) / width_s
    half = _T_975[batches - 1] * float(rates.std(ddof=1)) / math.sqrt(batches)
    mean = float(rates.mean())
    return [max(0.0, mean - half), mean + half]


def proportion_ci(successes: int, n: int) -> list[float] | None:
    """[lo, hi] of a binomial share ``successes / n`` at CONFIDENCE (Wilson's score interval); None when n is 0."""
    if n <= 0:
        return None
    share, z2 = successes / n, _Z_975 * _Z_975
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z_975 * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # at a share of 0 or 1 the bound on that side is exactly it (the sum above rounds to 1 - 1e-16)
    return [0.0 if successes == 0 else max(0.0, centre - half), 1.0 if successes == n else min(1.0, centre + half)]
