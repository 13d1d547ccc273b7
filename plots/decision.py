"""The decision table of report.html: per GPU x model, capacity at the SLO, output tokens/s there and the cost per
million tokens, with intervals; rows from rehearsals say they are predictions (llmload/results/decision.py computes).
"""

from __future__ import annotations

from typing import Sequence

from llmload.results.decision import DECISION_METRICS, DecisionFigure, DecisionRow, decision_rows
from llmload.results.report import figure_text
from llmload.results.storage import CAPACITY_FILE
from llmload.results.sweepfiles import read_capacity
from plots.results import Results
from plots.tables import Table

__all__ = ["decision_table", "predicted_table", "rows_of"]


def rows_of(results: Sequence[Results]) -> list[DecisionRow]:
    """Decision rows: a capacity search's answer where a folder holds one, else the runs' largest passing load."""
    capacities, runs = [], []
    for r in results:
        if (r.path / CAPACITY_FILE).exists():
            result = read_capacity(r.path)
            at = next((c for c in r.cells if result.answer is not None and any(
                s.key == c.key and s.load == result.answer for s in result.steps)), None)
            if at is not None:
                capacities.append((result, at.summary))
                continue
        runs += [c.summary for c in r.cells if c.complete]
    return decision_rows(runs, capacities)


def _figure(f: DecisionFigure, predicted: bool, validated: bool) -> str:
    if predicted and not validated:
        return figure_text(f.value, f.ci95, digits=3) + " UNVALIDATED"
    return figure_text(f.value, f.ci95, f.model_error, digits=3)


def decision_table(results: Sequence[Results]) -> Table | None:
    """The table when the results span GPUs (or hold a capacity search); None otherwise."""
    rows = rows_of(results)
    if len({r.gpu for r in rows}) < 2:
        return None
    body = tuple((
        r.gpu + ("" if not r.predicted else " (predicted)" if r.validated else " (predicted, UNVALIDATED)"), r.model,
        r.slo or "none", f"{r.capacity_by}={figure_text(r.capacity, r.capacity_ci95)}", r.capacity_from,
        *(_figure(f, r.predicted, r.validated) for f in r.figures),
        "n/a" if r.usd_per_gpu_hour is None else f"{r.usd_per_gpu_hour:g} x {r.gpus}", r.basis) for r in rows)
    headers = ("GPU", "model", "SLO", "capacity [95% interval]", "capacity from", *(f"{m.label} at it" for m in DECISION_METRICS),
               "USD per GPU-hour x GPUs", "figures")
    notes = ("Rows marked (predicted) come from rehearsals on the built-in target: predictions for that GPU by its "
             "profile, not measurements. [lo, hi] is the sampling interval; 'model ±e%' the profile's own error on "
             "operating points it was not fitted to (its worst held out). UNVALIDATED: a profile extrapolated by "
             "hardware figures that no measurement has checked.",
             "Prices are PRICE where given, else the GPU's default list price (summary.json cost.price_source says which).")
    return Table(headers, body, ("l", "l", "l", "r", "l", *("r" for _ in DECISION_METRICS), "r", "l"),
                 notes if any(r.predicted for r in rows) else notes[1:])


def predicted_table(results: Sequence[Results]) -> Table | None:
    """Rehearsed cells' figures predicted for the GPU each played, the raw sped-up ones beside them; None without any."""
    rows = []
    for r in results:
        for c in r.cells:
            p = c.summary.predicted
            if p is None:
                continue
            s = c.summary
            error = p.model_error.get
            rows.append((c.label, p.label, f"{figure_text(p.rps, p.rps_ci95, model_error=error('rps'))} ({figure_text(s.rps)})",
                         *(f"{figure_text(getattr(p, name).median, getattr(p, name).median_ci95, model_error=error(name))} "
                           f"({figure_text(getattr(s, name).median)})" for name in ("ttft_ms", "tpot_ms", "response_time_ms")),
                         "yes" if p.validated else "UNVALIDATED"))
    if not rows:
        return None
    headers = ("cell", "figures", "req/s [95%] model error (raw)", "median TTFT ms [95%] model error (raw)",
               "median TPOT ms [95%] model error (raw)", "median E2E ms [95%] model error (raw)", "profile validated")
    return Table(headers, tuple(rows), ("l", "l", "r", "r", "r", "r", "l"),
                 ("Predicted: the built-in target's figures converted by the run's time scale (times x its SPEEDUP, rates "
                  "/ it) for the GPU its profile plays; [95%] the sampling interval, 'model ±e%' the profile's worst "
                  "held-out error; (raw): as measured on the target.",))
