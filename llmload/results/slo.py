"""SLO's grammar, SLOs judged on a run's requests, and vLLM's per-request goodput test: one meaning of "good".

A successful request that has no value for a metric an SLO limits (the TPOT or ITL of an answer that came in one
event, the TPOT of a one-token answer) is *not measurable* for that SLO, and every view treats it alike:
- it is never good: goodput_rps, goodput tokens and their cost leave it out;
- the SLO's verdict counts it against the limit: a percentile is taken with such requests ranked above every
  measured value, and a mean over requests some of which have no value is not within any limit;
- when no request could be measured the verdict is NOT MEASURABLE (not met), and says why.

An SLO passes when its statistic, so taken, is within the limit; it is ``certain`` when the statistic's whole 95%
interval lies on the same side of the limit (what a capacity search needs to stop a step early). A request is good
(counts towards goodput, vLLM's definition) when it succeeded, got a visible answer, and its own value of every
SLO metric exists and is within the limit. Limits are the played GPU's; a rehearsal's are put on the target's
clock by its time scale (``slos_of``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from llmload.errors import ConfigError
from llmload.results.intervals import quantile_ci
from llmload.results.metrics import METRICS, Metric
from llmload.results.distributions import Distribution
from llmload.results.records import RequestRecord
from llmload.timescale import time_scale_of

__all__ = ["SLO_METRICS", "Slo", "parse_slos", "slos_of", "SloResult", "check_slo", "judge_slo", "unmeasurable", "is_good",
           "verdict_word", "certain_failure", "EARLY_STOP_CONFIDENCE", "EARLY_STOP_LOOKS"]

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


def parse_slos(text: str) -> tuple[Slo, ...]:
    """SLO's comma-separated objectives, limits as given (the played GPU's); ConfigError naming the bad one."""
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
        slos.append(Slo(part, metric, stat, float(number) * _SLO_UNITS_S[unit]))
    return tuple(slos)


def slos_of(config: dict[str, Any]) -> tuple[Slo, ...]:
    """A run's SLOs as its config (config.json) records them, each limit on the target's clock (its time scale's)."""
    scale = time_scale_of(config)
    return tuple(replace(slo, limit_s=scale.target_s(slo.limit_s)) for slo in parse_slos(str(config.get("slo", ""))))


@dataclass(frozen=True)
class SloResult:
    """One SLO judged on one set of requests."""

    slo: str
    """As given, e.g. ttft_p90<=2s."""
    limit_ms: float
    """On the clock the requests were timed by: a rehearsal's is the played GPU's limit over its SPEEDUP."""
    value_ms: float | None
    """The statistic over the requests that had a value; None when none had."""
    value_ms_ci95: list[float] | None
    passed: bool
    """Within the limit, the requests that were not measurable counted against it; False when none was measured."""
    certain: bool
    """The whole 95% interval is on the verdict's side of the limit (never for a mean: it has no interval)."""
    requests_unmeasurable: int = 0
    """Successful requests with no value of the SLO's metric (e.g. no TPOT from an answer sent in one event)."""


def unmeasurable(slo: Slo, ok: Sequence[RequestRecord]) -> int:
    """How many of the successful requests ``ok`` have no value of the SLO's metric."""
    metric = SLO_METRICS[slo.metric]
    return sum(1 for r in ok if not metric.request_values_s(r))


def check_slo(slo: Slo, value_ms: float | None, ci95_ms: list[float] | None) -> SloResult:
    """``slo`` against a statistic measured on requests that each had a value (None: nothing measured)."""
    limit_ms = slo.limit_s * 1000.0
    passed = value_ms is not None and value_ms <= limit_ms
    certain = ci95_ms is not None and (ci95_ms[1] <= limit_ms if passed else ci95_ms[0] > limit_ms)
    return SloResult(slo.text, limit_ms, value_ms, ci95_ms, passed, certain)


def judge_slo(slo: Slo, measured: Distribution, ok: Sequence[RequestRecord]) -> SloResult:
    """``slo`` on the successful requests ``ok``, whose metric's distribution is ``measured``; a request without a
    value counts against the limit (ranked above every measured value; a mean with one missing fails)."""
    missing = unmeasurable(slo, ok)
    value, ci = getattr(measured, slo.stat), getattr(measured, f"{slo.stat}_ci95", None)
    result = check_slo(slo, value, ci)
    if not missing:
        return result
    if value is None or slo.quantile is None:
        return replace(result, passed=False, certain=value is None or slo.quantile is None, requests_unmeasurable=missing)
    metric = SLO_METRICS[slo.metric]
    limit_s = slo.limit_s
    values = np.sort(np.asarray(metric.sample_s(ok), dtype=float))
    above = max(float(values[-1]), limit_s) * 2.0 + 1.0  # stands for "no value": over the limit and every value
    ranked = np.concatenate([values, np.full(missing, above)])
    statistic_s = float(np.percentile(ranked, 100 * slo.quantile))
    bounds = quantile_ci(ranked, slo.quantile)
    passed = statistic_s <= limit_s
    certain = bounds is not None and (bounds[1] <= limit_s if passed else bounds[0] > limit_s)
    return replace(result, passed=passed, certain=certain, requests_unmeasurable=missing)


def verdict_word(result: SloResult) -> str:
    """PASS or FAIL (with ``?`` when the interval straddles the limit), or NOT MEASURABLE when no request had a value."""
    if result.value_ms is None and result.requests_unmeasurable:
        return "NOT MEASURABLE"
    return ("PASS" if result.passed else "FAIL") + ("" if result.certain else "?")


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
    """Succeeded, answered, and has a value of every SLO's metric within its limit (a request with no value, such as
    no TPOT from an answer sent in one event, is not measurable: never good)."""
    if not (record.ok and record.answered):
        return False
    values_s = (_request_value_s(record, slo) for slo in slos)
    return all(value is not None and value <= slo.limit_s for value, slo in zip(values_s, slos))


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
