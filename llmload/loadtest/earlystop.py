"""EARLY_STOP=on: look at the measured records EARLY_STOP_LOOKS times and end the run once an SLO surely fails."""

from __future__ import annotations

from typing import Any, Callable

import gevent

from llmload.results.slo import EARLY_STOP_LOOKS, certain_failure

__all__ = ["watch_slos"]


def watch_slos(session: Any, duration_s: float, stop: Callable[[], None]) -> gevent.Greenlet:
    """A greenlet that looks every ``duration_s`` / EARLY_STOP_LOOKS and, on a certain failure, notes why and calls ``stop``."""

    def watch() -> None:
        for _ in range(EARLY_STOP_LOOKS):
            if session.stopping.wait(timeout=duration_s / EARLY_STOP_LOOKS):
                return
            reason = certain_failure(session.slos, session.measured)
            if reason is not None:
                session.stopped_early = reason
                stop()
                return

    return gevent.spawn(watch)
