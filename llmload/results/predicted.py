"""A rehearsal's figures as the GPU it played would show them, each with the model's own error beside it.

The built-in target's figures are converted by the run's time scale (llmload/timescale.py: times x SPEEDUP, rates /
SPEEDUP), row by row of the metric tables (results/metrics.py): every run-level figure whose kind a time scale
changes, and every per-request metric. A prediction is only as good as the profile that made it: each profile
records how it was validated (``validation``: its held-out errors per figure, from ``make calibrate``'s leave one
operating point out, or ``unvalidated`` for one extrapolated by hardware figures), the target reports it, and every
predicted figure carries that error (``model_error``) beside its sampling interval. Pure; the raw figures stay
where they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmload.results.metrics import MEASURED_RUN_METRICS, METRICS, RUN_BY_NAME, run_metric_fields
from llmload.results.provenance import is_rehearsal
from llmload.timescale import TimeScale, time_scale_of

__all__ = ["Times", "Predicted", "PREDICTED_RUN_METRICS", "predicted_label", "kind_of", "scaled_distribution",
           "predict_played", "model_error_of", "validation_words", "band"]

PREDICTED_RUN_METRICS = tuple(m for m in MEASURED_RUN_METRICS if m.kind in ("time", "rate"))
"""The run-level figures a time scale changes (shares and counts are the target's as they are)."""
_STANDS_IN = {"ttft_median_ms": "server_ttft_mean_ms", "tpot_median_ms": "server_itl_mean_ms"}
"""A validation without the client's figure (answers in one burst) has the server's own, which the model predicts too."""


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


def _with_table_fields(cls: type) -> type:
    """After ``cls``'s own fields, one per run-level figure a time scale changes (with its interval), then one Times per
    per-request metric: a row added to a table is a predicted figure here."""
    cls.__annotations__ = {**cls.__annotations__, **run_metric_fields(PREDICTED_RUN_METRICS),
                           **{m.summary: "Times" for m in METRICS}}
    return cls


@dataclass(frozen=True)
@_with_table_fields
class Predicted:
    """A rehearsal's figures for the GPU it played, and how far its model can be trusted."""

    label: str
    """``predicted for h200 (profile h200-gpt-oss-20b-bf16, measured; SPEEDUP 20x scaled back)``."""
    gpu: str
    profile: str | None
    profile_kind: str | None
    """measured (fitted to a real server) or extrapolated (scaled from one by hardware figures)."""
    scaled_by: float
    """The target's SPEEDUP: its times were multiplied by it, its rates divided."""
    validated: bool
    """The profile was checked against measurements it was not fitted to; False: extrapolated, never checked."""
    validation: str
    """In words: how the profile was validated, or that it never was."""
    model_error: dict[str, float | None]
    """Per predicted figure (``rps``, ``ttft_ms``, ...), the model's relative error on operating points it was not
    fitted to (the profile's worst held-out error); None where the profile was not validated for it."""


def predicted_label(served_by: dict[str, Any]) -> str:
    """``predicted for <gpu> (...)``: what a rehearsal's scaled figures stand for."""
    profile = served_by.get("profile")
    kind = served_by.get("profile_kind")
    detail = f"profile {profile}, {kind}" if profile and kind else f"profile {profile}" if profile else \
        f"built-in target, {kind}" if kind else "built-in target"
    scale = TimeScale(float(served_by.get("speedup") or 1.0))
    scaled = f"; {scale.text()} scaled back" if scale.sped_up else ""
    unvalidated = "" if _validation(served_by).get("status") != "unvalidated" else "; UNVALIDATED"
    return f"predicted for {served_by.get('gpu_profile') or '?'} ({detail}{scaled}{unvalidated})"


def kind_of(field_name: str) -> str:
    """A summary field's kind (results/metrics.py): a metric's Distribution is a time, a run-level figure its row's."""
    if field_name in RUN_BY_NAME:
        return RUN_BY_NAME[field_name].kind
    return "time" if any(m.summary == field_name for m in METRICS) else "count"


def scaled_distribution(d: Any, factor: float) -> Times:
    """A summary Distribution's times (and intervals) multiplied by ``factor``."""
    def times(name: str) -> float | None:
        value = getattr(d, name)
        return None if value is None else value * factor

    def interval(ci: list[float] | None) -> list[float] | None:
        return None if ci is None else [ci[0] * factor, ci[1] * factor]

    return Times(mean=times("mean"), median=times("median"), median_ci95=interval(d.median_ci95),
                 p90=times("p90"), p90_ci95=interval(d.p90_ci95), p99=times("p99"), p99_ci95=interval(d.p99_ci95))


def _validation(served_by: dict[str, Any]) -> dict[str, Any]:
    value = served_by.get("validation")
    return value if isinstance(value, dict) else {"status": "unvalidated", "method": "the target did not say how its "
                                                  "profile was validated (results from before it did)"}


def model_error_of(validation: dict[str, Any], validated_by: str) -> float | None:
    """The relative error a profile's validation gives for one of its figures (worst held out); None when it has none."""
    errors = validation.get("errors") or {}
    for name in (validated_by, _STANDS_IN.get(validated_by, "")):
        entry = errors.get(name)
        if isinstance(entry, dict) and entry.get("worst_abs") is not None:
            return float(entry["worst_abs"])
    return None


def validation_words(validation: dict[str, Any]) -> str:
    """How a profile was validated, in words a first-time reader cannot take for a measurement."""
    status = validation.get("status")
    if status == "validated":
        return (f"VALIDATED: {validation.get('method') or 'held-out operating points'}; each figure's model error is the "
                "profile's worst error on operating points it was not fitted to")
    if status == "fixed":
        return "fixed timings (FIXED_TTFT_MS, FIXED_ITL_MS): no model, no model error"
    return (f"UNVALIDATED prediction: {validation.get('method') or 'no measurement checked this profile'}. These figures "
            "are a model's guess for a GPU nobody measured with it: they are not measurements, and their intervals "
            "below are sampling intervals only")


def band(value: float | None, error: float | None) -> list[float] | None:
    """The model's error band around a predicted value: [value x (1 - error), value x (1 + error)]."""
    if value is None or error is None:
        return None
    return [value * (1.0 - error), value * (1.0 + error)]


def predict_played(measures: Any, served_by: dict[str, Any] | None) -> Predicted | None:
    """The figures of ``measures`` for the GPU a rehearsal played; None for a real server's run."""
    if not is_rehearsal(served_by):
        return None
    assert served_by is not None
    scale = time_scale_of({"served_by": served_by})
    validation = _validation(served_by)
    figures: dict[str, Any] = {}
    errors: dict[str, float | None] = {}
    for m in PREDICTED_RUN_METRICS:
        figures[m.name] = scale.played(getattr(measures, m.name), m.kind)
        if m.interval:
            figures[f"{m.name}_ci95"] = scale.played_interval(getattr(measures, f"{m.name}_ci95"), m.kind)
        if m.validated_by:
            errors[m.name] = model_error_of(validation, m.validated_by)
    for metric in METRICS:
        figures[metric.summary] = scaled_distribution(getattr(measures, metric.summary), scale.factor(metric.kind))
        errors[metric.summary] = model_error_of(validation, metric.validated_by)
    return Predicted(label=predicted_label(served_by), gpu=str(served_by.get("gpu_profile") or "?"),
                     profile=served_by.get("profile"), profile_kind=served_by.get("profile_kind"), scaled_by=scale.speedup,
                     validated=validation.get("status") in ("validated", "fixed"), validation=validation_words(validation),
                     model_error=errors, **figures)

