"""A run's live figures as Prometheus metric families, named as vLLM names its own (``llmload_`` for ``vllm:``).

``RunMetrics.add`` takes each measured request's record once, from the process that owns the run (with
WORKERS, the master, fed by the workers' records); latencies go to LogHistograms, bounded work per
record. ``families`` copies every figure at one instant into a Snapshot (on the event loop, at once: the
histograms' counts, sums, counters, gauges); ``render`` writes that copy in Prometheus's text format a child
at a time, so the scrape can yield between chunks while the run goes on, and every line holds that instant.
Buckets are 4.4% apart from 1.02 ms to 611 s (LogHistogram's own edges), so histogram_quantile's interpolation
stays within 5%. The counters are RUN_METRICS's rows with a ``prometheus`` name (results/metrics.py): each row's
formula, summed per effort, so rate() over a window gives the row's figure there; a row added there is a counter here.
Warm-up requests are left out, as in summary.json; latencies, rates and shares count successful requests only.
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from llmload.results.histogram import LogHistogram, bucket_of, upper_edge_s
from llmload.results.metrics import METRICS, RUN_METRICS, RunMetric
from llmload.results.metrics import Metric as TableRow
from llmload.results.records import RequestRecord

__all__ = ["RunMetrics", "Snapshot", "render", "EXPORTED", "LATENCIES", "COUNTERS", "OUTCOMES", "LABELS", "PREFIX",
           "CHUNK_LINES"]

PREFIX = "llmload_"
LABELS = ("run", "effort", "api", "gpu")
"""Every request family's labels: the run's folder, the request's reasoning_effort, the API, the GPU label."""
GAUGE_LABELS = ("run", "api", "gpu")
"""The gauges' labels: the run's, not a request's."""
EXPORTED: tuple[TableRow, ...] = tuple(m for m in METRICS if m.prometheus)
"""The metric table's rows with a histogram here (vLLM's own are vllm:<name>; its TPOT:
vllm:request_time_per_output_token_seconds)."""
LATENCIES = {m.prometheus: f"{m.title}, as the client saw it: {m.description}." for m in EXPORTED}
"""Histogram name (after PREFIX): help."""
OUTCOMES = ("ok", "connect", "timeout", "stream_error", "protocol", "disconnected", "tool_call_invalid", "interrupted")
"""llmload_requests_total's outcomes shown from the start at 0 (llmload/client/faults.py); http_<code> appear when seen."""


@dataclass(frozen=True)
class _Counter:
    """One counter family: a RUN_METRICS row's sum (``part``: its value, or a share's base)."""

    name: str
    """After PREFIX."""
    help: str
    row: RunMetric
    part: str
    """value or base."""

    def of(self, record: RequestRecord, good: Callable[[RequestRecord], bool] | None) -> float:
        """What one measured request adds (the row's formula, as summary.py applies it)."""
        row = self.row
        if row.kind == "count":
            assert row.counted is not None
            return 1.0 if row.counted(record) else 0.0
        if not record.ok:
            return 0.0
        if row.kind == "rate":
            assert row.weight is not None
            return row.weight(record) if not row.good_only or (good is not None and good(record)) else 0.0
        share = row.numerator if self.part == "value" else row.denominator
        assert share is not None
        return share(record)


def _counters_of(row: RunMetric) -> Iterator[_Counter]:
    name = f"{row.prometheus}_total"
    if row.kind == "share":
        base = f"{row.prometheus}_base_total"
        yield _Counter(name, f"{row.label}: its numerator, summed; the share is rate({PREFIX}{name}) / "
                             f"rate({PREFIX}{base}).", row, "value")
        yield _Counter(base, f"{row.label}: its base, summed.", row, "base")
    elif row.kind == "rate":
        what = " of the requests that met every SLO" if row.good_only else ""
        yield _Counter(name, f"{row.label}: the sum whose rate it is{what}.", row, "value")
    else:
        yield _Counter(name, f"{row.label}: the requests counted.", row, "value")


