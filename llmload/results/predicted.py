"""A rehearsal's figures as the GPU it played would show them: the built-in target ran SPEEDUP times faster, so its
times are multiplied by SPEEDUP and its rates divided by it. Pure; the raw sped-up figures stay where they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmload.results.metrics import METRICS
from llmload.results.provenance import is_rehearsal

__all__ = ["Times", "Predicted", "RATE_FIELDS", "predicted_label", "played_factor", "scaled_distribution", "scaled_interval",
           "predict_played"]

RATE_FIELDS = ("rps", "output_throughput_tok_s", "total_throughput_tok_s", "goodput_rps")
"""Summary fields that are rates: a rehearsal's divided by SPEEDUP (each with its ``_ci95``)."""
_TIME_FIELDS = frozenset(("duration_s", *(m.summary for m in METRICS)))


@dataclass(frozen=True)
class Times:
    """A latency's statistics scaled to the played GPU (ms), each median and percentile with its 95% interval."""

    mean: float | None
    median: float | None
    median_ci95: list[float] | None
    p90: float | None
    p90_ci95: list[float] | None
    p99: float | None
    p99_ci95: list[float] | None


@dataclass(frozen=True)
class Predicted:
    """A rehearsal's figures for the GPU it played (times x SPEEDUP, rates / SPEEDUP)."""

    label: str
    """``predicted for h200 (profile h200-gpt-oss-20b-bf16, measured; SPEEDUP 20x scaled back)``."""
    gpu: str
    profile: str | None
    profile_kind: str | None
    """measured (fitted to a real server) or extrapolated (scaled from one by hardware figures)."""
    speedup: float
    duration_s: float
    rps: float
    rps_ci95: list[float] | None
    output_throughput_tok_s: float
    output_throughput_tok_s_ci95: list[float] | None
    total_throughput_tok_s: float
    total_throughput_tok_s_ci95: list[float] | None
    goodput_rps: float | None
    goodput_rps_ci95: list[float] | None
    response_time_ms: Times
    ttft_ms: Times
    ttfvt_ms: Times
    tpot_ms: Times
    itl_ms: Times
    decode_ms: Times
    """One Times per row of the metric table (its summary field), each x SPEEDUP."""


def predicted_label(served_by: dict[str, Any]) -> str:
    """``predicted for <gpu> (...)``: what a rehearsal's scaled figures stand for."""
    profile = served_by.get("profile")
    kind = served_by.get("profile_kind")
    detail = f"profile {profile}, {kind}" if profile and kind else f"profile {profile}" if profile else \
        f"built-in target, {kind}" if kind else "built-in target"
    speedup = float(served_by.get("speedup") or 1.0)
    scaled = f"; SPEEDUP {speedup:g}x scaled back" if speedup != 1.0 else ""
    return f"predicted for {served_by.get('gpu_profile') or '?'} ({detail}{scaled})"


def scaled_interval(ci: list[float] | None, factor: float) -> list[float] | None:
    return None if ci is None else [ci[0] * factor, ci[1] * factor]


def scaled_distribution(d: Any, factor: float) -> Times:
    """A summary Distribution's times (and intervals) multiplied by ``factor``."""
    def times(name: str) -> float | None:
        value = getattr(d, name)
        return None if value is None else value * factor

    return Times(mean=times("mean"), median=times("median"), median_ci95=scaled_interval(d.median_ci95, factor),
                 p90=times("p90"), p90_ci95=scaled_interval(d.p90_ci95, factor), p99=times("p99"),
                 p99_ci95=scaled_interval(d.p99_ci95, factor))


def played_factor(field: str, speedup: float) -> float:
    """What turns a rehearsal's summary field (``ttft_ms``, ``rps``, ...) into the played GPU's: times x SPEEDUP,
    rates / SPEEDUP, counts and shares as they are."""
    if field in _TIME_FIELDS:
        return speedup
    return 1.0 / speedup if field in RATE_FIELDS else 1.0


def predict_played(measures: Any, served_by: dict[str, Any] | None) -> Predicted | None:
    """The figures of ``measures`` for the GPU a rehearsal played; None for a real server's run."""
    if not is_rehearsal(served_by):
        return None
    assert served_by is not None
    n = float(served_by.get("speedup") or 1.0)
    rates: dict[str, Any] = {}
    for field in RATE_FIELDS:
        value = getattr(measures, field)
        rates[field] = None if value is None else value / n
        rates[f"{field}_ci95"] = scaled_interval(getattr(measures, f"{field}_ci95"), 1.0 / n)
    return Predicted(
        label=predicted_label(served_by), gpu=str(served_by.get("gpu_profile") or "?"), profile=served_by.get("profile"),
        profile_kind=served_by.get("profile_kind"), speedup=n, duration_s=measures.duration_s * n, **rates,
        **{m.summary: scaled_distribution(getattr(measures, m.summary), n) for m in METRICS})
