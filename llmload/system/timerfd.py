"""A Linux timerfd on CLOCK_MONOTONIC, through ctypes: a file descriptor that becomes readable at a given instant.

epoll waits in whole milliseconds (gevent's libev and asyncio's selector round up), so an event loop that sleeps
until a due instant wakes up to a millisecond late. A timerfd armed at the instant, in the same poll set, wakes it
when the kernel's high-resolution timer fires: tens of microseconds. The load generator's dispatcher
(loadtest/wake.py) and the built-in target's event loop (sim/loop.py) wait on one.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["TimerFd", "open_timerfd"]

_CLOCK_MONOTONIC = 1  # the clock of time.monotonic() and asyncio's loop.time()
_TFD_TIMER_ABSTIME = 1
_ALREADY_PAST = (0, 1)  # an absolute instant long gone: the timer fires at once


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class TimerFd:
    """One non-blocking timerfd: ``arm_at`` an instant of ``time.monotonic()``'s clock, poll ``fileno()``, ``drain``."""

    __slots__ = ("_libc", "_fd", "_setting")

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._libc = libc
        self._fd = libc.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._setting = _Itimerspec()

    def fileno(self) -> int:
        return self._fd

    def arm_at(self, due_s: float) -> None:
        """Become readable at ``due_s`` (at once if it has passed); replaces any earlier instant."""
        seconds = int(due_s)
        self._arm(seconds, int((due_s - seconds) * 1e9))

    def fire_now(self) -> None:
        self._arm(*_ALREADY_PAST)

    def _arm(self, seconds: int, nanoseconds: int) -> None:
        self._setting.it_value.tv_sec, self._setting.it_value.tv_nsec = seconds, nanoseconds
        if self._libc.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._setting), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def drain(self) -> None:
        """Read the expiry count, so that a poll blocks again until the next instant."""
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            pass

    def close(self) -> None:
        os.close(self._fd)


def open_timerfd() -> TimerFd | None:
    """A new timerfd; None where the C library has none (not Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)  # the symbols this process has loaded: the C library's among them
    return TimerFd(libc) if hasattr(libc, "timerfd_create") else None
