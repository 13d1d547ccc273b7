"""What a run does about failures: each user waits after one (FAILURE_BACKOFF), and the run stops
when too many fail (MAX_FAIL_RATIO).

Without the wait a closed-loop user retries a refused connection at once: a 3 s server restart
made 16,000 failures, and Locust's table read 800 req/s at a 1 ms median.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

__all__ = ["FailureBackoff", "FailRatioGuard", "JUDGED_FROM_REQUESTS"]

JUDGED_FROM_REQUESTS = 10
"""MAX_FAIL_RATIO is judged once this many measured requests have finished, not on the first one."""


class FailureBackoff:
    """One user's wait before its next request: none after a success; after the n-th failure in a
    row, ``first_s * 2**(n-1)``, at most ``max_s``."""

    def __init__(self, first_s: float, max_s: float) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.failures_in_a_row = 0

    def after(self, ok: bool) -> float:
        """Seconds to wait after a request that succeeded (``ok``) or failed."""
        self.failures_in_a_row = 0 if ok else self.failures_in_a_row + 1
        if ok or not self.first_s:
            return 0.0
        return min(self.max_s, self.first_s * 2.0 ** min(self.failures_in_a_row - 1, 60))


class FailRatioGuard:
    """Counts a run's measured requests; calls ``stop(line)`` once when more than ``limit`` of them failed."""

    def __init__(self, limit: float, stop: Callable[[str], None]) -> None:
        self.limit = limit
        self._stop = stop
        self.ok = 0
        self.failed: Counter[str] = Counter()
        self.tripped = False

    def add(self, error: str | None) -> None:
        """One finished request: ``error`` is its category, None when it succeeded; interrupted ones do not count."""
        if error == "interrupted":
            return
        if error is None:
            self.ok += 1
        else:
            self.failed[error] += 1
        failed = sum(self.failed.values())
        total = self.ok + failed
        if self.tripped or not self.limit or total < JUDGED_FROM_REQUESTS or failed / total <= self.limit:
            return
        self.tripped = True
        most, count = self.failed.most_common(1)[0]
        self._stop(f"MAX_FAIL_RATIO={self.limit:g} passed: {failed} of {total} requests failed ({failed / total:.0%}; "
                   f"most often {most}, {count}); the run stops. Fix the server or raise MAX_FAIL_RATIO (0: never stop)")
