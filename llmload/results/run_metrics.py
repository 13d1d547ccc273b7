"""A run's live figures as Prometheus metric families, named as vLLM names its own (``llmload_`` for ``vllm:``).

``RunMetrics.add`` takes each measured request's record once, from the process that owns the run (with
WORKERS, the master, fed by the workers' records); latencies go to LogHistograms, bounded work per
record. ``families`` turns them into Prometheus histograms when scraped: buckets 4.4% apart from
1.02 ms to 611 s (LogHistogram's own edges), so histogram_quantile's interpolation stays within 5%;
``render`` writes them with prometheus_client a hundred lines at a time, so a scrape can yield between.
Warm-up requests are left out, as in summary.json; latencies and tokens count successful requests only.
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from typing import Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from llmload.results.histogram import LogHistogram, bucket_of, upper_edge_s
from llmload.results.metrics import METRICS
from llmload.results.metrics import Metric as TableRow
from llmload.results.records import RequestRecord

__all__ = ["RunMetrics", "render", "EXPORTED", "LATENCIES", "OUTCOMES", "LABELS", "PREFIX", "CHUNK_SAMPLES"]

PREFIX = "llmload_"
LABELS = ("run", "effort", "api", "gpu")
"""Every request family's labels: the run's folder, the request's reasoning_effort, the API, the GPU label."""
EXPORTED: tuple[TableRow, ...] = tuple(m for m in METRICS if m.prometheus)
"""The metric table's rows with a histogram here (vLLM's own are vllm:<name>; its TPOT:
vllm:request_time_per_output_token_seconds)."""
LATENCIES = {m.prometheus: f"{m.title}, as the client saw it: {m.description}." for m in EXPORTED}
"""Histogram name (after PREFIX): help."""
OUTCOMES = ("ok", "connect", "timeout", "stream_error", "protocol", "disconnected", "tool_call_invalid", "interrupted")
"""llmload_requests_total's outcomes shown from the start at 0 (llmload/client/faults.py); http_<code> appear when seen."""
FOLD_AT = 20_000
"""Gaps held before they go into the histogram at once (about a millisecond of numpy)."""
CHUNK_SAMPLES = 100
"""Lines render writes at a time: about a millisecond of prometheus_client's writer."""
_FIRST, _LAST = bucket_of(0.001), bucket_of(600.0)  # LogHistogram's buckets holding 1 ms and 10 min
_LE = tuple(f"{upper_edge_s(i):.6g}" for i in range(_FIRST, _LAST + 1)) + ("+Inf",)


