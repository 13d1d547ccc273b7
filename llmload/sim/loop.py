"""Event loop whose timers fire within tens of microseconds of their instant, not up to a millisecond late.

epoll waits in whole milliseconds, so an asyncio timer (the next token's due time) fires up to 1 ms late, and at a
SPEEDUP whose steps take less than a millisecond the built-in target sent several steps' tokens in one burst: the
rehearsal's inter-token gaps came out as a few of 1 ms and many of none. Where Linux has a timerfd, the selector
arms it at the timer's instant in the same epoll set and waits on it with no timeout of its own. Elsewhere it rounds
the timeout up to a whole millisecond once (the stdlib rounds twice: timers up to 2 ms late); rounding down would
wake early and make asyncio busy-poll until the timer is due, which burns a core when timers are dense.
"""

from __future__ import annotations

import asyncio
import math
import select
import selectors
import time

from llmload.system.timerfd import open_timerfd

__all__ = ["PreciseEpollSelector", "PreciseEventLoop", "new_event_loop"]

# None where there is no epoll, or where gevent patched selectors before this import (a process that imported
# Locust, which never runs this loop): then new_event_loop gives asyncio's own.
_EPOLL_SELECTOR = getattr(selectors, "EpollSelector", None)


class PreciseEpollSelector(_EPOLL_SELECTOR or selectors.DefaultSelector):  # type: ignore[misc]
    """Epoll selector that wakes at its timeout's instant (timerfd), else rounds the timeout up to a millisecond once."""

    def __init__(self) -> None:
        super().__init__()
        self._timer = open_timerfd()
        self.exact = self._timer is not None
        """Timers wake at their instant (a timerfd), not up to a millisecond late."""
        if self._timer is not None:  # in the epoll set itself, not a selector key: select() never reports it
            self._selector.register(self._timer.fileno(), select.EPOLLIN)  # type: ignore[attr-defined]

    def _wait_s(self, timeout: float | None) -> float:
        """What epoll is asked to wait, in seconds (-1: until an event, the timer's included)."""
        if timeout is None:
            return -1.0
        if timeout <= 0:
            return 0.0
        if self._timer is not None:
            self._timer.arm_at(time.monotonic() + timeout)
            return -1.0
        # Half a millisecond below the whole millisecond above: CPython's rounding up then lands exactly on it.
        return (math.ceil(timeout * 1e3) - 0.5) * 1e-3

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """Same as EpollSelector.select except for how long it waits."""
        wait_s = self._wait_s(timeout)
        max_ev = len(self._fd_to_key) + 1  # epoll needs maxevents > 0; one more for the timer
        ready: list[tuple[selectors.SelectorKey, int]] = []
        try:
            fd_event_list = self._selector.poll(wait_s, max_ev)  # type: ignore[attr-defined]
        except InterruptedError:
            return ready
        for fd, event in fd_event_list:
            key = self._key_from_fd(fd)  # type: ignore[attr-defined]
            if key is None:  # the timer: it fired (or an armed instant from an earlier wait passed)
                if self._timer is not None and fd == self._timer.fileno():
                    self._timer.drain()
                continue
            events = 0
            if event & ~select.EPOLLIN:
                events |= selectors.EVENT_WRITE
            if event & ~select.EPOLLOUT:
                events |= selectors.EVENT_READ
            ready.append((key, events & key.events))
        return ready

    def close(self) -> None:
        if self._timer is not None:
            self._timer.close()
            self._timer = None
        super().close()


class PreciseEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop on a PreciseEpollSelector; ``timers_exact`` says whether its timers wake at their instant
    (the engine's token sender reads it: sim/engine.py's send_window_s)."""

    def __init__(self) -> None:
        selector = PreciseEpollSelector()
        super().__init__(selector)
        self.timers_exact = selector.exact


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A PreciseEventLoop where epoll exists (Linux), else asyncio's own."""
    return PreciseEventLoop() if _EPOLL_SELECTOR is not None else asyncio.new_event_loop()
