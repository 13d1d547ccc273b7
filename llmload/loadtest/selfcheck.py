"""Watches the generator process while a test runs: its CPU, its event loop's lag, its clients' reads."""

from __future__ import annotations

import time

import gevent

from llmload.client.readstats import PROCESS_READ_STATS
from llmload.results.generator import ProcessLoad
from llmload.results.histogram import LogHistogram

__all__ = ["GeneratorMonitor"]

PROBE_INTERVAL_S = 0.05


class GeneratorMonitor:
    """From construction to ``stop()``: CPU seconds, oversleep of a periodic probe greenlet, read stats."""

    def __init__(self, name: str, probe_interval_s: float = PROBE_INTERVAL_S) -> None:
        self._name = name
        self._interval_s = probe_interval_s
        self._loop_lag = LogHistogram()
        PROCESS_READ_STATS.reset()  # one test at a time per process: its reads only
        self._wall_start_s = time.monotonic()
        self._cpu_start_s = time.process_time()
        self._probe = gevent.spawn(self._run_probe)

    def _run_probe(self) -> None:
        while True:
            asleep_s = time.monotonic()
            gevent.sleep(self._interval_s)
            # How much later than asked the hub woke it: every greenlet waited as long.
            self._loop_lag.add(max(0.0, time.monotonic() - asleep_s - self._interval_s))

    def stop(self) -> ProcessLoad:
        """What the process did since the monitor started."""
        self._probe.kill(block=False)
        stats = PROCESS_READ_STATS
        return ProcessLoad(
            name=self._name, wall_s=time.monotonic() - self._wall_start_s,
            cpu_s=time.process_time() - self._cpu_start_s, wakeups=stats.wakeups, events=stats.events,
            max_events_per_wakeup=stats.max_events_per_wakeup, shared_stamps=stats.shared_stamps,
            read_lag=stats.lag, loop_lag=self._loop_lag,
        )
