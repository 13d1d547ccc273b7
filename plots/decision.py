"""The decision table of report.html: per GPU x model, capacity at the SLO, output tokens/s there and the cost per
million tokens, with intervals; rows from rehearsals say they are predictions (llmload/results/decision.py computes).
"""

from __future__ import annotations

from typing import Sequence

from llmload.results.decision import DecisionRow, decision_rows
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


def _value(value: float | None, ci: Sequence[float | None] | None = None, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    text = f"{value:.{digits}g}"
    if ci and ci[0] is not None:
        text += f" [{ci[0]:.{digits}g}, {'n/a' if ci[1] is None else f'{ci[1]:.{digits}g}'}]"
    return text


def decision_table(results: Sequence[Results]) -> Table | None:
    """The table when the results span GPUs (or hold a capacity search); None otherwise."""
    rows = rows_of(results)
    if len({r.gpu for r in rows}) < 2:
        return None
    body = tuple((
        r.gpu + (" (predicted)" if r.predicted else ""), r.model, r.slo or "none",
        f"{r.capacity_by}={_value(r.capacity, r.capacity_ci95)}", r.capacity_from,
        _value(r.output_throughput_tok_s, r.output_throughput_tok_s_ci95),
        _value(r.usd_per_million_output_tokens, r.usd_per_million_output_tokens_ci95, 3),
        _value(r.usd_per_million_goodput_tokens, r.usd_per_million_goodput_tokens_ci95, 3),
        "n/a" if r.usd_per_gpu_hour is None else f"{r.usd_per_gpu_hour:g} x {r.gpus}", r.basis) for r in rows)
    headers = ("GPU", "model", "SLO", "capacity [95% interval]", "capacity from", "output tok/s at it",
               "USD per million output tokens", "USD per million goodput tokens", "USD per GPU-hour x GPUs", "figures")
    notes = ("Rows marked (predicted) come from rehearsals on the built-in target: predictions for that GPU by its "
             "profile (measured: fitted to a real server; extrapolated: scaled by hardware figures), not measurements.",
             "Prices are PRICE where given, else the GPU's default list price (summary.json cost.price_source says which).")
    return Table(headers, body, ("l", "l", "l", "r", "l", "r", "r", "r", "r", "l"),
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
            rows.append((c.label, p.label, f"{_value(p.rps, p.rps_ci95)} ({_value(s.rps)})",
                         f"{_value(p.ttft_ms.median, p.ttft_ms.median_ci95)} ({_value(s.ttft_ms.median)})",
                         f"{_value(p.tpot_ms.median, p.tpot_ms.median_ci95)} ({_value(s.tpot_ms.median)})",
                         f"{_value(p.response_time_ms.median, p.response_time_ms.median_ci95)} ({_value(s.response_time_ms.median)})"))
    if not rows:
        return None
    headers = ("cell", "figures", "req/s [95%] (raw)", "median TTFT ms [95%] (raw)", "median TPOT ms [95%] (raw)",
               "median E2E ms [95%] (raw)")
    return Table(headers, tuple(rows), ("l", "l", "r", "r", "r", "r"),
                 ("Predicted: the built-in target's times x SPEEDUP and rates / SPEEDUP, for the GPU its profile plays; "
                  "(raw): as measured on the sped-up target.",))
