"""Waking RATE's and TRACE's dispatcher at a due instant to within tens of microseconds, not a millisecond.

gevent's timers run on libev's epoll backend, which waits in whole milliseconds rounded up (and at least one): a
send due at t went out 0.7 ms late at the median, 2.7 ms at the p99, before anything else delayed it
(bench/trace_bench.py). A Linux timerfd armed at the due instant on CLOCK_MONOTONIC, the clock of
``time.monotonic()``, makes epoll return the moment the kernel's high-resolution timer fires. Where there is no
timerfd (not Linux), gevent's own timer waits.
"""

from __future__ import annotations

import ctypes
import os
import time

import gevent
from gevent.event import Event

__all__ = ["DueWaker", "make_due_waker"]

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
_ALREADY_PAST = (0, 1)  # an absolute instant long gone: the timer fires at once


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL | None:
    libc = ctypes.CDLL(None, use_errno=True)  # the symbols this process has loaded: the C library's among them
    return libc if hasattr(libc, "timerfd_create") else None


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

    def __init__(self, stopping: Event, libc: ctypes.CDLL) -> None:
        super().__init__(stopping)
        self._libc = libc
        self._fd = libc.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._hub = gevent.get_hub()
        self._watcher = self._hub.loop.io(self._fd, 1)
        self._setting = _Itimerspec()
        stopping.rawlink(self._fire_now)

    def wait_until(self, due_s: float) -> bool:
        while not self.stopping.is_set() and time.monotonic() < due_s:
            seconds = int(due_s)
            self._arm(seconds, int((due_s - seconds) * 1e9))
            self._hub.wait(self._watcher)
            self._drain()
        return super().wait_until(due_s)  # due: yield once to the requests spawned before, as behind schedule

    def _arm(self, seconds: int, nanoseconds: int) -> None:
        self._setting.it_value.tv_sec, self._setting.it_value.tv_nsec = seconds, nanoseconds
        if self._libc.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._setting), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def _drain(self) -> None:
        try:
            os.read(self._fd, 8)  # the expiry count: read so the next wait blocks until the next expiry
        except BlockingIOError:
            pass

    def _fire_now(self, _stopping: Event) -> None:
        self._arm(*_ALREADY_PAST)

    def close(self) -> None:
        self.stopping.unlink(self._fire_now)
        self._watcher.close()
        os.close(self._fd)


def make_due_waker(stopping: Event) -> DueWaker:
    """The most exact waker this platform has: a timerfd on Linux, else gevent's timer."""
    libc = _libc()
    return _TimerfdWaker(stopping, libc) if libc is not None else DueWaker(stopping)
