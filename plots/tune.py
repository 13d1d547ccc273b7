"""A tune's figures and report (OUT/figures/, OUT/report.html) from OUT/tune.json: the objective per configuration
with its interval, the Pareto frontier of output tokens/s per GPU against output tokens/s per user over every
configuration and load (frontier points marked), and the 000 report's table: the baseline against each configuration
per workload, total tokens/s and mean TPOT with the change in percent and its interval. A rehearsal's are labelled
as predictions.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from llmload.results.tunefile import MEASURED, ConfigResult, TuneResult, read_tune
from plots.drawing import PALETTE, STYLE, FigureData, plt, save_figure
from plots.html import CSS, _svg, table_html
from plots.tables import Table

__all__ = ["ParetoPoint", "pareto_points", "frontier", "versus_table", "objective_figure", "pareto_figure",
           "tune_figures"]


@dataclass(frozen=True)
class ParetoPoint:
    config: str
    load: str
    per_user: float
    """Output tokens/s per user (the speed one user sees)."""
    per_gpu: float
    """Output tokens/s per GPU (what the hardware delivers)."""


def pareto_points(result: TuneResult) -> list[ParetoPoint]:
    """Every measured configuration's every load: (tokens/s per user, tokens/s per GPU)."""
    points = []
    for config in result.configurations:
        for cell in config.cells:
            if cell.output_throughput_tok_s and cell.users:
                points.append(ParetoPoint(config.name, cell.label, cell.output_throughput_tok_s / cell.users,
                                          cell.output_throughput_tok_s / max(1, result.gpus)))
    return points


def frontier(points: Sequence[ParetoPoint]) -> list[ParetoPoint]:
    """The points no other beats on both axes (higher per user and higher per GPU), by tokens/s per user."""
    return sorted((p for p in points if not any(q.per_user >= p.per_user and q.per_gpu >= p.per_gpu and
                                                (q.per_user, q.per_gpu) != (p.per_user, p.per_gpu) for q in points)),
                  key=lambda p: p.per_user)


def _change(new: float | None, new_ci: Sequence[float] | None, base: float | None, base_ci: Sequence[float] | None,
            higher_is_better: bool) -> str:
    """``+6.0% [+2.1, +9.9]``: the change and its interval (the ratio's, from the two intervals in log space)."""
    if not new or not base:
        return "n/a"
    change = (new / base - 1) * 100
    if not new_ci or not base_ci or min(*new_ci, *base_ci) <= 0:
        return f"{change:+.1f}%"
    se = math.hypot(*((math.log(ci[1]) - math.log(ci[0])) / (2 * 1.96) for ci in (new_ci, base_ci)))
    low, high = ((new / base) * math.exp(d) * 100 - 100 for d in (-1.96 * se, 1.96 * se))
    beyond = "" if low <= 0 <= high else (" better" if (low > 0) == higher_is_better else " worse")
    return f"{change:+.1f}% [{low:+.1f}, {high:+.1f}]{beyond}"


def versus_table(result: TuneResult) -> Table | None:
    """The 000 report's table: per workload, the baseline against each configuration (total tokens/s, mean TPOT)."""
    base = result.configurations[0] if result.configurations else None
    if base is None or not base.cells:
        return None
    rows = []
    for config in result.configurations[1:]:
        for b, c in zip(base.cells, config.cells):
            rows.append((b.label, config.name, _num(b.total_throughput_tok_s), _num(c.total_throughput_tok_s),
                         _change(c.total_throughput_tok_s, c.total_throughput_tok_s_ci95, b.total_throughput_tok_s,
                                 b.total_throughput_tok_s_ci95, True),
                         _num(b.tpot_mean_ms, 2), _num(c.tpot_mean_ms, 2),
                         _change(c.tpot_mean_ms, c.tpot_mean_ms_ci95, b.tpot_mean_ms, b.tpot_mean_ms_ci95, False)))
    if not rows:
        return None
    notes = ("Change in percent with its 95% interval (from the two runs' own intervals); 'better' or 'worse' where "
             "the interval excludes no change. Mean TPOT: lower is better.",)
    if result.rehearsal:
        notes += (f"REHEARSAL: {result.label}: predictions, not measurements.",)
    return Table(("workload", "configuration", f"{base.name} total tok/s", "total tok/s", "change",
                  f"{base.name} mean TPOT ms", "mean TPOT ms", "change"),
                 tuple(rows), ("l", "l", "r", "r", "r", "r", "r", "r"), notes)


def _num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _stamp(result: TuneResult) -> str:
    return f"REHEARSAL: {result.label}: predictions, not measurements" if result.rehearsal else ""


