"""Waking RATE's and TRACE's dispatcher at a due instant to within tens of microseconds, not a millisecond.

gevent's timers run on libev's epoll backend, which waits in whole milliseconds rounded up (and at least one): a
send due at t went out 0.7 ms late at the median, 2.7 ms at the p99, before anything else delayed it
(bench/trace_bench.py). A Linux timerfd armed at the due instant on CLOCK_MONOTONIC, the clock of
``time.monotonic()``, makes epoll return the moment the kernel's high-resolution timer fires. Where there is no
timerfd (not Linux), gevent's own timer waits.
"""

from __future__ import annotations

import time

import gevent
from gevent.event import Event

from llmload.system.timerfd import TimerFd, open_timerfd

__all__ = ["DueWaker", "make_due_waker"]


class DueWaker:
    """Waits until a monotonic instant or until ``stopping`` is set, whichever comes first (gevent's timer)."""

    def __init__(self, stopping: Event) -> None:
        self.stopping = stopping

    def wait_until(self, due_s: float) -> bool:
        """Return at ``due_s`` (``time.monotonic()``'s clock); True if the test started stopping first.

        Behind schedule it still yields once, so the requests already spawned start before the next is due.
        """
        delay_s = due_s - time.monotonic()
        if delay_s > 0:
            return self.stopping.wait(timeout=delay_s)
        gevent.sleep(0)
        return self.stopping.is_set()

    def close(self) -> None:
        """Release what the waker holds (nothing here)."""


class _TimerfdWaker(DueWaker):
    """A timerfd armed at each due instant, waited on by gevent's hub; ``stopping`` fires it at once."""

    def __init__(self, stopping: Event, timer: TimerFd) -> None:
        super().__init__(stopping)
        self._timer = timer
        self._hub = gevent.get_hub()
        self._watcher = self._hub.loop.io(timer.fileno(), 1)
        stopping.rawlink(self._fire_now)

    def wait_until(self, due_s: float) -> bool:
        while not self.stopping.is_set() and time.monotonic() < due_s:
            self._timer.arm_at(due_s)
            self._hub.wait(self._watcher)
            self._timer.drain()
        return super().wait_until(due_s)  # due: yield once to the requests spawned before, as behind schedule

    def _fire_now(self, _stopping: Event) -> None:
        self._timer.fire_now()

    def close(self) -> None:
        self.stopping.unlink(self._fire_now)
        self._watcher.close()
        self._timer.close()


def make_due_waker(stopping: Event) -> DueWaker:
    """The most exact waker this platform has: a timerfd on Linux, else gevent's timer."""
    timer = open_timerfd()
    return _TimerfdWaker(stopping, timer) if timer is not None else DueWaker(stopping)
