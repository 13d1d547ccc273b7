"""The GPU decision, computed: per GPU x model, the load it takes at the SLO, its output tokens/s there, and what a
million tokens cost there, each with its 95% interval; a rehearsal's figures are predictions for the GPU it played.

The capacity comes from ``make capacity`` (capacity.json: the search's answer and interval) when there is one,
else from a sweep's cells: the largest load whose run met every SLO (no interval). Pure: summaries in, rows out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from llmload.results.provenance import bare_model_name, served_by_of

__all__ = ["CapacityPoint", "capacity_point", "DecisionRow", "decision_rows", "played_rates"]


@dataclass(frozen=True)
class CapacityPoint:
    """A run at the capacity found: its rates for the GPU (predicted for a rehearsal) and its cost."""

    load: float
    basis: str
    """``measured`` or ``predicted for <gpu> (...)``."""
    rps: float
    rps_ci95: list[float] | None
    output_throughput_tok_s: float
    output_throughput_tok_s_ci95: list[float] | None
    cost: dict[str, Any] | None
    """summary.json's ``cost`` of that run: USD per million tokens and per thousand requests with intervals."""


def played_rates(summary: Any) -> tuple[str, float, list[float] | None, float, list[float] | None]:
    """(basis, rps, its interval, output tok/s, its interval): a rehearsal's predicted for its GPU, else measured."""
    source = summary.predicted if getattr(summary, "predicted", None) is not None else summary
    basis = summary.predicted.label if source is not summary else "measured"
    return (basis, source.rps, source.rps_ci95, source.output_throughput_tok_s, source.output_throughput_tok_s_ci95)


def capacity_point(summary: Any, load: float) -> CapacityPoint:
    basis, rps, rps_ci, out, out_ci = played_rates(summary)
    return CapacityPoint(load, basis, rps, rps_ci, out, out_ci, asdict(summary.cost) if summary.cost is not None else None)


@dataclass(frozen=True)
class DecisionRow:
    """One GPU x model: capacity at the SLO, output tokens/s and cost there."""

    gpu: str
    model: str
    slo: str
    predicted: bool
    """From rehearsals: predictions for the GPU (see ``basis``), not measurements."""
    basis: str
    capacity: float | None
    capacity_ci95: list[float | None] | None
    capacity_by: str
    """users or rate."""
    capacity_from: str
    output_throughput_tok_s: float | None
    output_throughput_tok_s_ci95: list[float] | None
    usd_per_million_output_tokens: float | None
    usd_per_million_output_tokens_ci95: list[float] | None
    usd_per_million_goodput_tokens: float | None
    usd_per_million_goodput_tokens_ci95: list[float] | None
    usd_per_gpu_hour: float | None
    gpus: int
    runs: int


def _gpu_model(summary: Any) -> tuple[str, str]:
    config = summary.config
    served = served_by_of(config) or {}
    return str(config.get("gpu") or served.get("gpu_profile") or "?"), bare_model_name(str(config.get("model") or "?"))


def decision_rows(runs: Sequence[Any], capacities: Sequence[tuple[Any, Any]] = ()) -> list[DecisionRow]:
    """Rows per GPU x model from run summaries and ``(capacity result, summary at the capacity)`` pairs."""
    rows: list[DecisionRow] = []
    searched: set[tuple[str, str]] = set()
    for result, at in capacities:
        key = _gpu_model(at)
        searched.add(key)
        rows.append(_row(key, at, result.answer, list(result.answer_ci95), result.by, "capacity search", 1 + len(result.steps)))
    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for summary in runs:
        if _gpu_model(summary) not in searched:
            groups[_gpu_model(summary)].append(summary)
    for key, summaries in sorted(groups.items()):
        passing = [s for s in summaries if s.slo_met and not s.config.get("rate")]
        best = max(passing, key=lambda s: s.config.get("users") or 0, default=None)
        if best is None:
            best = max(summaries, key=lambda s: s.config.get("users") or 0)
            rows.append(_row(key, best, None, None, "users", "no run met the SLO" if any(s.slo for s in summaries)
                             else "no SLO: the largest load run", len(summaries)))
        else:
            rows.append(_row(key, best, float(best.config.get("users") or 0), None, "users",
                             "largest load meeting the SLO among the runs", len(summaries)))
    return rows


def _row(key: tuple[str, str], at: Any, capacity: float | None, interval: list[float | None] | None, by: str,
         how: str, runs: int) -> DecisionRow:
    basis, _, _, out, out_ci = played_rates(at)
    cost = at.cost
    return DecisionRow(
        gpu=key[0], model=key[1], slo=str(at.config.get("slo") or ""), predicted=basis != "measured", basis=basis,
        capacity=capacity, capacity_ci95=interval, capacity_by=by, capacity_from=how, output_throughput_tok_s=out,
        output_throughput_tok_s_ci95=out_ci,
        usd_per_million_output_tokens=cost.usd_per_million_output_tokens if cost else None,
        usd_per_million_output_tokens_ci95=cost.usd_per_million_output_tokens_ci95 if cost else None,
        usd_per_million_goodput_tokens=cost.usd_per_million_goodput_tokens if cost else None,
        usd_per_million_goodput_tokens_ci95=cost.usd_per_million_goodput_tokens_ci95 if cost else None,
        usd_per_gpu_hour=cost.usd_per_gpu_hour if cost else None, gpus=cost.gpus if cost else 1, runs=runs)
