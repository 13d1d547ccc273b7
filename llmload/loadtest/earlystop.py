"""EARLY_STOP=on: look at the measured records EARLY_STOP_LOOKS times and end the run once an SLO surely fails."""

from __future__ import annotations

from typing import Callable, Sequence

import gevent
from gevent.event import Event

from llmload.results.records import RequestRecord
from llmload.results.slo import EARLY_STOP_LOOKS, Slo, certain_failure

__all__ = ["watch_slos"]


def watch_slos(slos: Sequence[Slo], measured: Sequence[RequestRecord], stopping: Event, duration_s: float,
               stop: Callable[[str], None]) -> gevent.Greenlet:
    """A greenlet that looks at ``measured`` (a list the run keeps filling) every ``duration_s`` / EARLY_STOP_LOOKS
    until ``stopping`` is set and, on a certain failure, calls ``stop`` with why."""

    def watch() -> None:
        for _ in range(EARLY_STOP_LOOKS):
            if stopping.wait(timeout=duration_s / EARLY_STOP_LOOKS):
                return
            reason = certain_failure(slos, measured)
            if reason is not None:
                stop(reason)
                return

    return gevent.spawn(watch)
