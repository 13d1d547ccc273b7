"""The load generator's report on itself: was it fast enough for the run it drove, and if not, why?

A generator process that falls behind delays request starts and reads; with user-space stamps the
delay shows up as server latency, with kernel stamps as merged stamps (an event read more than one
gap late takes the next one's). Each process hands in a ``ProcessLoad`` (raw counters: its CPU, its
reads, its event loop's lag, and how busy the whole machine was, from /proc/stat); ``check`` turns
them into the summary's ``generator`` block, and names the cause it finds with a setting that helps:

    cpu_bound     a process that sends and reads was busy most of a core: more processes (WORKERS=N)
    own_stalls    its loop lagged in bursts though the machine had idle cores: the events of many streams
                  landing together, queued behind each other; more processes, each with fewer streams
    busy_machine  it lagged while the machine had no idle core: other work kept it waiting; free the
                  machine (or add machines), more processes on it will not help

A master (WORKERS, EXPECT_WORKERS) neither sends nor reads requests: its lag delays no measurement,
so only its CPU (records from the workers) is judged.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from llmload.results.histogram import LogHistogram

__all__ = ["CPU_LIMIT", "LAG_LIMIT_MS", "ProcessLoad", "ProcessCheck", "GeneratorCheck", "check", "limit_warning",
           "exonerated", "MASTER", "SERVER_FAILED"]

CPU_LIMIT = 0.85
"""A process busier than this share of one core was queueing its own work."""
LAG_LIMIT_MS = 5.0
"""Event-loop or arrival-to-read lag p99 above this delayed request starts and reads."""
WORKER_CPU_TARGET = 0.5
"""The share of a core each process should stay under, with room for the bursts of a step's events."""
IDLE_CORES_MIN = 0.5
"""Below this many idle cores (on average over the run) the machine counts as busy."""
SERVER_FAILED = "server_failed"
"""The cause of a run the server failed: the generator is not judged (exonerated)."""
MASTER = "master"
"""The name of the process that collects the workers' records (it neither sends nor reads requests)."""


@dataclass
class ProcessLoad:
    """What one generator process counted over the run (raw, mergeable)."""

    name: str
    wall_s: float
    cpu_s: float
    wakeups: int = 0
    events: int = 0
    max_events_per_wakeup: int = 0
    shared_stamps: int = 0
    """Events whose segment stamp the kernel merged into a later segment's."""
    read_lag: LogHistogram = field(default_factory=LogHistogram)
    loop_lag: LogHistogram = field(default_factory=LogHistogram)
    cores: int = 0
    """CPUs this process may run on (0: not known)."""
    machine_busy_s: float | None = None
    """CPU seconds every process on the machine used over the same wall time (/proc/stat); None where unknown."""
    streams: int = 0
    """The most requests this process had in flight at once."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["read_lag"], data["loop_lag"] = self.read_lag.to_dict(), self.loop_lag.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ProcessLoad":
        return cls(**{**data, "read_lag": LogHistogram.from_dict(data["read_lag"]),
                      "loop_lag": LogHistogram.from_dict(data["loop_lag"])})


@dataclass(frozen=True)
class LagMs:
    """p50, p99 and max of a lag, in milliseconds; None where nothing was measured."""

    count: int
    p50: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, histogram: LogHistogram) -> "LagMs":
        def ms(value_s: float | None) -> float | None:
            return None if value_s is None else value_s * 1000.0

        return cls(histogram.count, ms(histogram.quantile_s(0.5)), ms(histogram.quantile_s(0.99)),
                   ms(histogram.max_s if histogram.count else None))


@dataclass(frozen=True)
class ProcessCheck:
    """One process's figures, as the summary reports them."""

    name: str
    cpu_cores: float
    """CPU seconds over wall seconds (1.0 = one core all the time)."""
    events_per_read: float | None
    max_events_per_read: int
    shared_stamps: int
    arrival_to_read_lag_ms: LagMs
    event_loop_lag_ms: LagMs
    limits: list[str]
    """Why this process limited the run; empty when it did not."""
    cpu_bound: bool
    """It was busy itself (more processes help), rather than kept waiting by other work on the machine."""
    wall_s: float | None = None
    cpu_s: float | None = None
    cpu_per_event_us: float | None = None
    """CPU over the SSE events it read, in microseconds."""
    machine_cores: int | None = None
    """CPUs the process could run on."""
    machine_busy_cores: float | None = None
    """Cores the whole machine kept busy on average over the run (this process included)."""
    others_cores: float | None = None
    """Of those, what other processes (the target too, when it runs here) and the kernel used."""
    loop_lag_bursty: bool | None = None
    """The loop lagged in bursts (p99 over the limit, p50 under a fifth of it) rather than all the time."""
    streams: int | None = None
    """The most requests it had in flight at once."""


