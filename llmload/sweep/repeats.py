"""The spread between repeated runs of a sweep cell (REPEATS=k), beside each run's own 95% intervals.

A run's interval says how sure its number is from its own requests; the spread between runs also
holds what changes from one run to the next (the server's state, the machine). A spread much wider
than the runs' intervals says the intervals understate the uncertainty. Pure functions of cells.csv rows.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["HEADLINE", "Spread", "spread", "spread_rows", "format_spread"]

HEADLINE = ("rps", "output_throughput_tok_s", "goodput_rps", "ttft_ms_median", "ttft_ms_p90", "ttfvt_ms_median",
            "tpot_ms_median", "itl_ms_median", "response_time_ms_median")
"""The cells.csv columns whose spread between runs is reported."""


@dataclass(frozen=True)
class Spread:
    """One metric over a cell's runs."""

    runs: int
    """Runs that measured it."""
    mean: float | None
    min: float | None
    max: float | None
    stdev: float | None
    """Sample standard deviation between the runs; None with fewer than 2."""
    run_ci95_width_mean: float | None
    """The mean width (hi - lo) of the runs' own 95% intervals; None when no run had one."""


def spread(values: Sequence[float], intervals: Sequence[tuple[float, float]] = ()) -> Spread:
    """The spread of one metric's ``values`` (one per run), and the mean width of the runs' ``intervals``."""
    widths = [hi - lo for lo, hi in intervals]
    return Spread(len(values), statistics.fmean(values) if values else None, min(values, default=None),
                  max(values, default=None), statistics.stdev(values) if len(values) > 1 else None,
                  statistics.fmean(widths) if widths else None)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def spread_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per cell (by key, in the order rows first name it) from cells.csv rows, one per run.

    Columns: cell, key, label, runs, then per HEADLINE metric <m>_mean, _min, _max, _stdev, _run_ci95_width_mean.
    """
    by_key: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault(row["key"], []).append(row)
    out = []
    for key, runs in by_key.items():
        line: dict[str, Any] = {"cell": runs[0]["cell"], "key": key, "label": runs[0]["label"], "runs": len(runs)}
        for metric in HEADLINE:
            values = [v for v in (_number(r.get(metric)) for r in runs) if v is not None]
            bounds = [(_number(r.get(f"{metric}_ci95_lo")), _number(r.get(f"{metric}_ci95_hi"))) for r in runs]
            measured = spread(values, [(lo, hi) for lo, hi in bounds if lo is not None and hi is not None])
            line.update({f"{metric}_{name}": getattr(measured, name) for name in ("mean", "min", "max", "stdev", "run_ci95_width_mean")})
        out.append(line)
    return out


def format_spread(row: dict[str, Any], metrics: Sequence[str] = ("rps", "ttft_ms_median", "tpot_ms_median")) -> str:
    """One line: each metric's min-max and standard deviation over the runs, and a run's own interval width."""
    def number(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3g}"

    parts = [f"{m} {number(row[f'{m}_min'])}-{number(row[f'{m}_max'])} (sd {number(row[f'{m}_stdev'])}; "
             f"one run's 95% interval {number(row[f'{m}_run_ci95_width_mean'])} wide)" for m in metrics if row[f"{m}_min"] is not None]
    return f"cell {row['cell']} {row['label']}, {row['runs']} runs: " + "; ".join(parts)
