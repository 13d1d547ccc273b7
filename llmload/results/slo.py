"""SLO's grammar, SLOs checked against measured distributions, and vLLM's per-request goodput test.

An SLO passes when its statistic is within the limit; it is ``certain`` when the statistic's whole
95% interval lies on the same side of the limit (what a capacity search needs to stop a step early).
A request is good (counts towards goodput_rps, vLLM's definition) when it succeeded, got a visible
answer, and its own value of every SLO metric is within the limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from llmload.errors import ConfigError
from llmload.results.intervals import quantile_ci
from llmload.results.metrics import METRICS, Metric
from llmload.results.provenance import rehearsal_speedup, served_by_of
from llmload.results.records import RequestRecord

__all__ = ["SLO_METRICS", "Slo", "parse_slos", "slos_of", "SloResult", "check_slo", "is_good", "certain_failure",
           "EARLY_STOP_CONFIDENCE", "EARLY_STOP_LOOKS"]

SLO_METRICS: dict[str, Metric] = {m.name: m for m in METRICS if m.better == "lower"}
"""The metrics an SLO may bound, by name: those of the metric table where lower is better (the grammar has ``<=``)."""
SLO_STATS = ("mean", "median", "p50", "p90", "p99")
_SLO = re.compile(r"([a-z0-9]+)_([a-z0-9]+)<=(\d+(?:\.\d*)?|\.\d+)([a-z]*)")
_SLO_UNITS_S = {"ms": 0.001, "s": 1.0}


@dataclass(frozen=True)
class Slo:
    """One objective, ``<metric>_<stat><=<limit><unit>``: e.g. ttft_p90<=2s (the p90 of TTFT at most 2 s)."""

    text: str
    metric: str
    """A key of SLO_METRICS (a metric's name): ttft, tpot, e2e, ..."""
    stat: str
    """mean, median, p90 or p99 (p50 is read as median)."""
    limit_s: float

    @property
    def quantile(self) -> float | None:
        """The stat as a quantile (median 0.5, p90 0.9, p99 0.99); None for the mean."""
        return None if self.stat == "mean" else 0.5 if self.stat == "median" else int(self.stat[1:]) / 100


def parse_slos(text: str, speedup: float = 1.0) -> tuple[Slo, ...]:
    """SLO's comma-separated objectives; ConfigError naming the bad one and the form it must take.

    ``speedup``: the target runs that many times faster (a rehearsal), so each time limit shrinks as much: the SLO
    keeps speaking of the GPU the target plays, as RATE and DURATION do.
    """
    if not text.strip():
        return ()
    slos: list[Slo] = []
    for part in (p.replace(" ", "") for p in text.split(",")):
        match = _SLO.fullmatch(part)
        if not match:
            raise ConfigError(f"SLO={text!r}: {part!r} is not <metric>_<stat><=<number><unit>; give e.g. ttft_p90<=2s,tpot_p90<=50ms")
        metric, stat, number, unit = match.groups()
        if metric not in SLO_METRICS:
            raise ConfigError(f"SLO={text!r}: {part!r} names no known metric; use one of {', '.join(SLO_METRICS)}")
        if stat not in SLO_STATS:
            raise ConfigError(f"SLO={text!r}: {part!r} names no known statistic; use one of {', '.join(SLO_STATS)}")
        if unit not in _SLO_UNITS_S:
            raise ConfigError(f"SLO={text!r}: {part!r} needs a unit, ms or s: {metric}_{stat}<={number}s or {metric}_{stat}<={number}ms")
        stat = "median" if stat == "p50" else stat
        if any(s.metric == metric and s.stat == stat for s in slos):
            raise ConfigError(f"SLO={text!r}: {metric}_{stat} is given twice; keep one limit")
        slos.append(Slo(part, metric, stat, float(number) * _SLO_UNITS_S[unit] / speedup))
    return tuple(slos)


def slos_of(config: dict[str, Any]) -> tuple[Slo, ...]:
    """A run's SLOs as its config (config.json) records them: each limit divided by a rehearsal's SPEEDUP."""
    return parse_slos(str(config.get("slo", "")), rehearsal_speedup(served_by_of(config)))


@dataclass(frozen=True)
class SloResult:
    """One SLO against one distribution."""

    slo: str
    """As given, e.g. ttft_p90<=2s."""
    limit_ms: float
    value_ms: float | None
    value_ms_ci95: list[float] | None
    passed: bool
    """The statistic is within the limit; False when nothing was measured."""
    certain: bool
    """The whole 95% interval is on the verdict's side of the limit (never for a mean: it has no interval)."""


def check_slo(slo: Slo, value_ms: float | None, ci95_ms: list[float] | None) -> SloResult:
    """``slo`` against its statistic's measured value and interval (None: nothing measured / no interval)."""
    limit_ms = slo.limit_s * 1000.0
    value, ci = value_ms, ci95_ms
    passed = value is not None and value <= limit_ms
    certain = ci is not None and (ci[1] <= limit_ms if passed else ci[0] > limit_ms)
    return SloResult(slo.text, limit_ms, value, ci, passed, certain)


def _request_value_s(record: RequestRecord, slo: Slo) -> float | None:
    """The request's own value of the SLO's metric (of a pooled one, the SLO's statistic over its own gaps); None
    when it has none to time."""
    metric = SLO_METRICS[slo.metric]
    values = metric.request_values_s(record)
    if not values:
        return None
    if not metric.pooled:
        return values[0]
    gaps = np.asarray(values)
    return float(gaps.mean() if slo.stat == "mean" else np.percentile(gaps, 100 * slo.quantile))


def is_good(record: RequestRecord, slos: Sequence[Slo]) -> bool:
    """Succeeded, answered, and within every limit (a request with nothing to time for a metric, such as no TPOT
    from a single token, has nothing to fail there)."""
    if not (record.ok and record.answered):
        return False
    values_s = (_request_value_s(record, slo) for slo in slos)
    return all(value is None or value <= slo.limit_s for value, slo in zip(values_s, slos))



EARLY_STOP_CONFIDENCE = 0.995
"""Per look: with at most EARLY_STOP_LOOKS looks, the chance of stopping a run that meets its SLO stays under 5%."""
EARLY_STOP_LOOKS = 10


def certain_failure(slos: Sequence[Slo], records: Sequence[RequestRecord],
                    confidence: float = EARLY_STOP_CONFIDENCE) -> str | None:
    """Why ``records`` already fail an SLO beyond doubt (the statistic's lower bound is over the limit), else None.

    Each effort's records are judged apart when there are several (a mix's SLOs hold per effort).
    A mean has no distribution-free interval and is never judged early.
    """
    groups: dict[str | None, list[RequestRecord]] = {}
    for record in records:
        if record.ok:
            groups.setdefault(record.effort, []).append(record)
    for effort, group in groups.items():
        for slo in slos:
            if slo.stat == "mean":
                continue
            values_s = SLO_METRICS[slo.metric].sample_s(group)
            q = slo.quantile
            ci = quantile_ci(np.sort(values_s), q, confidence)
            if ci is not None and ci[0] > slo.limit_s:
                part = f" (effort {effort})" if len(groups) > 1 else ""
                return (f"{slo.text} fails{part}: its {slo.stat} is at least {ci[0] * 1000:.1f} ms "
                        f"({confidence:.1%} confidence) after {len(values_s)} samples")
    return None
