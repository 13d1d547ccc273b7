"""The capacity figure of a `make capacity` OUT: each SLO's statistic against the load searched."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from plots.capacity import WHOLE_RUN, CapacityPlot
from plots.drawing import MIX_COLOR, STYLE, FigureData, effort_color, error_bar, panel_grid, plt, rehearsal_stamp, save_figure
from plots.points import Series

__all__ = ["capacity_figure"]


def _spaced_labels(values: Sequence[float], log: bool, min_gap: float = 0.06) -> list[str]:
    """Tick labels for sorted ``values``, blank where one would touch the last shown (gap: share of the axis)."""
    at = [math.log2(v) if log else v for v in values]
    span = (at[-1] - at[0]) or 1.0
    labels, last = [], None
    for value, position in zip(values, at):
        show = last is None or position - last >= min_gap * span
        labels.append(f"{value:g}" if show else "")
        last = position if show else last
    return labels


def capacity_figure(plot: CapacityPlot, out: Path, name: str = "capacity") -> FigureData:
    """Per SLO: its statistic at each step (whole run, and each effort of a mix) with 95% intervals, the
    limit, the capacity and its interval; hollow points fail the SLO, '?' marks an uncertain verdict."""
    if plot.conversations:
        searched = "users holding conversations (USERS)" if plot.by == "users" else "conversations started per second (RATE)"
    else:
        searched = "concurrent users (USERS)" if plot.by == "users" else "requests/s (RATE)"
    shown = "none" if plot.answer is None else f"{plot.answer:g}"
    bounds = ", ".join("n/a" if b is None else f"{b:g}" for b in plot.answer_ci95)
    data = FigureData(name, f"Capacity: {'USERS' if plot.by == 'users' else 'RATE'}={shown} meets every SLO "
                            f"(95% interval [{bounds}])\nthe search stopped because {plot.stopped_because}",
                      searched, "ms", stamp=rehearsal_stamp(plot.rehearsals, plot.played), x_setting=plot.by)
    for panel in plot.panels:
        data.panels[panel.slo] = {line: Series(tuple(p.load for p in points if p.value_ms is not None),
                                               tuple(p.value_ms for p in points if p.value_ms is not None),
                                               ci95=tuple(p.ci95_ms for p in points if p.value_ms is not None),
                                               effort="" if line == WHOLE_RUN else line)
                                  for line, points in panel.lines.items()}
    data.extra = {"answer": plot.answer, "answer_ci95": plot.answer_ci95, "limits_ms": {p.slo: p.limit_ms for p in plot.panels}}
    if not plot.panels:
        data.note = "capacity.json holds no step with an SLO value"
        return data
    loads = sorted({load for load, _, _ in plot.steps})
    with plt.rc_context(STYLE):
        fig, axes = panel_grid(len(plot.panels), 4.6, 3.4)
        for ax, panel in zip(axes, plot.panels):
            for line, points in panel.lines.items():
                measured = [p for p in points if p.value_ms is not None]
                whole = line == WHOLE_RUN
                color = MIX_COLOR if whole else effort_color(line, 0)
                beside_efforts = whole and len(panel.lines) > 1  # under a mix: dashed, behind the efforts' lines
                ax.plot([p.load for p in measured], [p.value_ms for p in measured], color=color, linestyle="--" if beside_efforts else "-",
                        linewidth=1.0 if beside_efforts else 1.4, label=line if whole else f"effort {line}")
                for p in measured:
                    if p.ci95_ms is not None:
                        ax.errorbar([p.load], [p.value_ms], yerr=error_bar(p.value_ms, p.ci95_ms), color=color, capsize=2,
                                    linewidth=0.8)
                    ax.plot([p.load], [p.value_ms], marker="o", color=color, markerfacecolor=color if p.passed else "white", linestyle="none")
                    if not p.certain:
                        ax.annotate("?", (p.load, p.value_ms), xytext=(-11, 4), textcoords="offset points", fontsize=9,
                                    fontweight="bold", color=color)
            ax.axhline(panel.limit_ms, color="#b00000", linestyle=":", linewidth=1.2, label="SLO limit")
            low, high = plot.answer_ci95
            if plot.answer is not None:
                ax.axvspan(low if low else 0, high if high is not None else max(loads) * 2, color="#2ca02c", alpha=0.12,
                           label="capacity's 95% interval")
                ax.axvline(plot.answer, color="#2ca02c", linewidth=1.5, label=f"capacity {plot.answer:g}")
            log = max(loads) > 8 * min(loads)  # the doubling steps spread evenly, the bisection's between them
            if log:
                ax.set_xscale("log", base=2)
            ax.set_xticks(loads, _spaced_labels(loads, log))
            margin = (max(loads) - min(loads)) * 0.08 or 1.0
            ax.set_xlim(min(loads) / 1.5 if log else min(loads) - margin, max(loads) * 1.5 if log else max(loads) + margin)
            ax.set_ylim(bottom=0)
            ax.set_title(panel.slo)
            ax.set_xlabel(searched)
            ax.set_ylabel(f"{panel.slo.split('<=')[0]} (ms)")
        handles = {label: handle for ax in axes for handle, label in zip(*ax.get_legend_handles_labels())}
        from matplotlib.lines import Line2D
        handles["hollow: the step fails this SLO; ?: not certain"] = Line2D([], [], marker="o", markerfacecolor="white", color="#555555",
                                                                             linestyle="none")
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(4, len(handles)), frameon=False)
        data.files = save_figure(fig, out, data.name, data.title, data.stamp)
    return data