class _Latency:
    """One histogram family's child: the values' LogHistogram and their sum (Prometheus's _sum).

    A stream's gaps wait in a flat buffer and go into the histogram FOLD_AT at a time (one numpy pass, a
    millisecond), or when scraped: per record that is a copy of its gaps, not a pass over them with cold code.
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

    def exported(self) -> tuple[list[tuple[str, float]], float]:
        """Cumulative counts at each ``le`` (+Inf last: values under 1.02 ms count in the first, over 611 s only in
        +Inf) and the sum, every value held included."""
        self._fold()
        counts = self.histogram.counts
        cumulative = itertools.accumulate(counts[_FIRST:_LAST + 1], initial=sum(counts[:_FIRST]))
        next(cumulative)
        return [*zip(_LE, cumulative), ("+Inf", self.histogram.count)], self.sum_s


class _Effort:
    """What the requests of one effort added up to."""

    __slots__ = ("latencies", "outcomes", "prompt_tokens", "output_tokens", "reasoning_tokens")

    def __init__(self) -> None:
        self.latencies = {name: _Latency() for name in LATENCIES}
        self.outcomes: Counter[str] = Counter(dict.fromkeys(OUTCOMES, 0))
        self.prompt_tokens = self.output_tokens = self.reasoning_tokens = 0


class RunMetrics:
    """The live figures of one run, for its Prometheus endpoint (METRICS_PORT)."""

    def __init__(self, run: str, gpu: str, efforts: Iterable[str], api: str = "chat", scheduled_rps: float = 0.0) -> None:
        self.run, self.gpu, self.api = run, gpu, api
        self.scheduled_rps = scheduled_rps
        """RATE's requests per second sent to the target (SPEEDUP included); 0 in closed loop."""
        self._efforts = {effort: _Effort() for effort in efforts}

    def add(self, record: RequestRecord) -> None:
        """Count one finished request (a warm-up is left out): four histogram counts and a copy of its gaps."""
        if record.warmup:
            return
        effort = record.effort or "none"
        figures = self._efforts.get(effort) or self._efforts.setdefault(effort, _Effort())
        figures.outcomes["ok" if record.ok else record.error or "unknown"] += 1
        if not record.ok:
            return
        latencies = figures.latencies
        for m in EXPORTED:
            latency = latencies[m.prometheus]
            if m.pooled:
                latency.add_all(getattr(record, m.record))
            else:
                latency.add(getattr(record, m.record))
        figures.prompt_tokens += record.prompt_tokens or 0
        figures.output_tokens += record.completion_tokens or 0
        figures.reasoning_tokens += record.reasoning_tokens or 0

    def families(self, users: int, in_flight: int) -> Iterator[Metric]:
        """Every family as it stands, one at a time (a scrape may yield between them); ``users`` and ``in_flight``
        are the caller's, read when scraped."""
        for name, help_text in LATENCIES.items():
            histogram = HistogramMetricFamily(PREFIX + name, help_text, labels=LABELS)
            for effort, figures in self._efforts.items():
                histogram.add_metric(self._labels(effort), *figures.latencies[name].exported())
            yield histogram
        requests = CounterMetricFamily(PREFIX + "requests_total", "Measured requests by outcome: ok, or the fault's "
                                       "category (llmload/client/faults.py).", labels=(*LABELS, "outcome"))
        for effort, figures in self._efforts.items():
            for outcome, n in sorted(figures.outcomes.items()):
                requests.add_metric([*self._labels(effort), outcome], n)
        yield requests
        for kind, what in (("prompt", "Prompt tokens (the server's usage)"), ("output", "Output tokens, reasoning included"),
                           ("reasoning", "Reasoning tokens")):
            tokens = CounterMetricFamily(f"{PREFIX}{kind}_tokens_total", f"{what} of successful requests.", labels=LABELS)
            for effort, figures in self._efforts.items():
                tokens.add_metric(self._labels(effort), getattr(figures, f"{kind}_tokens"))
            yield tokens
        for name, help_text, value in (
                ("users", "Locust users running (with RATE: one dispatcher per process).", users),
                ("requests_in_flight", "Requests sent and not yet finished, warm-ups included.", in_flight),
                ("scheduled_requests_per_second", "RATE's schedule in requests per second sent to the target "
                                                  "(SPEEDUP included); 0 in closed loop.", self.scheduled_rps)):
            gauge = GaugeMetricFamily(PREFIX + name, help_text, labels=("run", "api", "gpu"))
            gauge.add_metric([self.run, self.api, self.gpu], value)
            yield gauge

    def _labels(self, effort: str) -> list[str]:
        return [self.run, effort, self.api, self.gpu]


class _One:
    """A registry of one family, for prometheus_client's text writer."""

    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> list[Metric]:
        return [self._family]


def render(families: Iterable[Metric]) -> Iterator[bytes]:
    """Prometheus's text format of ``families``, CHUNK_SAMPLES lines at a time (# HELP and # TYPE once a family)."""
    for family in families:
        samples = family.samples
        for start in range(0, max(1, len(samples)), CHUNK_SAMPLES):
            part = Metric(family.name, family.documentation, family.type, family.unit)
            part.samples = samples[start:start + CHUNK_SAMPLES]
            text = generate_latest(_One(part))
            yield text if start == 0 else text.split(b"\n", 2)[2]
