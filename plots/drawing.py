"""How every figure is drawn: the style, one colour per effort and one marker per GPU, small multiples of line
panels with their bands, intervals and sample sizes, one legend per figure, and the files written.

The one module that imports matplotlib (Agg backend, no display needed); the figure modules draw through it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from llmload.results.provenance import is_rehearsal, rehearsal_label  # noqa: E402
from plots.points import NUMERIC_AXES, THIN_SAMPLE, Series, effort_key, sort_key  # noqa: E402
from plots.results import MeasuredCell  # noqa: E402

__all__ = ["plt", "matplotlib", "COLORS", "PALETTE", "LINESTYLES", "MIX_COLOR", "STYLE", "FigureData", "effort_color",
           "line_style", "gpu_marker", "panel_grid", "stamp_of", "rehearsal_stamp", "save_figure", "x_positions",
           "error_bar", "draw_series", "line_figure", "figure_legend"]

COLORS = {"low": "#1b9e77", "medium": "#d95f02", "high": "#7570b3", "none": "#666666"}
"""One colour per effort, the same in every figure."""
MARKERS = {"h100": "o", "h200": "s", "a100": "^", "l4": "D"}
"""One marker per GPU, the same in every figure (others take EXTRA_MARKERS in order of appearance)."""
EXTRA_MARKERS = ("v", "P", "X", "*", "h")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
LINESTYLES = ("-", "--", ":", "-.")
MIX_COLOR = "#333333"
"""A run that mixed efforts, as a whole; each effort's part of it takes the effort's colour and the mix's line style."""
MIX_LINESTYLES = ("--", ":", "-.")
STYLE = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8, "axes.grid": True,
         "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False, "svg.fonttype": "none",
         "figure.dpi": 100, "savefig.dpi": 100, "lines.markersize": 5}


@dataclass
class FigureData:
    """What a figure plotted; ``files`` is empty and ``note`` says why when it was skipped."""

    name: str
    title: str
    xlabel: str = ""
    ylabel: str = ""
    panels: dict[str, dict[str, Series]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    note: str = ""
    stamp: str = ""
    """Drawn under the title: says REHEARSAL (with the factor) when built-in target results are plotted."""
    x_setting: str = ""
    """The setting on the x axis (users, max_tokens, prompts, ...): the one the cells vary."""
    slo: float | None = None
    """The SLO line drawn, when the runs set one on this metric."""

    @property
    def skipped(self) -> bool:
        return not self.files


def effort_color(effort: str, index: int) -> str:
    return COLORS.get(effort) or (MIX_COLOR if effort.startswith("mix:") else PALETTE[index % len(PALETTE)])


def line_style(s: Series, mix_styles: dict[str, str], others: str = "-") -> str:
    """A mix's parts: that mix's line style; other series: ``others``."""
    return mix_styles.setdefault(s.mix, MIX_LINESTYLES[len(mix_styles) % len(MIX_LINESTYLES)]) if s.mix else others


def gpu_marker(gpu: str, seen: dict[str, str]) -> str:
    if gpu in MARKERS:
        return MARKERS[gpu]
    return seen.setdefault(gpu, EXTRA_MARKERS[len(seen) % len(EXTRA_MARKERS)])


def panel_grid(n: int, width: float = 3.8, height: float = 3.0, max_cols: int = 3):
    cols = min(max_cols, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 1.2), squeeze=False, layout="constrained")
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def stamp_of(cells: Sequence[MeasuredCell], scaled: bool = True) -> str:
    """REHEARSAL and its factor(s) when any cell came from the built-in target; empty for measurements. ``scaled``: the
    figure shows a sped-up rehearsal's times and rates as predicted for the GPU it played (MeasuredCell.metric)."""
    rehearsals = [c for c in cells if is_rehearsal(c.served_by)]
    played = sorted({f"{c.gpu} ({c.time_scale.conversion_text()})" for c in rehearsals if scaled and c.time_scale.sped_up})
    stamp = rehearsal_stamp({rehearsal_label(c.served_by) for c in rehearsals}, played)
    errors = sorted({text for c in rehearsals if (text := model_error_text(c.summary.predicted))})
    return stamp + ("; " + "; ".join(errors) if errors else "")


