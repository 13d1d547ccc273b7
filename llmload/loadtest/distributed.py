"""Locust's distributed mode (WORKERS=N, or a master and workers on several hosts): one run, one set of files.

Workers run the users and send every record to the master (a batch a second, then a final one with
their own load figures); only the master writes samples.jsonl and the summary. REQUESTS and
WARMUP_REQUESTS are split over the workers; the measured requests start on every worker once all
warm-ups have finished; ORDER=sequence interleaves the set over the workers. Under RATE every worker
draws the same seeded schedule and sends its arrivals position, position + workers, ... from one
start instant the master sets, so together they send exactly the one-process schedule. Messages:

    master -> worker  llmload_plan     {"position", "workers", "start_unix_s"} before the users start
    master -> all     llmload_go       {"start_unix_s"}: every warm-up is done, the measured schedule starts then
    master -> all     llmload_stop     the test is ending: stop the users, send the final batch
    worker -> master  llmload_records  {"lines": samples.jsonl bytes, "final": bool, "load": ProcessLoad or None}
    worker -> master  llmload_warmed   this worker's warm-ups are done
    worker -> master  llmload_done     this worker's share of REQUESTS is done
    worker -> master  llmload_failed   MAX_FAIL_RATIO's line: this worker's requests failed too often
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import gevent
import orjson
from gevent.event import Event
from locust.env import Environment
from locust.rpc import Message

from llmload.loadtest.plan import Plan, share
from locust.runners import MasterRunner, WorkerRunner

from llmload.results.generator import ProcessLoad
from llmload.results.records import RequestRecord

__all__ = ["Plan", "plan_of", "share", "MasterCollector", "WorkerForwarder", "register_messages"]

logger = logging.getLogger("llmload")

PLAN, GO, STOP = "llmload_plan", "llmload_go", "llmload_stop"
RECORDS, WARMED, DONE, FAILED = "llmload_records", "llmload_warmed", "llmload_done", "llmload_failed"
SEND_INTERVAL_S = 1.0
START_LEAD_S = 0.5
"""RATE's schedule starts this long after the master sends the plan: time for every worker to start its users."""
GO_LEAD_S = 0.1
"""The measured schedule starts this long after the master says go: time for the message to reach every worker."""


def plan_of(environment: Environment) -> Plan:
    """This process's plan: from the master's message on a worker, else the single-process one."""
    data = getattr(environment, "llmload_plan", None)
    return Plan(data["position"], data["workers"], data.get("start_unix_s")) if data else Plan()


class WorkerForwarder:
    """On a worker: sends its records to the master, a batch every second and a final one."""

    def __init__(self, runner: WorkerRunner) -> None:
        self._runner = runner
        self._pending: list[bytes] = []
        self._sender = gevent.spawn(self._run)

    def add(self, record: RequestRecord) -> None:
        self._pending.append(record.to_json_line())

    def _send(self, final: bool, load: ProcessLoad | None = None) -> None:
        lines, self._pending = b"".join(self._pending), []
        if lines or final:
            self._runner.send_message(RECORDS, {"lines": lines, "final": final,
                                                "load": load.to_dict() if load else None})

    def _run(self) -> None:
        while True:
            gevent.sleep(SEND_INTERVAL_S)
            self._send(final=False)

    def close(self, load: ProcessLoad) -> None:
        """Locust's statistics, then the last batch with this process's load figures.

        In that order, so the master has every request in Locust's table when the final batch lets
        it write the run's files (``_send_stats`` is what Locust itself sends when a worker quits).
        """
        self._sender.kill(block=False)
        self._runner._send_stats()
        self._send(final=True, load=load)


class MasterCollector:
    """On the master: the workers of this test, their records, warm-ups and finals."""

    def __init__(self, runner: MasterRunner, add: Callable[[RequestRecord], None], warmups: int,
                 requests: int, on_all_done: Callable[[], None], on_failed: Callable[[str], None]) -> None:
        self._runner = runner
        self._add = add
        self._on_all_done = on_all_done
        self.on_failed = on_failed
        workers = [c.id for c in runner.clients.ready + runner.clients.running + runner.clients.spawning]
        self.workers = len(workers)
        self.loads: list[ProcessLoad] = []
        self._finals = 0
        self._warmed = 0
        self._done = 0
        self._requests = requests
        self.all_final = Event()
        start_unix_s = time.time() + START_LEAD_S
        for position, client_id in enumerate(sorted(workers)):
            runner.send_message(PLAN, {"position": position, "workers": self.workers, "start_unix_s": start_unix_s}, client_id)
        if not warmups:
            self._warmed = self.workers

    def on_records(self, data: dict[str, Any]) -> None:
        for line in data["lines"].splitlines():
            self._add(RequestRecord.from_json(orjson.loads(line)))
        if data["final"]:
            if data["load"] is not None:
                self.loads.append(ProcessLoad.from_dict(data["load"]))
            self._finals += 1
            if self._finals >= self.workers:
                self.all_final.set()

    def on_warmed(self) -> None:
        self._warmed += 1
        if self._warmed == self.workers:
            self._runner.send_message(GO, {"start_unix_s": time.time() + GO_LEAD_S})

    def on_done(self) -> None:
        self._done += 1
        if self._requests and self._done == self.workers:
            gevent.spawn(self._on_all_done)

    def collect(self, timeout_s: float) -> None:
        """Ask every worker to stop and wait for their final batches (at most ``timeout_s``)."""
        self._runner.send_message(STOP)
        if not self.all_final.wait(timeout_s):
            logger.error("error: %d of %d workers sent no final records within %.0f s; the summary lacks them",
                         self.workers - self._finals, self.workers, timeout_s)


def register_messages(environment: Environment, collector_of: Callable[[Environment], MasterCollector | None],
                      go: Callable[[Environment, float], None]) -> None:
    """Register the suite's messages on a master or worker runner (nothing to do in one process).

    ``collector_of``: the running test's collector on the master; ``go``: tells a worker's running test that the
    measured requests start (RATE's schedule at the given wall-clock instant).
    """
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        def on_master(name: str, act: Callable[[MasterCollector, Message], None]) -> None:
            def listener(environment: Environment, msg: Message, **_: Any) -> None:
                collector = collector_of(environment)
                if collector is not None:
                    act(collector, msg)
            runner.register_message(name, listener)

        on_master(RECORDS, lambda collector, msg: collector.on_records(msg.data))
        on_master(WARMED, lambda collector, msg: collector.on_warmed())
        on_master(DONE, lambda collector, msg: collector.on_done())
        on_master(FAILED, lambda collector, msg: collector.on_failed(msg.data))
    elif isinstance(runner, WorkerRunner):
        def on_plan(environment: Environment, msg: Message, **_: Any) -> None:
            environment.llmload_plan = msg.data

        def on_go(environment: Environment, msg: Message, **_: Any) -> None:
            go(environment, msg.data["start_unix_s"])

        def on_stop(environment: Environment, msg: Message, **_: Any) -> None:
            environment.runner.stop()  # fires test_stop here, which sends the final batch

        runner.register_message(PLAN, on_plan)
        runner.register_message(GO, on_go)
        runner.register_message(STOP, on_stop, concurrent=True)
