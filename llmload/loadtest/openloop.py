"""RATE and TRACE: one dispatcher greenlet sends every request at its scheduled time, whatever the server does.

Each arrival runs in its own greenlet, so slow answers never delay the next send; MAX_CONCURRENCY
caps the requests in flight (a request due while every slot is busy waits, and its record says how long).
With TURNS an arrival starts a conversation: its greenlet sends each later turn THINK_TIME after the answer
before it (a tool round at once), until its turns, REQUESTS or the test run out. Warm-ups (single turns) go first on the same
schedule; the measured schedule starts once they have all finished. With workers, each sends its own
share of one schedule from a common instant (see distributed.py).
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable

from gevent.lock import BoundedSemaphore
from gevent.pool import Group
from locust.exception import StopUser

from llmload.client.measure import ChatClient
from llmload.loadtest.session import RunSession
from llmload.loadtest.wake import make_due_waker
from llmload.promptsets.conversation import Conversation
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


def run_open_loop(session: RunSession, rng: random.Random) -> None:
    """Keep RATE's (or TRACE's) schedule until the test stops or REQUESTS are out, then wait for those in flight.

    Every request goes through the session's pipeline; ``rng`` draws the prompts and waits (the dispatching
    ChatUser's).
    """
    schedule, draw, send = session.schedule, session.draw, session.pipeline.send
    if schedule.dispatcher_started:
        raise StopUser()
    schedule.dispatcher_started = True
    slots = BoundedSemaphore(schedule.max_concurrency) if schedule.max_concurrency else None
    clients = _ClientPool(session.new_client)
    in_flight = Group()
    waker = make_due_waker(schedule.stopping)

    def send_when_slot(ticket: int, conversation: Conversation, effort: str, fields: dict[str, Any]) -> RequestRecord:
        slot_wait_s = 0.0
        if slots is not None:
            waited_from_s = time.monotonic()
            slots.acquire()
            slot_wait_s = time.monotonic() - waited_from_s
        client = clients.take()
        try:
            return send(ticket, client, conversation, effort, {**fields, "slot_wait_s": slot_wait_s})
        finally:
            clients.give(client)
            if slots is not None:
                slots.release()

    def converse(ticket: int, due_s: float, conversation: Conversation, effort: str) -> None:
        """One arrival: its request, then its conversation's later turns, each THINK_TIME after the answer before it."""
        record = send_when_slot(ticket, conversation, effort, {"scheduled_monotonic_s": due_s})
        while record.ok and not conversation.done:
            think_s = 0.0 if conversation.mid_turn else draw.turn_plan.think_time_s(rng)  # a tool round goes at once
            if schedule.stopping.wait(timeout=think_s):
                return
            ticket = session.budget.take()
            if ticket is None:
                return
            record = send_when_slot(ticket, conversation, effort, {})

    try:
        start_s, offsets, measuring = schedule.start_s(), schedule.offsets(), False
        while (ticket := session.budget.take()) is not None:
            warmup = session.budget.is_warmup(ticket)
            if not measuring and not warmup:
                session.budget.warmed_up.wait()
                start_s, offsets, measuring = schedule.start_s(), schedule.offsets(measured=True), True
            number, offset_s = next(offsets, (None, None))
            if number is None:
                break  # a trace's warm-ups outnumber its rows
            due_s = start_s + offset_s
            # Built before the wait: at the due instant only the request starts.
            conversation, effort = draw.new_conversation(rng, warmup, session.arrival_prompt(number))
            if waker.wait_until(due_s):
                break
            in_flight.spawn(converse, ticket, due_s, conversation, effort)
        in_flight.join()
    finally:
        in_flight.kill(block=True)  # stopped by force: requests in flight are recorded as interrupted
        clients.close()
        waker.close()
