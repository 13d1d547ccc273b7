"""RATE: one dispatcher greenlet sends every request at its scheduled time, whatever the server does.

Each request runs in its own greenlet, so slow answers never delay the next send; MAX_CONCURRENCY
caps those in flight (a request due while every slot is busy waits, and its record says how long).
Warm-ups go first on the same schedule; the measured schedule starts once they have all finished.
With workers, each sends its own share of one schedule from a common instant (see distributed.py).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import gevent
from gevent.event import Event
from gevent.lock import BoundedSemaphore
from gevent.pool import Group
from locust.exception import StopUser

from llmload.client.measure import ChatClient
from llmload.loadtest.session import RunSession
from llmload.results.records import RequestRecord

__all__ = ["run_open_loop"]


class _ClientPool:
    """Idle streaming clients, one made whenever every existing one is busy."""

    def __init__(self, make: Callable[[], ChatClient]) -> None:
        self._make = make
        self._idle: list[ChatClient] = []
        self._all: list[ChatClient] = []

    def take(self) -> ChatClient:
        if self._idle:
            return self._idle.pop()
        client = self._make()
        self._all.append(client)
        return client

    def give(self, client: ChatClient) -> None:
        self._idle.append(client)

    def close(self) -> None:
        for client in self._all:
            client.close()


def _stopped_before(due_s: float, stopping: Event) -> bool:
    """Wait until ``due_s`` (monotonic); True if the test started stopping first."""
    delay_s = due_s - time.monotonic()
    if delay_s > 0:
        return stopping.wait(timeout=delay_s)
    gevent.sleep(0)  # behind schedule: still let the requests already spawned start
    return stopping.is_set()


def run_open_loop(send: Callable[[int, ChatClient, dict[str, Any]], RequestRecord], session: RunSession) -> None:
    """Keep RATE's schedule until the test stops or REQUESTS are out, then wait for those in flight.

    ``send(ticket, client, record_fields)`` sends one request (the dispatching ChatUser's).
    """
    if session.dispatcher_started:
        raise StopUser()
    session.dispatcher_started = True
    slots = BoundedSemaphore(session.max_concurrency) if session.max_concurrency else None
    clients = _ClientPool(session.new_client)
    in_flight = Group()

    def send_when_slot(ticket: int, due_s: float) -> None:
        slot_wait_s = 0.0
        if slots is not None:
            waited_from_s = time.monotonic()
            slots.acquire()
            slot_wait_s = time.monotonic() - waited_from_s
        client = clients.take()
        try:
            send(ticket, client, {"scheduled_monotonic_s": due_s, "slot_wait_s": slot_wait_s})
        finally:
            clients.give(client)
            if slots is not None:
                slots.release()

    try:
        start_s, offsets, measuring = session.schedule_start_s(), session.schedule(), False
        while (ticket := session.budget.take()) is not None:
            if not measuring and not session.budget.is_warmup(ticket):
                session.budget.warmed_up.wait()
                start_s, offsets, measuring = session.schedule_start_s(), session.schedule(), True
            due_s = start_s + next(offsets)
            if _stopped_before(due_s, session.stopping):
                break
            in_flight.spawn(send_when_slot, ticket, due_s)
        in_flight.join()
    finally:
        in_flight.kill(block=True)  # stopped by force: requests in flight are recorded as interrupted
        clients.close()