COUNTERS: tuple[_Counter, ...] = tuple(c for row in RUN_METRICS if row.prometheus for c in _counters_of(row))
"""Every counter family RUN_METRICS's rows export; the goodput rows' only with an SLO."""
FOLD_AT = 4_096
"""Gaps held before they go into the histogram at once (about 0.1 ms of numpy); a scrape folds a copy of them."""
CHUNK_LINES = 1000
"""Lines render writes at least at a time, whole children (a histogram's is 312): about 0.3 ms."""
_FIRST, _LAST = bucket_of(0.001), bucket_of(600.0)  # LogHistogram's buckets holding 1 ms and 10 min
_LE = tuple(f"{upper_edge_s(i):.6g}" for i in range(_FIRST, _LAST + 1)) + ("+Inf",)


class _Latency:
    """One histogram family's child: the values' LogHistogram and their sum (Prometheus's _sum).

    A stream's gaps wait in a flat buffer and go into the histogram FOLD_AT at a time (one numpy pass): per record
    that is a copy of its gaps, not a pass over them with cold code.
    """

    __slots__ = ("histogram", "sum_s", "_pending")

    def __init__(self) -> None:
        self.histogram = LogHistogram()
        self.sum_s = 0.0
        self._pending = array("d")

    def add(self, value_s: float | None) -> None:
        if value_s is not None:
            self.histogram.add(value_s)
            self.sum_s += value_s

    def add_all(self, values_s: Sequence[float]) -> None:
        pending = self._pending
        pending.extend(values_s)
        if len(pending) >= FOLD_AT:
            self._fold()

    def _fold(self) -> None:
        if self._pending:
            self.histogram.add_all(self._pending)
            self.sum_s += sum(self._pending)
            self._pending = array("d")

    def copy(self) -> _Counts:
        """Its figures as they stand: copies of the counts and of the values held (memcpy, not a fold)."""
        return _Counts(self.histogram.counts.copy(), self.histogram.count, self.sum_s, self._pending[:])


@dataclass(frozen=True)
class _Counts:
    """A histogram child at an instant: copies of its LogHistogram's counts and of the values not folded in yet."""

    counts: list[int]
    count: int
    sum_s: float
    held: array

    def exported(self) -> tuple[list[tuple[str, int]], int, float]:
        """Cumulative counts at each ``le`` (+Inf last: values under 1.02 ms count in the first, over 611 s only in
        +Inf), the count and the sum, the values held folded into a copy (fewer than FOLD_AT)."""
        counts, count, sum_s = self.counts, self.count, self.sum_s
        if self.held:
            histogram = LogHistogram(counts.copy(), count)
            histogram.add_all(self.held)
            counts, count, sum_s = histogram.counts, histogram.count, sum_s + sum(self.held)
        cumulative = itertools.accumulate(counts[_FIRST:_LAST + 1], initial=sum(counts[:_FIRST]))
        next(cumulative)
        return [*zip(_LE, cumulative), ("+Inf", count)], count, sum_s


class _Effort:
    """What the requests of one effort added up to."""

    __slots__ = ("latencies", "outcomes", "counters")

    def __init__(self, counters: Sequence[_Counter]) -> None:
        self.latencies = {name: _Latency() for name in LATENCIES}
        self.outcomes: Counter[str] = Counter(dict.fromkeys(OUTCOMES, 0))
        self.counters = dict.fromkeys((c.name for c in counters), 0.0)

    def copy(self) -> _EffortAt:
        return _EffortAt({name: latency.copy() for name, latency in self.latencies.items()}, sorted(self.outcomes.items()),
                         dict(self.counters))


@dataclass(frozen=True)
class _EffortAt:
    """One effort's figures at an instant."""

    latencies: dict[str, _Counts]
    outcomes: list[tuple[str, int]]
    """By outcome's name."""
    counters: dict[str, float]
    """By counter family's name (after PREFIX)."""


