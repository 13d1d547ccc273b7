"""Watches the generator process while a test runs: its CPU, the machine's, its event loop's lag, its clients' reads.

Figures count over the measured window only (the first request's start to the last one's end, as the
process's clients saw them): the seconds of set-up before and of writing files after are left out.
"""

from __future__ import annotations

import os
import time
from array import array

import gevent

from llmload.client.readstats import PROCESS_READ_STATS
from llmload.results.generator import ProcessLoad
from llmload.results.histogram import LogHistogram

__all__ = ["GeneratorMonitor", "machine_busy_s"]

PROBE_INTERVAL_S = 0.01
"""How often the probe greenlet asks to wake: the loop's lag is how much later it did (100 samples a second)."""
TICK_PROBES = 50
"""Every this many probes (0.5 s) the process's and the machine's CPU are read, to cut them to the window."""


def machine_busy_s() -> float | None:
    """CPU seconds every core of the machine has been busy since boot (steal included: capacity not ours); None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 0


class GeneratorMonitor:
    """From construction to ``stop()``: a periodic probe greenlet's oversleep, CPU ticks, the clients' read stats."""

    def __init__(self, name: str, probe_interval_s: float = PROBE_INTERVAL_S) -> None:
        self._name = name
        self._interval_s = probe_interval_s
        self._probe_s = array("d")  # when each probe woke (monotonic) ...
        self._lag_s = array("d")  # ... and how late
        self._ticks: list[tuple[float, float, float | None]] = []  # (monotonic, process CPU, machine busy)
        PROCESS_READ_STATS.reset()  # one test at a time per process: its reads only
        self._tick()
        self._probe = gevent.spawn(self._run_probe)

    def _tick(self) -> None:
        self._ticks.append((time.monotonic(), time.process_time(), machine_busy_s()))

    def _run_probe(self) -> None:
        probes = 0
        while True:
            asleep_s = time.monotonic()
            gevent.sleep(self._interval_s)
            woke_s = time.monotonic()
            # How much later than asked the hub woke it: every greenlet waited as long.
            self._probe_s.append(woke_s)
            self._lag_s.append(max(0.0, woke_s - asleep_s - self._interval_s))
            probes += 1
            if probes % TICK_PROBES == 0:
                self._tick()

    def stop(self) -> ProcessLoad:
        """What the process did over its measured window (the monitor's whole life if no request ended)."""
        self._probe.kill(block=False)
        self._tick()
        stats = PROCESS_READ_STATS
        start_s, end_s = stats.first_start_s, stats.last_end_s
        if not start_s < end_s:
            start_s, end_s = self._ticks[0][0], self._ticks[-1][0]
        loop_lag = LogHistogram()
        for probe_s, lag_s in zip(self._probe_s, self._lag_s):
            if start_s <= probe_s <= end_s:
                loop_lag.add(lag_s)
        (t0, cpu0, busy0), (t1, cpu1, busy1) = self._window_ticks(start_s, end_s)
        return ProcessLoad(
            name=self._name, wall_s=t1 - t0, cpu_s=cpu1 - cpu0, wakeups=stats.wakeups, events=stats.events,
            max_events_per_wakeup=stats.max_events_per_wakeup, shared_stamps=stats.shared_stamps,
            read_lag=stats.lag, loop_lag=loop_lag, cores=_cores(),
            machine_busy_s=busy1 - busy0 if busy0 is not None and busy1 is not None else None,
            streams=stats.max_in_flight,
        )

    def _window_ticks(self, start_s: float, end_s: float) -> tuple[tuple[float, float, float | None], ...]:
        """The first and last CPU ticks inside the window; the monitor's whole life when fewer than two fall in it."""
        inside = [tick for tick in self._ticks if start_s <= tick[0] <= end_s]
        return (inside[0], inside[-1]) if len(inside) >= 2 else (self._ticks[0], self._ticks[-1])