@dataclass(frozen=True)
class GeneratorCheck:
    """The summary's ``generator`` block: each process's figures, the cause found and the advice."""

    generator_limited: bool
    processes: list[ProcessCheck]
    cause: str | None = None
    """cpu_bound, own_stalls or busy_machine (see llmload/results/generator.py); server_failed when the server failed
    the run (not judged); None when it kept up."""
    advice: str | None = None
    """The setting that helps, as one sentence; None when the generator kept up."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _limits(load: ProcessLoad, cpu_cores: float, read_lag: LagMs, loop_lag: LagMs) -> list[str]:
    limits = []
    if cpu_cores > CPU_LIMIT:
        limits.append(f"{load.name} CPU {cpu_cores:.0%} of a core")
    if load.name == MASTER:
        return limits  # the master's lag delays no request and no read
    if loop_lag.p99 is not None and loop_lag.p99 > LAG_LIMIT_MS:
        limits.append(f"{load.name} event-loop lag p99 {loop_lag.p99:.1f} ms")
    if read_lag.p99 is not None and read_lag.p99 > LAG_LIMIT_MS:
        limits.append(f"{load.name} arrival-to-read lag p99 {read_lag.p99:.1f} ms")
    return limits


def _process_check(load: ProcessLoad) -> ProcessCheck:
    cpu_cores = load.cpu_s / load.wall_s if load.wall_s > 0 else 0.0
    read_lag, loop_lag = LagMs.of(load.read_lag), LagMs.of(load.loop_lag)
    busy = load.machine_busy_s / load.wall_s if load.machine_busy_s is not None and load.wall_s > 0 else None
    bursty = None
    if loop_lag.p99 is not None and loop_lag.p50 is not None:
        bursty = loop_lag.p99 > LAG_LIMIT_MS and loop_lag.p50 < LAG_LIMIT_MS / 5
    return ProcessCheck(
        name=load.name, cpu_cores=cpu_cores,
        events_per_read=load.events / load.wakeups if load.wakeups else None,
        max_events_per_read=load.max_events_per_wakeup, shared_stamps=load.shared_stamps,
        arrival_to_read_lag_ms=read_lag, event_loop_lag_ms=loop_lag,
        limits=_limits(load, cpu_cores, read_lag, loop_lag), cpu_bound=cpu_cores > CPU_LIMIT,
        wall_s=load.wall_s, cpu_s=load.cpu_s, cpu_per_event_us=load.cpu_s / load.events * 1e6 if load.events else None,
        machine_cores=load.cores or None, machine_busy_cores=busy,
        others_cores=max(0.0, busy - cpu_cores) if busy is not None else None, loop_lag_bursty=bursty,
        streams=load.streams or None,
    )


def check(loads: list[ProcessLoad]) -> GeneratorCheck:
    """The generator block for the processes that drove a run: figures, cause and advice."""
    processes = [_process_check(load) for load in loads]
    limited = [p for p in processes if p.limits]
    if not limited:
        return GeneratorCheck(False, processes)
    cause, advice = _diagnose(processes, limited)
    return GeneratorCheck(True, processes, cause, advice)


def _diagnose(processes: list[ProcessCheck], limited: list[ProcessCheck]) -> tuple[str, str]:
    """The cause the figures point to, and the setting that helps."""
    senders = [p for p in processes if p.name != MASTER] or processes
    now = len(senders)
    known = [p for p in processes if p.machine_cores and p.machine_busy_cores is not None]
    cores = max((p.machine_cores or 0) for p in known) if known else None
    busy = max((p.machine_busy_cores or 0.0) for p in known) if known else None
    idle = cores - busy if cores is not None and busy is not None else None
    generator_cores = sum(p.cpu_cores for p in senders)
    if any(p.cpu_bound for p in limited):
        wanted = max(now + 1, math.ceil(generator_cores / WORKER_CPU_TARGET))
        return "cpu_bound", _more_processes(
            f"it was busy {generator_cores:.2f} cores over {now} process{'es' if now > 1 else ''}", now, wanted, cores,
            idle)
    if idle is not None and idle < IDLE_CORES_MIN:
        others = max(0.0, busy - generator_cores)
        return "busy_machine", (f"the machine had no idle core ({busy:.1f} of {cores} busy, {others:.1f} by other "
                                "processes, the target's too when it runs here): other work kept it waiting; free the "
                                "machine, or add machines with EXPECT_WORKERS (more processes here will not help)")
    worst_lag_ms = max(max(p.event_loop_lag_ms.p99 or 0.0, p.arrival_to_read_lag_ms.p99 or 0.0) for p in limited)
    wanted = max(now + 1, math.ceil(now * worst_lag_ms / LAG_LIMIT_MS))
    bursts = "in bursts" if any(p.loop_lag_bursty for p in limited) else "though it was not busy"
    machine = f"while the machine had {idle:.1f} idle cores" if idle is not None else "(the machine's load is unknown)"
    return "own_stalls", _more_processes(
        f"it lagged {bursts} (p99 {worst_lag_ms:.1f} ms) {machine}: the events of many streams landed together "
        f"and waited for each other", now, wanted, cores, idle)


def _more_processes(why: str, now: int, wanted: int, cores: int | None, idle: float | None) -> str:
    """Advice to spread the users over ``wanted`` processes, as far as the machine's idle cores allow."""
    if cores is not None and idle is not None:
        fits = max(now + 1, now + int(idle / WORKER_CPU_TARGET))
        if wanted > fits:
            return (f"{why}; this machine has room for about {fits} processes ({idle:.1f} of {cores} cores idle): "
                    f"WORKERS={fits} here, and more machines with EXPECT_WORKERS for the rest")
    return f"{why}: spread the users over more processes with WORKERS={wanted}"


def exonerated(generator: GeneratorCheck, failed: int, requests: int) -> GeneratorCheck:
    """The check of a run the server failed (``failed`` of ``requests``): not judged. Requests that fail at once, or
    back off, leave a generator's figures meaningless, and the cause is the server's."""
    return GeneratorCheck(False, generator.processes, SERVER_FAILED,
                          f"not judged: the server refused or broke {failed} of {requests} requests, so its errors, not "
                          "the load generator, decided this run (its messages are above)")


def limit_warning(generator: GeneratorCheck) -> str | None:
    """The one warning line for a summary's generator block, or None when the generator kept up."""
    if not generator.generator_limited:
        return None
    reasons = "; ".join(reason for p in generator.processes for reason in p.limits)
    advice = generator.advice or _legacy_advice(generator)
    return f"warning: the load generator limited this run ({reasons}); its delays count as server latency: {advice}"


def _legacy_advice(generator: GeneratorCheck) -> str:
    """The advice of a summary written before causes were named (no machine figures): from CPU alone."""
    if any(p.cpu_bound for p in generator.processes):
        return "spread the users over more processes with WORKERS=N"
    return "its CPU use was low: other work on this machine, or the process's own bursts, kept it waiting"