def model_error_text(predicted: Any) -> str:
    """A validated prediction's own error beside the sampling intervals drawn (``model error: req/s ±58%, TTFT ±27%
    (worst held out)``); empty for an unvalidated one (its label says UNVALIDATED) or none."""
    if predicted is None or not predicted.validated:
        return ""
    shown = [(label, predicted.model_error.get(name)) for label, name in _ERROR_SHOWN]
    parts = [f"{label} ±{error:.0%}" for label, error in shown if error is not None]
    return f"model error of {predicted.gpu}'s profile: {', '.join(parts)} (worst held out)" if parts else ""


_ERROR_SHOWN = (("req/s", "rps"), ("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("E2E", "response_time_ms"))


def rehearsal_stamp(labels: Iterable[str], played: Iterable[str] = ()) -> str:
    """The labels, and ``played``: each GPU a sped-up rehearsal is drawn for, with its factors (``h100 (times x4)``)."""
    shown, scaled = sorted(labels), sorted(played)
    if not shown:
        return ""
    return "; ".join(shown) + ": simulated timings, not a measurement" + (
        "; drawn as predicted for " + ", ".join(scaled) if scaled else "")


def save_figure(fig, out: Path, name: str, title: str, stamp: str = "") -> list[Path]:
    out = Path(out)
    fig.suptitle(title + (f"\n{stamp}" if stamp else ""), fontsize=10, color="#b00000" if stamp else "black")
    out.mkdir(parents=True, exist_ok=True)
    files = [out / f"{name}.png", out / f"{name}.svg"]
    if fig.get_layout_engine() is not None:
        fig.canvas.draw()  # solve the constrained layout once, not once per file
        fig.set_layout_engine("none")
    for path in files:  # tight: legends and titles outside the axes are never clipped
        fig.savefig(path, bbox_inches="tight", pad_inches=0.1, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return files


def x_positions(data: FigureData) -> Callable[[Any], float]:
    """Numbers stay numbers (log 2 axis); categories (prompt sets, models) get 0, 1, 2 ... in natural order."""
    if data.x_setting in NUMERIC_AXES:
        return float
    order = sorted({x for series in data.panels.values() for s in series.values() for x in s.x}, key=sort_key)
    return lambda x: float(order.index(x))


def error_bar(y: float, ci: Sequence[float]) -> list[list[float]]:
    """matplotlib's yerr for an interval around ``y``: a batch-means interval need not hold the rate itself
    (equal windows give a zero-width one a rounding error away), so a side below zero is drawn as none."""
    return [[max(0.0, y - ci[0])], [max(0.0, ci[1] - y)]]


def draw_series(ax, s: Series, label: str, style: dict[str, Any], at: Callable[[Any], float], index: int = 0) -> None:
    """The line, its band and intervals, its n per point; thin samples hollow, partial cells crossed."""
    xs = [at(x) for x in s.x]
    ax.plot(xs, s.y, label=label, **style)
    band = [(x, y, u) for x, y, u in zip(xs, s.y, s.upper) if u is not None]
    if len(band) > 1:
        ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band], color=style["color"], alpha=0.12, linewidth=0)
    for x, y, n, ci, thin, partial in zip(xs, s.y, s.n, s.ci95, s.thin, s.partial):
        if ci is not None:
            ax.errorbar([x], [y], yerr=error_bar(y, ci), color=style["color"], capsize=2, linewidth=0.8)
        if thin:
            ax.plot([x], [y], marker=style["marker"], markerfacecolor="white", color=style["color"], linestyle="none")
        if partial:
            ax.plot([x], [y], marker="x", markersize=9, color="#b00000", linestyle="none")
        ax.annotate(f"n={n}" + (" partial" if partial else ""), (x, y), xytext=(4, 3 + 7 * (index % 3)), textcoords="offset points", fontsize=6,
                    color="#b00000" if thin or partial else "#555555")


def line_figure(data: FigureData, out: Path, dash_by: Sequence[str] = (), width: float = 3.8, height: float = 3.0,
                 max_cols: int = 3) -> FigureData:
    """Draw data.panels as small multiples: colour by effort, marker by GPU, one y scale per row."""
    if not data.panels:
        data.note = data.note or "no cells hold this figure's data"
        return data
    at = x_positions(data)
    with plt.rc_context(STYLE):
        fig, axes = panel_grid(len(data.panels), width, height, max_cols)
        dashes: dict[str, str] = {}
        markers: dict[str, str] = {}
        mix_styles: dict[str, str] = {}
        for ax, (panel, series) in zip(axes, data.panels.items()):
            for i, (label, s) in enumerate(series.items()):
                # dash_by: one line style per GPU, the same in every panel
                gpu_style = dashes.setdefault(s.gpu, LINESTYLES[len(dashes) % len(LINESTYLES)]) if dash_by else "-"
                style = {"color": effort_color(s.effort, i), "marker": gpu_marker(s.gpu, markers), "linestyle": line_style(s, mix_styles, gpu_style)}
                draw_series(ax, s, label, style, at, i)
            if data.slo is not None:
                ax.axhline(data.slo, color="#b00000", linestyle=":", linewidth=1, label=f"SLO {data.slo:g}")
            ax.set_title(panel)
            ax.set_xlabel(data.xlabel)
            ax.set_ylabel(data.ylabel)
            ticks = sorted({x for s in series.values() for x in s.x}, key=at)
            if data.x_setting in NUMERIC_AXES:
                ax.set_xscale("log", base=2)
            ax.set_xticks([at(t) for t in ticks], [f"{t:g}" if isinstance(t, float) else str(t) for t in ticks])
            ax.margins(x=0.12)
            ax.set_ylim(bottom=0)
        figure_legend(fig, axes, [s for p in data.panels.values() for s in p.values()], markers, dashes, mix_styles)
        data.files = save_figure(fig, out, data.name, data.title, data.stamp)
    return data


def figure_legend(fig, axes, series: Sequence[Series], markers: dict[str, str], styles: dict[str, str] | None = None,
                   mix_styles: dict[str, str] | None = None) -> None:
    """One legend for the whole figure, below it: colour = effort, marker = GPU, line style = a mix's parts, then what the marks mean."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: dict[str, Any] = {}
    for effort in sorted({s.effort for s in series if s.effort}, key=effort_key):
        handles[effort if effort.startswith("mix:") else f"effort {effort}"] = Line2D([], [], color=effort_color(effort, 0))
    for mix, linestyle in (mix_styles or {}).items():
        handles[f"each effort's part of {mix}"] = Line2D([], [], color="#555555", linestyle=linestyle)
    for gpu in sorted({s.gpu for s in series if s.gpu}):
        handles[gpu] = Line2D([], [], marker=gpu_marker(gpu, markers), color="#555555", linestyle=(styles or {}).get(gpu, "none"))
    for label, linestyle in (styles or {}).items():  # line styles of the other settings, when they vary
        if label and label not in handles:
            handles[label] = Line2D([], [], color="#555555", linestyle=linestyle)
    for ax in axes:  # series without an effort (their own colours) and the SLO line
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label.startswith("SLO") or not any(s.effort for s in series):
                handles.setdefault(label, handle)
    handles[f"hollow: n < {THIN_SAMPLE} requests"] = Line2D([], [], marker="o", markerfacecolor="white", color="#555555", linestyle="none")
    if any(True in s.partial for s in series):
        handles["x: partial cell (cut short)"] = Line2D([], [], marker="x", color="#b00000", linestyle="none")
    if any(u is not None for s in series for u in s.upper):
        handles["band: median to p90"] = Patch(color="#555555", alpha=0.15)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(6, len(handles)), frameon=False)
