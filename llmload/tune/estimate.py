"""A configuration's objective with its 95% interval, which leads, and whether it beats the baseline beyond noise.

The objectives (OBJECTIVE):

    capacity     users (or rate) at the SLO: the capacity search's answer and its interval (higher is better)
    throughput   output tokens/s at the workload as given: a cell's, or the geometric mean of a scenario's cells
                 (each weighs alike whatever its scale), its interval from the cells' own (higher is better)
    cost         USD per million output tokens at the SLO, at PRICE: the capacity point's (lower is better)

A difference from the baseline is beyond the run-to-run spread when its interval excludes no change: for a rate or a
cost the ratio's interval, from the two estimates' intervals in log space (independent runs: variances add); for a
capacity the interval of the difference of the two answers' intervals. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = ["OBJECTIVES", "Estimate", "Difference", "geometric_mean", "difference", "leader", "overlaps", "Z_95"]

OBJECTIVES = ("capacity", "throughput", "cost")
Z_95 = 1.959963984540054
_HIGHER = {"capacity": True, "throughput": True, "cost": False}


@dataclass(frozen=True)
class Estimate:
    """An objective's value and 95% interval; ``high`` None: no upper bound (a capacity search that never failed)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    higher_is_better: bool = True

    @classmethod
    def of(cls, objective: str, value: float | None, ci: Sequence[float | None] | None) -> "Estimate":
        """``ci`` None (a run too short for an interval): no bounds, so it overlaps every other, never exact."""
        low, high = (ci[0], ci[1]) if ci else (None, None)
        return cls(value, low, high, _HIGHER[objective])

    @property
    def known(self) -> bool:
        return self.value is not None

    def better_than(self, other: "Estimate") -> bool:
        assert self.value is not None and other.value is not None
        return self.value > other.value if self.higher_is_better else self.value < other.value

    def log_se(self) -> float | None:
        """The standard error of log(value), from the interval (a symmetric interval in log space); None unknown."""
        if not self.value or self.low is None or self.high is None or self.low <= 0 or self.high <= 0:
            return None
        return (math.log(self.high) - math.log(self.low)) / (2 * Z_95)


def geometric_mean(estimates: Sequence[Estimate]) -> Estimate:
    """The geometric mean of positive estimates, its interval from theirs in log space (independent cells)."""
    known = [e for e in estimates if e.value]
    if not known or len(known) != len(estimates):
        return Estimate(None, higher_is_better=estimates[0].higher_is_better if estimates else True)
    log_mean = sum(math.log(e.value or 1.0) for e in known) / len(known)
    ses = [e.log_se() for e in known]
    value = math.exp(log_mean)
    if any(se is None for se in ses):
        return Estimate(value, None, None, known[0].higher_is_better)
    se = math.sqrt(sum((s or 0.0) ** 2 for s in ses)) / len(known)
    return Estimate(value, math.exp(log_mean - Z_95 * se), math.exp(log_mean + Z_95 * se), known[0].higher_is_better)


@dataclass(frozen=True)
class Difference:
    """A configuration against the baseline: change in percent (better is positive) with its 95% interval."""

    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    beyond_noise: bool | None
    """The interval excludes no change; None when an interval is missing."""

    def text(self) -> str:
        if self.change_pct is None:
            return "n/a"
        interval = "" if self.low_pct is None or self.high_pct is None else f" [{self.low_pct:+.1f}, {self.high_pct:+.1f}]"
        verdict = "" if self.beyond_noise is None else " beyond noise" if self.beyond_noise else " within noise"
        return f"{self.change_pct:+.1f}%{interval}{verdict}"


def difference(estimate: Estimate, baseline: Estimate, additive: bool = False) -> Difference:
    """``estimate`` against ``baseline``, a positive change meaning better (for a cost: cheaper). ``additive``: a
    capacity's interval is of the difference of the answers (the search's intervals are not log-symmetric)."""
    if estimate.value is None or baseline.value is None or baseline.value == 0:
        return Difference(None, None, None, None)
    sign = 1.0 if estimate.higher_is_better else -1.0
    change = sign * (estimate.value / baseline.value - 1.0) * 100.0
    if additive:
        low = None if estimate.low is None or baseline.high is None else (estimate.low - baseline.high) / baseline.value * 100.0
        high = None if estimate.high is None or baseline.low is None else (estimate.high - baseline.low) / baseline.value * 100.0
        beyond = (low is not None and low > 0) or (high is not None and high < 0)
        return Difference(change, low, high, beyond if low is not None or high is not None else None)
    se_a, se_b = estimate.log_se(), baseline.log_se()
    if se_a is None or se_b is None:
        return Difference(change, None, None, None)
    log_ratio = math.log(estimate.value / baseline.value)
    half = Z_95 * math.sqrt(se_a ** 2 + se_b ** 2)
    ends = sorted(sign * (math.exp(log_ratio + d) - 1.0) * 100.0 for d in (-half, half))
    return Difference(change, ends[0], ends[1], ends[0] > 0 or ends[1] < 0)


def overlaps(a: Estimate, b: Estimate) -> bool:
    """Whether two estimates' intervals overlap (a missing bound overlaps everything beyond it)."""
    a_low = a.low if a.low is not None else -math.inf
    a_high = a.high if a.high is not None else math.inf
    b_low = b.low if b.low is not None else -math.inf
    b_high = b.high if b.high is not None else math.inf
    return a_low <= b_high and b_low <= a_high


def leader(estimates: Sequence[Estimate]) -> int | None:
    """The index of the best known estimate; None when none is known."""
    best: int | None = None
    for i, e in enumerate(estimates):
        if e.known and (best is None or e.better_than(estimates[best])):
            best = i
    return best