@dataclass(frozen=True)
class Snapshot:
    """Every figure of a run at one instant, copied: iterating gives prometheus_client's families, ``render`` the text."""

    run: str
    api: str
    gpu: str
    efforts: dict[str, _EffortAt]
    counters: tuple[tuple[str, str], ...]
    """(name after PREFIX, help) of each counter family, in order."""
    gauges: tuple[tuple[str, str, float], ...]
    """(name after PREFIX, help, value)."""

    def __iter__(self) -> Iterator[Metric]:
        for name, help_text in LATENCIES.items():
            histogram = HistogramMetricFamily(PREFIX + name, help_text, labels=LABELS)
            for effort, figures in self.efforts.items():
                buckets, _, sum_s = figures.latencies[name].exported()
                histogram.add_metric(self._labels(effort), buckets, sum_s)
            yield histogram
        requests = CounterMetricFamily(PREFIX + "requests_total", _REQUESTS_HELP, labels=(*LABELS, "outcome"))
        for effort, figures in self.efforts.items():
            for outcome, n in figures.outcomes:
                requests.add_metric([*self._labels(effort), outcome], n)
        yield requests
        for name, help_text in self.counters:
            counter = CounterMetricFamily(PREFIX + name, help_text, labels=LABELS)
            for effort, figures in self.efforts.items():
                counter.add_metric(self._labels(effort), figures.counters[name])
            yield counter
        for name, help_text, value in self.gauges:
            gauge = GaugeMetricFamily(PREFIX + name, help_text, labels=GAUGE_LABELS)
            gauge.add_metric([self.run, self.api, self.gpu], value)
            yield gauge

    def _labels(self, effort: str) -> list[str]:
        return [self.run, effort, self.api, self.gpu]

    def pieces(self) -> Iterator[list[str]]:
        """The text, a family's header or one child's lines at a time: what prometheus_client's writer writes for
        iter(self), byte for byte (tests/test_exporter_snapshot.py), at a fraction of its cost."""
        for name, help_text in LATENCIES.items():
            full = PREFIX + name
            yield _header(full, help_text, "histogram")
            for effort, figures in self.efforts.items():
                labels = dict(zip(LABELS, self._labels(effort)))
                head, tail = _around(f"{full}_bucket", labels, "le")
                buckets, count, sum_s = figures.latencies[name].exported()
                lines = [f"{head}{le}{tail}{_number(n)}\n" for le, n in buckets]
                series = _series(labels)
                lines.append(f"{full}_count{series} {_number(count)}\n")
                lines.append(f"{full}_sum{series} {floatToGoString(sum_s)}\n")
                yield lines
        yield _header(PREFIX + "requests_total", _REQUESTS_HELP, "counter")
        for effort, figures in self.efforts.items():
            head, tail = _around(PREFIX + "requests_total", dict(zip(LABELS, self._labels(effort))), "outcome")
            yield [f"{head}{_escape(outcome)}{tail}{_number(n)}\n" for outcome, n in figures.outcomes]
        for name, help_text in self.counters:
            full = PREFIX + name
            yield _header(full, help_text, "counter")
            yield [f"{full}{_series(dict(zip(LABELS, self._labels(effort))))} {_sum(figures.counters[name])}\n"
                   for effort, figures in self.efforts.items()]
        series = _series(dict(zip(GAUGE_LABELS, (self.run, self.api, self.gpu))))
        for name, help_text, value in self.gauges:
            yield [*_header(PREFIX + name, help_text, "gauge"), f"{PREFIX}{name}{series} {floatToGoString(value)}\n"]


_REQUESTS_HELP = "Measured requests by outcome: ok, or the fault's category (llmload/client/faults.py)."


