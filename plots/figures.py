"""The study's figures (1-8) and the ones beyond it, drawn from loaded results (the only module that
imports matplotlib; Agg backend, no display needed).

Every figure function takes cells and an output folder, writes ``<name>.png`` and ``<name>.svg``
and returns a :class:`FigureData` with exactly what it plotted (panels -> series -> points), so tests
check the data, not pixels. A figure whose data is absent writes nothing and returns a note.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from llmload.results.provenance import is_rehearsal, rehearsal_label  # noqa: E402
from plots.points import (AXIS_LABELS, NUMERIC_AXES, THIN_SAMPLE, Metric, Series, by_turn, effort_key, effort_parts, fmt,  # noqa: E402
                          grouped, slo_value, sort_key, varying, x_axis)
from plots.capacity import WHOLE_RUN, CapacityPlot  # noqa: E402
from plots.results import MeasuredCell  # noqa: E402

__all__ = ["FigureData", "Series", "STUDY_FIGURES", "BEYOND_FIGURES", "draw_all", "capacity_figure"]

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


def _color(effort: str, index: int) -> str:
    return COLORS.get(effort) or (MIX_COLOR if effort.startswith("mix:") else PALETTE[index % len(PALETTE)])


def _linestyle(s: Series, mix_styles: dict[str, str], others: str = "-") -> str:
    """A mix's parts: that mix's line style; other series: ``others``."""
    return mix_styles.setdefault(s.mix, MIX_LINESTYLES[len(mix_styles) % len(MIX_LINESTYLES)]) if s.mix else others


def _marker(gpu: str, seen: dict[str, str]) -> str:
    if gpu in MARKERS:
        return MARKERS[gpu]
    return seen.setdefault(gpu, EXTRA_MARKERS[len(seen) % len(EXTRA_MARKERS)])


def _grid(n: int, width: float = 3.8, height: float = 3.0, max_cols: int = 3):
    cols = min(max_cols, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 1.2), squeeze=False, layout="constrained")
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _stamp(cells: Sequence[MeasuredCell]) -> str:
    """REHEARSAL and its factor(s) when any cell came from the built-in target; empty for measurements."""
    return _rehearsal_stamp({rehearsal_label(c.served_by) for c in cells if is_rehearsal(c.served_by)})


def _rehearsal_stamp(labels: Iterable[str]) -> str:
    shown = sorted(labels)
    return "; ".join(shown) + ": simulated timings, not a measurement" if shown else ""


def _save(fig, out: Path, name: str, title: str, stamp: str = "") -> list[Path]:
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


def _x_positions(data: FigureData) -> Callable[[Any], float]:
    """Numbers stay numbers (log 2 axis); categories (prompt sets, models) get 0, 1, 2 ... in natural order."""
    if data.x_setting in NUMERIC_AXES:
        return float
    order = sorted({x for series in data.panels.values() for s in series.values() for x in s.x}, key=sort_key)
    return lambda x: float(order.index(x))


def _error_bar(y: float, ci: Sequence[float]) -> list[list[float]]:
    """matplotlib's yerr for an interval around ``y``: a batch-means interval need not hold the rate itself
    (equal windows give a zero-width one a rounding error away), so a side below zero is drawn as none."""
    return [[max(0.0, y - ci[0])], [max(0.0, ci[1] - y)]]


def _draw_series(ax, s: Series, label: str, style: dict[str, Any], at: Callable[[Any], float], index: int = 0) -> None:
    """The line, its band and intervals, its n per point; thin samples hollow, partial cells crossed."""
    xs = [at(x) for x in s.x]
    ax.plot(xs, s.y, label=label, **style)
    band = [(x, y, u) for x, y, u in zip(xs, s.y, s.upper) if u is not None]
    if len(band) > 1:
        ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band], color=style["color"], alpha=0.12, linewidth=0)
    for x, y, n, ci, thin, partial in zip(xs, s.y, s.n, s.ci95, s.thin, s.partial):
        if ci is not None:
            ax.errorbar([x], [y], yerr=_error_bar(y, ci), color=style["color"], capsize=2, linewidth=0.8)
        if thin:
            ax.plot([x], [y], marker=style["marker"], markerfacecolor="white", color=style["color"], linestyle="none")
        if partial:
            ax.plot([x], [y], marker="x", markersize=9, color="#b00000", linestyle="none")
        ax.annotate(f"n={n}" + (" partial" if partial else ""), (x, y), xytext=(4, 3 + 7 * (index % 3)), textcoords="offset points", fontsize=6,
                    color="#b00000" if thin or partial else "#555555")


def _line_figure(data: FigureData, out: Path, dash_by: Sequence[str] = (), width: float = 3.8, height: float = 3.0,
                 max_cols: int = 3) -> FigureData:
    """Draw data.panels as small multiples: colour by effort, marker by GPU, one y scale per row."""
    if not data.panels:
        data.note = data.note or "no cells hold this figure's data"
        return data
    at = _x_positions(data)
    with plt.rc_context(STYLE):
        fig, axes = _grid(len(data.panels), width, height, max_cols)
        dashes: dict[str, str] = {}
        markers: dict[str, str] = {}
        mix_styles: dict[str, str] = {}
        for ax, (panel, series) in zip(axes, data.panels.items()):
            for i, (label, s) in enumerate(series.items()):
                # dash_by: one line style per GPU, the same in every panel
                gpu_style = dashes.setdefault(s.gpu, LINESTYLES[len(dashes) % len(LINESTYLES)]) if dash_by else "-"
                style = {"color": _color(s.effort, i), "marker": _marker(s.gpu, markers), "linestyle": _linestyle(s, mix_styles, gpu_style)}
                _draw_series(ax, s, label, style, at, i)
            if data.slo is not None:
                ax.axhline(data.slo, color="#b00000", linestyle=":", linewidth=1, label=f"SLO {data.slo:g}")
            ax.set_title(panel)
            ax.set_xlabel(data.xlabel)
            ax.set_ylabel(data.ylabel)
            ticks = sorted({x for s in series.values() for x in s.x}, key=at)
            if data.x_setting in NUMERIC_AXES:
                ax.set_xscale("log", base=2)
            ax.set_xticks([at(t) for t in ticks], [str(t) for t in ticks])
            ax.margins(x=0.12)
            ax.set_ylim(bottom=0)
        _figure_legend(fig, axes, [s for p in data.panels.values() for s in p.values()], markers, dashes, mix_styles)
        data.files = _save(fig, out, data.name, data.title, data.stamp)
    return data


def _figure_legend(fig, axes, series: Sequence[Series], markers: dict[str, str], styles: dict[str, str] | None = None,
                   mix_styles: dict[str, str] | None = None) -> None:
    """One legend for the whole figure, below it: colour = effort, marker = GPU, line style = a mix's parts, then what the marks mean."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: dict[str, Any] = {}
    for effort in sorted({s.effort for s in series if s.effort}, key=effort_key):
        handles[effort if effort.startswith("mix:") else f"effort {effort}"] = Line2D([], [], color=_color(effort, 0))
    for mix, linestyle in (mix_styles or {}).items():
        handles[f"each effort's part of {mix}"] = Line2D([], [], color="#555555", linestyle=linestyle)
    for gpu in sorted({s.gpu for s in series if s.gpu}):
        handles[gpu] = Line2D([], [], marker=_marker(gpu, markers), color="#555555", linestyle=(styles or {}).get(gpu, "none"))
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


