"""The load generator's report on itself: was it fast enough for the run it drove?

A generator process that falls behind delays request starts and reads; with user-space stamps the
delay shows up as server latency. Each process hands in a ``ProcessLoad`` (raw counters); ``check``
turns them into the summary's ``generator`` block and says whether the generator limited the run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from llmload.results.histogram import LogHistogram

__all__ = ["CPU_LIMIT", "LAG_LIMIT_MS", "ProcessLoad", "ProcessCheck", "GeneratorCheck", "check", "limit_warning"]

CPU_LIMIT = 0.85
"""A process busier than this share of one core was queueing its own work."""
LAG_LIMIT_MS = 5.0
"""Event-loop or arrival-to-read lag p99 above this delayed request starts and reads."""


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


@dataclass(frozen=True)
class GeneratorCheck:
    """The summary's ``generator`` block."""

    generator_limited: bool
    processes: list[ProcessCheck]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _limits(load: ProcessLoad, cpu_cores: float, read_lag: LagMs, loop_lag: LagMs) -> list[str]:
    limits = []
    if cpu_cores > CPU_LIMIT:
        limits.append(f"{load.name} CPU {cpu_cores:.0%} of a core")
    if loop_lag.p99 is not None and loop_lag.p99 > LAG_LIMIT_MS:
        limits.append(f"{load.name} event-loop lag p99 {loop_lag.p99:.1f} ms")
    if read_lag.p99 is not None and read_lag.p99 > LAG_LIMIT_MS:
        limits.append(f"{load.name} arrival-to-read lag p99 {read_lag.p99:.1f} ms")
    return limits


def check(loads: list[ProcessLoad]) -> GeneratorCheck:
    """The generator block for the processes that drove a run."""
    processes = []
    for load in loads:
        cpu_cores = load.cpu_s / load.wall_s if load.wall_s > 0 else 0.0
        read_lag, loop_lag = LagMs.of(load.read_lag), LagMs.of(load.loop_lag)
        processes.append(ProcessCheck(
            name=load.name, cpu_cores=cpu_cores,
            events_per_read=load.events / load.wakeups if load.wakeups else None,
            max_events_per_read=load.max_events_per_wakeup, shared_stamps=load.shared_stamps,
            arrival_to_read_lag_ms=read_lag, event_loop_lag_ms=loop_lag,
            limits=_limits(load, cpu_cores, read_lag, loop_lag), cpu_bound=cpu_cores > CPU_LIMIT,
        ))
    return GeneratorCheck(any(p.limits for p in processes), processes)


def limit_warning(generator: GeneratorCheck) -> str | None:
    """The one warning line for a summary's generator block, or None when the generator kept up."""
    if not generator.generator_limited:
        return None
    reasons = "; ".join(reason for p in generator.processes for reason in p.limits)
    if any(p.cpu_bound for p in generator.processes):
        fix = "spread the users over more processes with WORKERS=N"
    else:
        fix = ("its CPU use was low, so other work on this machine kept it waiting: free the machine "
               "(WORKERS=N will not help)")
    return f"warning: the load generator limited this run ({reasons}); its delays count as server latency: {fix}"
