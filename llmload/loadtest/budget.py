"""WARMUP_REQUESTS and REQUESTS: which request is a warm-up, and when the last one ends the test."""

from __future__ import annotations

from typing import Callable

import gevent
from gevent.event import Event

__all__ = ["RequestBudget"]


class RequestBudget:
    """WARMUP_REQUESTS, then REQUESTS: tickets for users, and the end of the test when all are done."""

    def __init__(self, warmups: int, measured: int, on_all_done: Callable[[], None],
                 on_warmed_up: Callable[[], None] | None = None) -> None:
        """``on_warmed_up`` replaces setting ``warmed_up`` (a worker waits for the master's word)."""
        self.warmups = warmups
        self.measured = measured  # 0: no count, DURATION ends the test
        self._issued = 0
        self._warmups_left = warmups
        self._measured_done = 0
        self._on_all_done = on_all_done
        self.warmed_up = Event()
        self._on_warmed_up = on_warmed_up or self.warmed_up.set
        if not warmups:
            self._on_warmed_up()

    def take(self) -> int | None:
        """The number of the next request to send, or None once every request is out."""
        if self.measured and self._issued >= self.warmups + self.measured:
            return None
        self._issued += 1
        return self._issued - 1

    def is_warmup(self, ticket: int) -> bool:
        return ticket < self.warmups

    def done(self, ticket: int) -> None:
        if self.is_warmup(ticket):
            self._warmups_left -= 1
            if not self._warmups_left:
                self._on_warmed_up()
            return
        self._measured_done += 1
        if self.measured and self._measured_done == self.measured:
            gevent.spawn(self._on_all_done)