# ---- figures 1, 2 and the beyond-study per-setting metrics -----------------------------------------

def _vs_setting(name: str, title: str, ylabel: str, metric: Metric):
    """A figure of ``metric`` against the setting the cells vary (users in a user sweep), one colour per effort
    (a mixed run: its whole, and each effort's part in that effort's colour)."""
    def figure(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
        x = x_axis(cells)
        data = FigureData(name, f"{title} vs {AXIS_LABELS[x]}", AXIS_LABELS[x], ylabel,
                          grouped(effort_parts(cells), ("gpu", "model", "prompts"), ("effort",), x, metric), stamp=_stamp(cells),
                          x_setting=x, slo=slo_value(cells, metric))
        return _line_figure(data, out)
    figure.__name__ = name
    figure.__doc__ = title
    return figure


RESPONSE_TIME = Metric("response_time_ms.median", "response_time_ms.count", band="response_time_ms.p90", slo="e2e")
fig1_response_time = _vs_setting("fig1_response_time", "Fig. 1: median response time", "median response time (ms)", RESPONSE_TIME)
fig2_requests_per_s = _vs_setting("fig2_requests_per_s", "Fig. 2: requests per second", "requests/s", Metric("rps", "requests_ok"))
ttft_vs_users = _vs_setting("ttft_vs_users", "Time to first token (median)", "median TTFT (ms)",
                            Metric("ttft_ms.median", "ttft_ms.count", band="ttft_ms.p90", slo="ttft"))
ttfvt_vs_users = _vs_setting("ttfvt_vs_users", "Time to first visible token (median)", "median TTFVT (ms)",
                             Metric("ttfvt_ms.median", "ttfvt_ms.count", band="ttfvt_ms.p90", slo="ttfvt"))
tpot_vs_users = _vs_setting("tpot_vs_users", "Time per output token (median)", "median TPOT (ms/token)",
                            Metric("tpot_ms.median", "tpot_ms.count", band="tpot_ms.p90", slo="tpot"))
reasoning_share = _vs_setting("reasoning_share", "Reasoning share of output tokens", "reasoning tokens (% of output)",
                              Metric("reasoning_ratio", "reasoning_tokens.count", scale=100.0))
answered_share = _vs_setting("answered_share", "Requests with a visible answer", "answered requests (%)",
                             Metric("answered_ratio", "requests_ok", scale=100.0))


def _by_turn(name: str, title: str, ylabel: str, field: str, slo: str):
    """A figure of ``field``'s median (band to p90) against the conversation turn, a line per run with TURNS: later
    turns send the history, so the prefix cache decides how it grows."""
    def figure(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
        data = FigureData(name, title, "conversation turn", ylabel, stamp=_stamp(cells), x_setting="turn",
                          slo=slo_value(cells, Metric(f"{field}.median", f"{field}.count", slo=slo)))
        series = by_turn(cells, field)
        if series:
            data.panels["all"] = series
        else:
            data.note = "no run held conversations (TURNS above 1)"
        return _line_figure(data, out)
    figure.__name__ = name
    figure.__doc__ = title
    return figure


ttft_by_turn = _by_turn("ttft_by_turn", "Time to first token by conversation turn (median, band to p90)", "TTFT (ms)",
                        "ttft_ms", "ttft")
ttfvt_by_turn = _by_turn("ttfvt_by_turn", "Time to first visible token by conversation turn (median, band to p90)",
                         "TTFVT (ms)", "ttfvt_ms", "ttfvt")


# ---- figure 3: output tokens per model and effort -------------------------------------------------

def fig3_output_tokens(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
    """Per model (and prompt set): per effort, min/max/mean/median of output tokens, with the
    distribution of every request's count (pooled over the cells of that model and effort)."""
    data = FigureData("fig3_output_tokens", "Fig. 3: output tokens per model and effort", "reasoning effort", "output tokens per request",
                      stamp=_stamp(cells))
    pooled: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for c in effort_parts(cells, keep_mixed=False):  # a mixed run's requests, each under its own effort
        panel = " ".join([c.model] + [fmt(a, getattr(c, a)) for a in varying(cells, ("gpu", "prompts", "max_tokens"))])
        counts = c.output_tokens()
        if not counts and c.metric("output_tokens.count"):  # no samples: the summary's figures only
            pooled[panel].setdefault(c.effort, [])
            data.extra.setdefault("from_summary", {}).setdefault(panel, {})[c.effort] = asdict(c.summary.output_tokens)
        pooled[panel][c.effort].extend(counts)
    for panel in sorted(pooled, key=sort_key):
        data.panels[panel] = {}
        for effort in sorted(pooled[panel], key=effort_key):
            counts = sorted(pooled[panel][effort])
            if counts:
                n = len(counts)
                median = counts[n // 2] if n % 2 else (counts[n // 2 - 1] + counts[n // 2]) / 2
                stats = (float(counts[0]), float(counts[-1]), sum(counts) / n, float(median))
            else:
                s = data.extra["from_summary"][panel][effort]
                stats = tuple(float(s[k]) for k in ("min", "max", "mean", "median"))
            n = len(counts) if counts else int(data.extra["from_summary"][panel][effort]["count"])
            data.panels[panel][effort] = Series(("min", "max", "mean", "median"), stats, (n,) * 4)
            data.extra.setdefault("distribution", {}).setdefault(panel, {})[effort] = tuple(counts)
    if not data.panels:
        data.note = "no cells hold output token counts"
        return data
    with plt.rc_context(STYLE):
        fig, axes = _grid(len(data.panels))
        for ax, (panel, series) in zip(axes, data.panels.items()):
            efforts = list(series)
            dists = [data.extra["distribution"][panel][e] for e in efforts]
            positions = list(range(1, len(efforts) + 1))
            drawn = [(p, d) for p, d in zip(positions, dists) if len(d) > 1]
            if drawn:
                parts = ax.violinplot([d for _, d in drawn], positions=[p for p, _ in drawn], showextrema=False, widths=0.8)
                for body, (p, _) in zip(parts["bodies"], drawn):
                    body.set_facecolor(COLORS.get(efforts[p - 1], PALETTE[0]))
                    body.set_alpha(0.35)
            for p, e in zip(positions, efforts):
                lo, hi, mean, median = series[e].y
                color = COLORS.get(e, PALETTE[0])
                ax.vlines(p, lo, hi, color=color, linewidth=1)
                ax.plot([p - 0.15, p + 0.15], [lo, lo], color=color, linewidth=1)
                ax.plot([p - 0.15, p + 0.15], [hi, hi], color=color, linewidth=1)
                ax.plot(p, median, marker="s", color=color, linestyle="none", label="median" if p == 1 else None)
                ax.plot(p, mean, marker="D", markerfacecolor="white", color=color, linestyle="none", label="mean" if p == 1 else None)
                ax.annotate(f"{mean:.0f}", (p + 0.18, mean), fontsize=7, va="center")
            ax.set_xticks(positions, [f"{e}\nn={series[e].n[0]}" for e in efforts])
            ax.set_title(panel)
            ax.set_xlabel(data.xlabel)
            ax.set_ylabel(data.ylabel)
            ax.set_ylim(bottom=0)
        handles, labels = axes[0].get_legend_handles_labels()  # below the panels, never over a point
        fig.legend(handles, labels, loc="outside lower center", ncols=2, frameon=False)
        data.files = _save(fig, out, data.name, data.title + " (bars: min-max; shape: every request)", data.stamp)
    return data


# ---- figure 4: response time vs max_tokens ----------------------------------------------------------

def fig4_max_tokens(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
    """The study's figure 4, at full size: median response time against max_tokens."""
    capped = [c for c in effort_parts(cells) if c.max_tokens > 0]
    data = FigureData("fig4_max_tokens", "Fig. 4: median response time vs max_tokens", "max_tokens", "median response time (ms)",
                      stamp=_stamp(cells), x_setting="max_tokens", slo=slo_value(capped, RESPONSE_TIME))
    panels = grouped(capped, ("gpu", "model", "prompts"), ("effort", "users"), "max_tokens", RESPONSE_TIME)
    data.panels = {p: {s: v for s, v in series.items() if len(v.x) > 1} for p, series in panels.items()}
    data.panels = {p: s for p, s in data.panels.items() if s}
    if not data.panels:
        data.note = "no cells vary max_tokens (run scenarios/max-tokens.yaml)"
        return data
    return _line_figure(data, out, width=8.0, height=5.2, max_cols=1)


# ---- figures 5-8: one GPU vs another ----------------------------------------------------------------

def _vs_gpu(name: str, title: str, ylabel: str, metric: Metric):
    def figure(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
        by: dict[tuple[str, str], set[str]] = defaultdict(set)
        for c in cells:
            by[(c.model, c.prompts)].add(c.gpu)
        shared = [c for c in effort_parts(cells) if len(by[(c.model, c.prompts)]) > 1]
        if not shared:
            return FigureData(name, title, note="needs one model and prompt set measured on two GPUs (give two or more folders)")
        x = x_axis(shared, exclude=("gpu",))
        data = FigureData(name, f"{title} (x: {AXIS_LABELS[x]})", AXIS_LABELS[x], ylabel,
                          grouped(shared, ("model", "prompts"), ("effort", "gpu"), x, metric), stamp=_stamp(cells),
                          x_setting=x, slo=slo_value(shared, metric))
        data.extra["gpus"] = sorted({c.gpu for c in shared})
        return _line_figure(data, out, dash_by=data.extra["gpus"])
    figure.__name__ = name
    figure.__doc__ = title
    return figure


fig5_gpu_response_time = _vs_gpu("fig5_gpu_response_time", "Fig. 5: median response time, GPU vs GPU", "median response time (ms)",
                                 RESPONSE_TIME)
fig6_gpu_requests_per_s = _vs_gpu("fig6_gpu_requests_per_s", "Fig. 6: requests per second, GPU vs GPU", "requests/s",
                                  Metric("rps", "requests_ok"))
fig7_gpu_tpot = _vs_gpu("fig7_gpu_tpot", "Fig. 7: median time per output token, GPU vs GPU", "median TPOT (ms/token)",
                        Metric("tpot_ms.median", "tpot_ms.count", band="tpot_ms.p90", slo="tpot"))
fig8_gpu_output_throughput = _vs_gpu("fig8_gpu_output_throughput", "Fig. 8: output throughput, GPU vs GPU", "output throughput (tok/s)",
                                     Metric("output_throughput_tok_s", "requests_ok"))


# ---- beyond the study -------------------------------------------------------------------------------

def throughput_vs_latency(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
    """One curve per configuration (GPU, model, prompts, effort): users grow along it."""
    data = FigureData("throughput_vs_latency", "Output throughput vs median latency (users grow along each curve)",
                      "median response time (ms)", "output throughput (tok/s)", stamp=_stamp(cells), x_setting="users")
    groups: dict[str, list[MeasuredCell]] = defaultdict(list)
    attrs = ["gpu", "model", "prompts", "effort", "max_tokens"]
    shown = [a for a in attrs if a in varying(cells, attrs)] or ["effort"]
    others = [a for a in shown if a not in ("effort", "gpu")]
    for c in effort_parts(cells):
        if c.metric("response_time_ms.median") is not None and c.metric("output_throughput_tok_s") is not None:
            groups[" ".join(filter(None, (fmt(a, getattr(c, a)) for a in (*shown, "mix"))))].append(c)
    series = {}
    rests: dict[str, str] = {}  # the other settings of each curve: its line style
    for label in sorted(groups, key=sort_key):
        pts = sorted(groups[label], key=lambda c: c.users)
        efforts, gpus = {c.effort for c in pts}, {c.gpu for c in pts}
        series[label] = Series(tuple(c.metric("response_time_ms.median") for c in pts), tuple(c.metric("output_throughput_tok_s") for c in pts),
                               tuple(int(c.metric("requests_ok") or 0) for c in pts), (None,) * len(pts), (None,) * len(pts),
                               tuple(not c.complete for c in pts), efforts.pop() if len(efforts) == 1 else "",
                               gpus.pop() if len(gpus) == 1 else "", pts[0].mix)
        rests[label] = " ".join(fmt(a, getattr(pts[0], a)) for a in others)
        data.extra.setdefault("users", {})[label] = tuple(c.users for c in pts)
    if not series:
        data.note = "no cells hold latency and throughput"
        return data
    data.panels = {"all configurations": series}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(8.0, 5.2), layout="constrained")
        markers: dict[str, str] = {}
        dashes: dict[str, str] = {}
        mix_styles: dict[str, str] = {}
        for i, (label, s) in enumerate(series.items()):
            rest_style = dashes.setdefault(rests[label], LINESTYLES[len(dashes) % len(LINESTYLES)])
            style = {"color": _color(s.effort, i), "marker": _marker(s.gpu, markers), "linestyle": _linestyle(s, mix_styles, rest_style)}
            _draw_series(ax, s, label, style, float, i)
            for x, y, u in zip(s.x, s.y, data.extra["users"][label]):
                ax.annotate(f"u{u}", (x, y), fontsize=6, xytext=(3, -8), textcoords="offset points", color=style["color"])
        ax.set_xlabel(data.xlabel)
        ax.set_ylabel(data.ylabel)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        _figure_legend(fig, [ax], list(series.values()), markers, dashes, mix_styles)
        data.files = _save(fig, out, data.name, data.title, data.stamp)
    return data


def server_timeline(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
    """Small multiples, one per cell: requests running and waiting (KV-cache usage: kv_cache_timeline)."""
    data = FigureData("server_timeline", "Server: requests running and waiting over each cell",
                      "time in cell (s)", "requests", stamp=_stamp(cells))
    for c in cells:
        samples = c.server_samples
        if not samples:
            continue
        panel = {}
        for name in ("running", "waiting"):
            pts = [(s.t_s, getattr(s, name)) for s in samples if getattr(s, name) is not None]
            if pts:
                panel[name] = Series(tuple(p[0] for p in pts), tuple(p[1] for p in pts))
        if panel:
            label = (c.label if len({x.source for x in cells}) == 1 else f"{c.gpu} {c.label}") + ("" if c.complete else " (partial)")
            data.panels[label] = panel
    if not data.panels:
        data.note = "no cell holds server_metrics.jsonl samples (the server had no /metrics, or these are make load runs)"
        return data
    return _small_multiples(data, out, ("running", "waiting"))


def kv_cache_timeline(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
    """Small multiples, one per cell: the server's KV-cache usage (%) over the cell."""
    data = FigureData("kv_cache_timeline", "Server: KV-cache usage over each cell", "time in cell (s)", "KV cache used (%)",
                      stamp=_stamp(cells))
    for c in cells:
        kv = [(s.t_s, 100.0 * s.kv_cache_usage) for s in c.server_samples if s.kv_cache_usage is not None]
        if kv:
            label = (c.label if len({x.source for x in cells}) == 1 else f"{c.gpu} {c.label}") + ("" if c.complete else " (partial)")
            data.panels[label] = {"kv_cache_usage_pct": Series(tuple(p[0] for p in kv), tuple(p[1] for p in kv))}
    if not data.panels:
        data.note = "no cell holds KV-cache samples (the server had no /metrics, or these are make load runs)"
        return data
    return _small_multiples(data, out, ("kv_cache_usage_pct",))


def _small_multiples(data: FigureData, out: Path, names: Sequence[str]) -> FigureData:
    """One small panel per cell, axes shared (drawn once per row and column): fast for 90 cells."""
    colors = {"running": PALETTE[0], "waiting": PALETTE[3], "kv_cache_usage_pct": PALETTE[2]}
    with plt.rc_context({**STYLE, "font.size": 6, "axes.titlesize": 6, "axes.labelsize": 6, "legend.fontsize": 7, "axes.grid": False,
                         "xtick.major.size": 2, "ytick.major.size": 2, "path.simplify_threshold": 1.0}):
        n = len(data.panels)
        cols = min(6, n)
        rows = math.ceil(n / cols)
        # Same limits on every panel, set by hand: matplotlib's shared axes cost O(panels^2) per draw.
        fig, grid = plt.subplots(rows, cols, figsize=(1.9 * cols + 0.4, 1.25 * rows + 0.9), squeeze=False)
        axes = list(grid.flat)
        for ax in axes[n:]:
            ax.set_visible(False)
        x_max = max((max(series.x, default=0) for panel in data.panels.values() for series in panel.values()), default=1) or 1
        y_max = max((max(series.y, default=0) for panel in data.panels.values() for series in panel.values()), default=1) or 1
        for i, (ax, (label, panel)) in enumerate(zip(axes, data.panels.items())):
            for name in names:
                if name in panel:
                    ax.plot(panel[name].x, panel[name].y, color=colors[name], linewidth=0.8, label=name.replace("_pct", " (%)"),
                            rasterized=True)  # 90 panels of vector lines make the SVG slow to write and to open
            ax.set_title(label, pad=2)
            ax.set_xlim(0, x_max)
            ax.set_ylim(0, y_max * 1.05)
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(3))
            ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(3))
            bottom_row, first_col = i >= n - cols, i % cols == 0
            ax.tick_params(labelbottom=bottom_row, labelleft=first_col)
            if bottom_row:
                ax.set_xlabel(data.xlabel)
            if first_col:
                ax.set_ylabel(data.ylabel)
        top = 1 - 0.8 / (1.25 * rows + 0.9)
        fig.subplots_adjust(left=0.06, right=0.99, bottom=0.9 / (1.25 * rows + 0.9) * 0.7, top=top, hspace=0.45, wspace=0.12)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper right", ncols=len(labels), frameon=False)
        data.files = _save(fig, out, data.name, data.title, data.stamp)
    return data


# ---- make capacity: each SLO against the load searched ----------------------------------------------

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
                      searched, "ms", stamp=_rehearsal_stamp(plot.rehearsals), x_setting=plot.by)
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
        fig, axes = _grid(len(plot.panels), 4.6, 3.4)
        for ax, panel in zip(axes, plot.panels):
            for line, points in panel.lines.items():
                measured = [p for p in points if p.value_ms is not None]
                whole = line == WHOLE_RUN
                color = MIX_COLOR if whole else _color(line, 0)
                beside_efforts = whole and len(panel.lines) > 1  # under a mix: dashed, behind the efforts' lines
                ax.plot([p.load for p in measured], [p.value_ms for p in measured], color=color, linestyle="--" if beside_efforts else "-",
                        linewidth=1.0 if beside_efforts else 1.4, label=line if whole else f"effort {line}")
                for p in measured:
                    if p.ci95_ms is not None:
                        ax.errorbar([p.load], [p.value_ms], yerr=_error_bar(p.value_ms, p.ci95_ms), color=color, capsize=2,
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
        data.files = _save(fig, out, data.name, data.title, data.stamp)
    return data


STUDY_FIGURES = (fig1_response_time, fig2_requests_per_s, fig3_output_tokens, fig4_max_tokens,
                 fig5_gpu_response_time, fig6_gpu_requests_per_s, fig7_gpu_tpot, fig8_gpu_output_throughput)
BEYOND_FIGURES = (ttft_vs_users, ttfvt_vs_users, tpot_vs_users, throughput_vs_latency, server_timeline, kv_cache_timeline,
                  reasoning_share, answered_share, ttft_by_turn, ttfvt_by_turn)


_work: tuple[Sequence[Callable], Sequence[MeasuredCell], Path] | None = None


def _draw(index: int) -> FigureData:
    assert _work is not None
    figures, cells, out = _work
    return figures[index](cells, out)


def draw_all(cells: Sequence[MeasuredCell], out: Path, figures: Sequence[Callable] = STUDY_FIGURES + BEYOND_FIGURES) -> list[FigureData]:
    """Every figure into ``out``, on every core; the skipped ones come back with a note and no files."""
    global _work
    _work = (tuple(figures), cells, Path(out))
    workers = min(len(figures), os.cpu_count() or 1)
    if workers < 2:
        return [_draw(i) for i in range(len(figures))]
    # Forked workers inherit the figures and the loaded cells; each figure is drawn and saved in one.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(_draw, range(len(figures))))
