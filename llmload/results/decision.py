"""The GPU decision, computed: per GPU x model, the load it takes at the SLO and the metric table's decision figures
there (output tokens/s, what a million tokens cost), each with its 95% interval and, for a rehearsal, its model's
own error; a rehearsal's figures are predictions for the GPU it played.

The capacity comes from ``make capacity`` (capacity.json: the search's answer and interval) when there is one,
else from a sweep's runs: the largest load whose run met every SLO (no interval). A run's load is what it set:
USERS (closed loop), RATE (open loop), or a trace's TRACE_SPEED; runs are compared only with runs of the same kind.
Pure: summaries in, rows out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from llmload.results.metrics import RUN_METRICS, RunMetric
from llmload.results.provenance import bare_model_name, served_by_of

__all__ = ["DecisionFigure", "CapacityPoint", "capacity_point", "DecisionRow", "decision_rows", "DECISION_METRICS",
           "figure_of", "load_of"]

DECISION_METRICS: tuple[RunMetric, ...] = tuple(m for m in RUN_METRICS if m.decision)
"""The run-level figures the decision shows at each GPU x model's capacity (the table's ``decision`` rows)."""
_POINT_METRICS: tuple[RunMetric, ...] = tuple(m for m in RUN_METRICS if m.decision or m.name == "rps")


@dataclass(frozen=True)
class DecisionFigure:
    """One figure of a run for the decision: as measured, or predicted for the GPU a rehearsal played."""

    name: str
    """Its row of the run-level metric table (results/metrics.py)."""
    label: str
    value: float | None
    ci95: list[float] | None
    model_error: float | None = None
    """A prediction's relative model error (its profile's worst held-out error); None for a measurement, or where the
    profile was not validated."""


def figure_of(summary: Any, metric: RunMetric) -> DecisionFigure:
    """A run's figure of ``metric``: a rehearsal's predicted for its GPU (money: at the predicted rates), else measured."""
    predicted = getattr(summary, "predicted", None)
    if metric.home == "cost":
        cost = summary.cost
        value = getattr(cost, metric.name) if cost is not None else None
        ci = getattr(cost, f"{metric.name}_ci95") if cost is not None else None
        error_of = metric.prices
    else:
        source = predicted if predicted is not None and hasattr(predicted, metric.name) else summary
        value, ci, error_of = getattr(source, metric.name), getattr(source, f"{metric.name}_ci95", None), metric.name
    error = predicted.model_error.get(error_of) if predicted is not None else None
    return DecisionFigure(metric.name, metric.label, value, ci, error)


def _basis(summary: Any) -> str:
    predicted = getattr(summary, "predicted", None)
    return predicted.label if predicted is not None else "measured"


@dataclass(frozen=True)
class CapacityPoint:
    """A run at the capacity found: its decision figures for the GPU (predicted for a rehearsal)."""

    load: float
    basis: str
    """``measured`` or ``predicted for <gpu> (...)``."""
    figures: list[DecisionFigure]
    usd_per_gpu_hour: float | None
    gpus: int
    price_source: str


def capacity_point(summary: Any, load: float) -> CapacityPoint:
    cost = summary.cost
    return CapacityPoint(load, _basis(summary), [figure_of(summary, m) for m in _POINT_METRICS],
                         cost.usd_per_gpu_hour if cost is not None else None, cost.gpus if cost is not None else 1,
                         cost.price_source if cost is not None else "no cost computed")


@dataclass(frozen=True)
class DecisionRow:
    """One GPU x model: capacity at the SLO, and the decision figures there."""

    gpu: str
    model: str
    slo: str
    predicted: bool
    """From rehearsals: predictions for the GPU (see ``basis``), not measurements."""
    validated: bool
    """A measurement, or a prediction by a profile checked against measurements; False: an unvalidated prediction."""
    basis: str
    capacity: float | None
    capacity_ci95: list[float | None] | None
    capacity_by: str
    """users, rate, or trace_speed."""
    capacity_from: str
    figures: list[DecisionFigure]
    """One per DECISION_METRICS row, in the table's order."""
    usd_per_gpu_hour: float | None
    gpus: int
    runs: int


def load_of(config: dict[str, Any]) -> tuple[str, float]:
    """(what a run's load is measured in, how much): ``trace_speed`` for a trace replay, ``rate`` for RATE, else
    ``users``."""
    if config.get("trace"):
        return "trace_speed", float(config.get("trace_speed") or 1.0)
    if config.get("rate"):
        return "rate", float(config["rate"])
    return "users", float(config.get("users") or 0)


def _gpu_model(summary: Any) -> tuple[str, str]:
    config = summary.config
    served = served_by_of(config) or {}
    return str(config.get("gpu") or served.get("gpu_profile") or "?"), bare_model_name(str(config.get("model") or "?"))


def decision_rows(runs: Sequence[Any], capacities: Sequence[tuple[Any, Any]] = ()) -> list[DecisionRow]:
    """Rows per GPU x model (and kind of load) from run summaries and ``(capacity result, summary at the capacity)``
    pairs."""
    rows: list[DecisionRow] = []
    searched: set[tuple[str, str]] = set()
    for result, at in capacities:
        key = _gpu_model(at)
        searched.add(key)
        rows.append(_row(key, at, result.answer, list(result.answer_ci95), result.by, "capacity search", 1 + len(result.steps)))
    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for summary in runs:
        if _gpu_model(summary) not in searched:
            groups[(*_gpu_model(summary), load_of(summary.config)[0])].append(summary)
    for (gpu, model, by), summaries in sorted(groups.items()):
        passing = [s for s in summaries if s.slo_met]
        best = max(passing, key=lambda s: load_of(s.config)[1], default=None)
        if best is None:
            best = max(summaries, key=lambda s: load_of(s.config)[1])
            rows.append(_row((gpu, model), best, None, None, by, "no run met the SLO" if any(s.slo for s in summaries)
                             else "no SLO: the largest load run", len(summaries)))
        else:
            rows.append(_row((gpu, model), best, load_of(best.config)[1], None, by,
                             "largest load meeting the SLO among the runs", len(summaries)))
    return rows


def _row(key: tuple[str, str], at: Any, capacity: float | None, interval: list[float | None] | None, by: str,
         how: str, runs: int) -> DecisionRow:
    predicted = getattr(at, "predicted", None)
    cost = at.cost
    return DecisionRow(
        gpu=key[0], model=key[1], slo=str(at.config.get("slo") or ""), predicted=predicted is not None,
        validated=predicted is None or predicted.validated, basis=_basis(at), capacity=capacity,
        capacity_ci95=interval, capacity_by=by, capacity_from=how, figures=[figure_of(at, m) for m in DECISION_METRICS],
        usd_per_gpu_hour=cost.usd_per_gpu_hour if cost else None, gpus=cost.gpus if cost else 1, runs=runs)
