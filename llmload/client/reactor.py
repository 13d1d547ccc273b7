"""One reader for every stream in flight in a process: the sockets' events are read in batches, off the users.

Greenlet per stream, as a plain blocking client would have it, costs a greenlet switch, an event-loop
watcher started and stopped and a gevent Timeout per read, and one failed ``recv`` before every wait:
when a server's engine step lands N streams' events at once, the process spends most of its time
switching, and the last of the N sockets is read late. Here each stream's socket keeps one
level-triggered watcher for the whole response; its callback only queues the stream, and one greenlet
(the reader) drains the queue, reading each socket once and feeding the response to its parser. The
user's greenlet sleeps for the whole response and wakes once, when it is complete.

REQUEST_TIMEOUT ("no data for N s") is kept per response from the time of its last read, checked
when the user's one wait runs out, so no timer is set per read.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import gevent
from gevent.event import AsyncResult

__all__ = ["Reactor", "process_reactor", "IdleTimeout"]

BATCH = 64
"""Responses read in one turn of the reader before every other greenlet and timer gets its turn: about 1 ms."""
OnReadable = Callable[[], "float | None"]
"""Reads what the socket holds and feeds it on; the response's end time once it is complete, else None."""


class IdleTimeout(Exception):
    """No data came for the response's whole idle timeout."""


class _Response:
    __slots__ = ("on_readable", "result", "queued", "closed", "last_read_s")

    def __init__(self, on_readable: OnReadable) -> None:
        self.on_readable = on_readable
        self.result = AsyncResult()
        self.queued = False
        self.closed = False
        self.last_read_s = time.monotonic()


class Reactor:
    """Reads the responses of this process's streams from one greenlet (see the module's docstring)."""

    def __init__(self) -> None:
        self._hub = gevent.get_hub()
        self._loop = self._hub.loop
        self._queue: list[_Response] = []
        self._reader = gevent.spawn(self._read_forever)
        self._asleep = False

    @property
    def alive(self) -> bool:
        return not self._reader.dead

    def serve(self, fileno: int, on_readable: OnReadable, idle_timeout_s: float) -> float:
        """Block the calling greenlet until ``on_readable`` says the response on ``fileno`` is complete; its end time.

        Raises what ``on_readable`` raised, or IdleTimeout after ``idle_timeout_s`` without data.
        """
        response = _Response(on_readable)
        watcher = self._loop.io(fileno, 1)
        watcher.start(self._on_ready, response)
        try:
            while True:
                try:
                    return response.result.get(timeout=max(0.0, response.last_read_s + idle_timeout_s - time.monotonic()))
                except gevent.Timeout:
                    if time.monotonic() - response.last_read_s >= idle_timeout_s:
                        raise IdleTimeout() from None
        finally:
            response.closed = True
            watcher.stop()
            watcher.close()

    def _on_ready(self, response: _Response) -> None:
        """The watcher's callback, in the hub: queue the response (once) and wake the reader."""
        if response.queued:
            return
        response.queued = True
        self._queue.append(response)
        if self._asleep:
            self._asleep = False
            self._loop.run_callback(self._reader.switch)

    def _read_forever(self) -> None:
        while True:
            if not self._queue:
                self._asleep = True
                self._hub.switch()  # until _on_ready queues a response
                continue
            queue, self._queue = self._queue[:BATCH], self._queue[BATCH:]
            now_s = time.monotonic()
            for response in queue:
                response.queued = False
                if response.closed or response.result.ready():
                    continue
                response.last_read_s = now_s
                try:
                    end_s = response.on_readable()
                except Exception as e:  # the response's failure, delivered to its user: the reader goes on
                    response.result.set_exception(e)
                else:
                    if end_s is not None:
                        response.result.set(end_s)
            if self._queue:
                gevent.sleep(0)  # more than a batch waits: let the users and the timers run before the next one


_REACTORS: dict[tuple[int, int], Reactor] = {}


def process_reactor() -> Reactor:
    """This process's (and thread's hub's) reactor, made on first use: after a fork a worker makes its own."""
    key = (os.getpid(), id(gevent.get_hub()))
    reactor = _REACTORS.get(key)
    if reactor is None or not reactor.alive:
        reactor = _REACTORS[key] = Reactor()
    return reactor
