"""Event loop whose timers fire at most 1 ms late (the stdlib's can be 2 ms late)."""

from __future__ import annotations

import asyncio
import math
import select
import selectors


class PreciseEpollSelector(selectors.EpollSelector):
    """Epoll selector that rounds the timeout up to a whole millisecond exactly once.

    The stdlib rounds up to a millisecond, then CPython rounds the resulting float up
    again (9 * 1e-3 s becomes 10 ms), so asyncio timers fire up to ~2 ms late. Rounding
    down instead would wake early and make asyncio busy-poll until the timer is due,
    which burns a core when timers are dense (1,000 streams), so we round up once.
    """

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """Same as EpollSelector.select except for the timeout rounding."""
        if timeout is None:
            wait_s = -1.0
        elif timeout <= 0:
            wait_s = 0.0
        else:
            whole_ms = math.ceil(timeout * 1e3)
            # Half a millisecond below whole_ms: CPython's rounding up then lands exactly on it.
            wait_s = (whole_ms - 0.5) * 1e-3
        max_ev = max(len(self._fd_to_key), 1)  # epoll needs maxevents > 0
        ready: list[tuple[selectors.SelectorKey, int]] = []
        try:
            fd_event_list = self._selector.poll(wait_s, max_ev)  # type: ignore[attr-defined]
        except InterruptedError:
            return ready
        for fd, event in fd_event_list:
            events = 0
            if event & ~select.EPOLLIN:
                events |= selectors.EVENT_WRITE
            if event & ~select.EPOLLOUT:
                events |= selectors.EVENT_READ
            key = self._key_from_fd(fd)  # type: ignore[attr-defined]
            if key:
                ready.append((key, events & key.events))
        return ready


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A selector event loop using PreciseEpollSelector where epoll exists (Linux)."""
    if hasattr(selectors, "EpollSelector"):
        return asyncio.SelectorEventLoop(PreciseEpollSelector())
    return asyncio.new_event_loop()