def _escape(value: str) -> str:
    """A label value in the text format (prometheus_client's escaping)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _series(labels: dict[str, str]) -> str:
    """``{name="value",...}``, names sorted as prometheus_client writes them."""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items())) + "}"


def _around(name: str, labels: dict[str, str], varying: str) -> tuple[str, str]:
    """A sample line's text before and after the value of label ``varying`` (its value and the sample's go between)."""
    marker = "\0"
    line = f"{name}{_series({**labels, varying: marker})} "
    head, tail = line.split(f'{varying}="{marker}"')
    return f'{head}{varying}="', f'"{tail}'


def _number(n: int) -> str:
    """floatToGoString of a count, without its float round trip below a million (where Go's exponents begin)."""
    return f"{n}.0" if 0 <= n < 1_000_000 else floatToGoString(n)


def _sum(value: float) -> str:
    """floatToGoString of a counter's sum (whole numbers mostly: token counts)."""
    return _number(int(value)) if value.is_integer() else floatToGoString(value)


def _header(name: str, help_text: str, kind: str) -> list[str]:
    escaped = help_text.replace("\\", r"\\").replace("\n", r"\n")
    return [f"# HELP {name} {escaped}\n", f"# TYPE {name} {kind}\n"]


class RunMetrics:
    """The live figures of one run, for its Prometheus endpoint (METRICS_PORT)."""

    def __init__(self, run: str, gpu: str, efforts: Iterable[str], api: str = "chat", scheduled_rps: float = 0.0,
                 good: Callable[[RequestRecord], bool] | None = None) -> None:
        self.run, self.gpu, self.api = run, gpu, api
        """The labels: the run's folder, the GPU label, the API (API=: chat or responses) every series carries."""
        self.scheduled_rps = scheduled_rps
        """The schedule's requests per second sent to the target with RATE or TRACE (SPEEDUP included), as the
        caller computes it; 0 in closed loop."""
        self._good = good
        """Whether a request met every SLO (slo.is_good on the run's limits); None without SLO: no goodput counters."""
        self._counters = tuple(c for c in COUNTERS if good is not None or not c.row.good_only)
        self._efforts = {effort: _Effort(self._counters) for effort in efforts}

    def add(self, record: RequestRecord) -> None:
        """Count one finished request (a warm-up is left out): its counters, four histogram counts, a copy of its gaps."""
        if record.warmup:
            return
        effort = record.effort or "none"
        figures = self._efforts.get(effort) or self._efforts.setdefault(effort, _Effort(self._counters))
        figures.outcomes["ok" if record.ok else record.error or "unknown"] += 1
        counters = figures.counters
        for counter in self._counters:
            counters[counter.name] += counter.of(record, self._good)
        if not record.ok:
            return
        latencies = figures.latencies
        for m in EXPORTED:
            latency = latencies[m.prometheus]
            if m.pooled:
                latency.add_all(getattr(record, m.record))
            else:
                latency.add(getattr(record, m.record))

    def families(self, users: int, in_flight: int) -> Snapshot:
        """Every family as it stands now, copied (records added later are in the next one's); ``users`` and
        ``in_flight`` are the caller's, read at the same instant."""
        return Snapshot(self.run, self.api, self.gpu, {effort: figures.copy() for effort, figures in self._efforts.items()},
                        tuple((c.name, c.help) for c in self._counters),
                        (("users", "Locust users running (with RATE or TRACE: one dispatcher per process).", users),
                         ("requests_in_flight", "Requests sent and not yet finished, warm-ups included.", in_flight),
                         ("scheduled_requests_per_second", "RATE's or TRACE's schedule in requests per second sent to "
                                                           "the target (SPEEDUP included); 0 in closed loop.",
                          self.scheduled_rps)))


def render(snapshot: Snapshot | None) -> Iterator[bytes]:
    """Prometheus's text format of ``snapshot`` (nothing for None), whole children at least CHUNK_LINES lines at a time."""
    if snapshot is None:
        return
    chunk: list[str] = []
    for piece in snapshot.pieces():
        chunk += piece
        if len(chunk) >= CHUNK_LINES:
            yield "".join(chunk).encode()
            chunk = []
    if chunk:
        yield "".join(chunk).encode()