def objective_figure(result: TuneResult, out: Path) -> FigureData:
    """Each measured configuration's objective with its 95% interval; the baseline's as a line."""
    data = FigureData("tune_objective", f"Tune: {result.objective} per configuration", "configuration", result.unit,
                      stamp=_stamp(result))
    shown = [c for c in result.configurations if c.objective is not None]
    if not shown:
        data.note = "no configuration was measured"
        return data
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(shown) + 2), 3.6), layout="constrained")
        for i, c in enumerate(shown):
            ci = c.objective_ci95 or [c.objective, c.objective]
            low = c.objective - (ci[0] if ci[0] is not None else c.objective)
            high = (ci[1] - c.objective) if ci[1] is not None else 0.0
            color = PALETTE[0] if c.name == result.best else PALETTE[1] if c.status == MEASURED else "#999999"
            ax.errorbar([i], [c.objective], yerr=[[low], [high]], fmt="o", color=color, capsize=4)
        base = result.configurations[0]
        if base.objective is not None:
            ax.axhline(base.objective, color="#555555", linestyle="--", linewidth=1, label=f"baseline ({base.name})")
            ax.legend(loc="best", fontsize=7)
        ax.set_xticks(range(len(shown)), [c.name for c in shown], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(result.unit)
        data.files = save_figure(fig, out, data.name, data.title, data.stamp)
    data.extra["objective"] = {c.name: (c.objective, c.objective_ci95) for c in shown}
    return data


def pareto_figure(result: TuneResult, out: Path) -> FigureData:
    """Output tokens/s per GPU against output tokens/s per user, every configuration and load; the frontier marked."""
    data = FigureData("tune_pareto", "Tune: Pareto frontier", "output tokens/s per user", "output tokens/s per GPU",
                      stamp=_stamp(result))
    points = pareto_points(result)
    if not points:
        data.note = "no configuration has a load with tokens/s and users"
        return data
    best = frontier(points)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(5.5, 4.0), layout="constrained")
        names = list(dict.fromkeys(p.config for p in points))
        for i, name in enumerate(names):
            mine = [p for p in points if p.config == name]
            ax.scatter([p.per_user for p in mine], [p.per_gpu for p in mine], color=PALETTE[i % len(PALETTE)],
                       label=name, s=18)
        ax.plot([p.per_user for p in best], [p.per_gpu for p in best], color="black", linewidth=1, label="frontier")
        ax.scatter([p.per_user for p in best], [p.per_gpu for p in best], facecolors="none", edgecolors="black", s=80)
        ax.legend(fontsize=6, loc="best")
        ax.set_xlabel(data.xlabel)
        ax.set_ylabel(data.ylabel)
        data.files = save_figure(fig, out, data.name, data.title, data.stamp)
    data.extra["frontier"] = [(p.config, p.load) for p in best]
    return data


def _ranking_table(result: TuneResult) -> Table:
    rows = []
    for rank, name in enumerate(result.ranking, 1):
        c = next(x for x in result.configurations if x.name == name)
        rows.append((str(rank), c.name, _interval(c), _versus(c, result), c.status,
                     "n/a" if c.startup_s is None else f"{c.startup_s:.0f}", ", ".join(c.not_modelled) or "-"))
    for c in result.configurations:
        if c.name not in result.ranking:
            rows.append(("-", c.name, "n/a", "n/a", c.status + (f": {c.reason}" if c.reason else ""),
                         "n/a" if c.startup_s is None else f"{c.startup_s:.0f}", ", ".join(c.not_modelled) or "-"))
    return Table(("rank", "configuration", f"{result.objective} [95% interval]", "vs baseline [95% interval]", "status",
                  "startup s", "not modelled (rehearsal)"), tuple(rows), ("r", "l", "r", "r", "l", "r", "l"),
                 (f"Stopped because {result.stopped_because}.",))


def _interval(c: ConfigResult) -> str:
    ci = c.objective_ci95 or [None, None]
    return "n/a" if c.objective is None else f"{c.objective:.4g} [{'n/a' if ci[0] is None else f'{ci[0]:.4g}'}, " \
                                             f"{'n/a' if ci[1] is None else f'{ci[1]:.4g}'}]"


def _versus(c: ConfigResult, result: TuneResult) -> str:
    if c.name == result.configurations[0].name:
        return "baseline"
    if c.vs_baseline_pct is None:
        return "n/a"
    ci = c.vs_baseline_ci95 or [None, None]
    verdict = {True: "beyond noise", False: "within noise", None: ""}[c.beyond_noise]
    interval = "" if None in ci else f" [{ci[0]:+.1f}, {ci[1]:+.1f}]"
    return f"{c.vs_baseline_pct:+.1f}%{interval} {verdict}".strip()


def tune_figures(out: Path) -> Path:
    """Draw the tune's figures into OUT/figures and write OUT/report.html; its path."""
    out = Path(out)
    result = read_tune(out)
    figures = [objective_figure(result, out / "figures"), pareto_figure(result, out / "figures")]
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>tune: {html.escape(out.name)}</title>"
             f"<style>{CSS}</style></head><body><h1>Tune: {html.escape(out.name)}</h1>"]
    if result.rehearsal:
        parts.append(f'<p class="rehearsal">REHEARSAL: {html.escape(result.label)}: the built-in target played each '
                     "configuration; these are predictions, not measurements.</p>")
    parts.append("<h2>Configurations, ranked</h2>" + table_html(_ranking_table(result)))
    versus = versus_table(result)
    if versus is not None:
        parts.append("<h2>Baseline against each configuration, per workload</h2>" + table_html(versus))
    for n, f in enumerate(figures):
        if f.files:
            parts.append(f'<div class="figure">{_svg(f.files[1], n)}</div>')
        else:
            parts.append(f'<p class="skipped">{html.escape(f.name)}: {html.escape(f.note)}</p>')
    for c in result.configurations:
        for note in c.notes:
            parts.append(f'<p class="note">{html.escape(c.name)}: {html.escape(note)}</p>')
    parts.append("</body></html>\n")
    report = out / "report.html"
    report.write_text("".join(parts), encoding="utf-8")
    return report
