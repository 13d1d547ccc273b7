"""Where a process stands among a run's workers, and its share of a count (no Locust here: the pure parts of a run,
its draw and schedule, read it without patching the process with gevent)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Plan", "share"]


@dataclass(frozen=True)
class Plan:
    """Where this process stands: worker ``position`` of ``workers`` (0 of 1 without workers)."""

    position: int = 0
    workers: int = 1
    start_unix_s: float | None = None
    """When RATE's schedule starts on every worker (wall clock); None in one process: when its dispatcher starts."""


def share(total: int, plan: Plan) -> int:
    """This worker's part of ``total`` requests (the first ``total % workers`` take one more)."""
    return total // plan.workers + (1 if plan.position < total % plan.workers else 0)
