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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from llmload.results.provenance import is_rehearsal, rehearsal_label  # noqa: E402
from plots.results import Cell  # noqa: E402

__all__ = ["FigureData", "Series", "STUDY_FIGURES", "BEYOND_FIGURES", "draw_all"]

EFFORT_ORDER = ("none", "low", "medium", "high")
COLORS = {"low": "#1b9e77", "medium": "#d95f02", "high": "#7570b3", "none": "#666666"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
LINESTYLES = ("-", "--", ":", "-.")
STYLE = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8, "axes.grid": True,
         "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False, "svg.fonttype": "none",
         "figure.dpi": 100, "savefig.dpi": 100, "lines.markersize": 4}


@dataclass(frozen=True)
class Series:
    x: tuple[Any, ...]
    y: tuple[float, ...]


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

    @property
    def skipped(self) -> bool:
        return not self.files


def _effort_key(effort: str) -> tuple[int, str]:
    return (EFFORT_ORDER.index(effort) if effort in EFFORT_ORDER else len(EFFORT_ORDER), effort)


def _sort_key(text: str) -> tuple:
    """Natural order for labels: numbers inside compare as numbers, efforts in their order."""
    out: list[Any] = []
    for word in text.split():
        if word in EFFORT_ORDER:
            out.append((0, EFFORT_ORDER.index(word), ""))
        else:
            digits = "".join(ch for ch in word if ch.isdigit())
            out.append((1, int(digits) if digits else 0, word))
    return tuple(out)


def _varying(cells: Sequence[Cell], attrs: Iterable[str]) -> list[str]:
    return [a for a in attrs if len({getattr(c, a) for c in cells}) > 1]


def _fmt(attr: str, value: Any) -> str:
    if attr == "users":
        return f"u{value}"
    if attr == "max_tokens":
        return f"max_tokens={value or 'unset'}"
    return str(value)


def _grouped(cells: Sequence[Cell], panel_attrs: Sequence[str], series_attrs: Sequence[str], x_attr: str,
             y: Callable[[Cell], float | None]) -> dict[str, dict[str, Series]]:
    """Panels keyed by panel_attrs (plus every other attribute that varies, so no two cells collide on
    one point), series by series_attrs, points (x, y) sorted by x; cells whose y is None are left out."""
    others = [a for a in _varying(cells, ("gpu", "model", "prompts", "effort", "users", "max_tokens"))
              if a not in (*panel_attrs, *series_attrs, x_attr)]
    varying = _varying(cells, panel_attrs)
    panel_attrs = [a for a in panel_attrs if a != "gpu" or a in varying] + others  # the GPU only when it varies
    points: dict[str, dict[str, dict[Any, float]]] = defaultdict(lambda: defaultdict(dict))
    for c in cells:
        value = y(c)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        panel = " ".join(_fmt(a, getattr(c, a)) for a in panel_attrs) or "all"
        series = " ".join(_fmt(a, getattr(c, a)) for a in series_attrs) or "all"
        points[panel][series][getattr(c, x_attr)] = value
    out: dict[str, dict[str, Series]] = {}
    for panel in sorted(points, key=_sort_key):
        out[panel] = {}
        for series in sorted(points[panel], key=_sort_key):
            xs = sorted(points[panel][series])
            out[panel][series] = Series(tuple(xs), tuple(points[panel][series][x] for x in xs))
    return out


def _series_style(label: str, index: int) -> dict[str, Any]:
    """Color by effort when the label names one (the same color in every figure), else by position."""
    effort = next((w for w in label.split() if w in COLORS), None)
    return {"color": COLORS[effort] if effort else PALETTE[index % len(PALETTE)], "linestyle": "-", "marker": "o"}


def _grid(n: int, width: float = 3.6, height: float = 2.8, max_cols: int = 3):
    cols = min(max_cols, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 0.8), squeeze=False, layout="constrained")
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _stamp(cells: Sequence[Cell]) -> str:
    """REHEARSAL and its factor(s) when any cell came from the built-in target; empty for measurements."""
    labels = sorted({rehearsal_label(c.served_by) for c in cells if is_rehearsal(c.served_by)})
    return "; ".join(labels) + ": simulated timings, not a measurement" if labels else ""


def _save(fig, out: Path, name: str, title: str, stamp: str = "") -> list[Path]:
    out = Path(out)
    fig.suptitle(title + (f"\n{stamp}" if stamp else ""), fontsize=10, color="#b00000" if stamp else "black")
    out.mkdir(parents=True, exist_ok=True)
    files = [out / f"{name}.png", out / f"{name}.svg"]
    if fig.get_layout_engine() is not None:
        fig.canvas.draw()  # solve the constrained layout once, not once per file
        fig.set_layout_engine("none")
    for path in files:
        fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return files


def _line_figure(data: FigureData, out: Path, logx: bool = False, dash_by: Sequence[str] = ()) -> FigureData:
    """Draw data.panels as small multiples of line plots; skip with a note when nothing has 2 points."""
    if not data.panels:
        data.note = data.note or "no cells hold this figure's data"
        return data
    with plt.rc_context(STYLE):
        fig, axes = _grid(len(data.panels))
        dashes: dict[str, str] = {}
        for ax, (panel, series) in zip(axes, data.panels.items()):
            for i, (label, s) in enumerate(series.items()):
                style = _series_style(label, i)
                if dash_by:  # one line style per GPU (or whatever dash_by names), the same in every panel
                    word = next((w for w in label.split() if w in dash_by), "")
                    style["linestyle"] = dashes.setdefault(word, LINESTYLES[len(dashes) % len(LINESTYLES)])
                ax.plot(s.x, s.y, label=label, **style)
            ax.set_title(panel)
            ax.set_xlabel(data.xlabel)
            ax.set_ylabel(data.ylabel)
            if logx:
                ax.set_xscale("log", base=2)
                ticks = sorted({x for s in series.values() for x in s.x})
                ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_ylim(bottom=0)
        _figure_legend(fig, axes)
        data.files = _save(fig, out, data.name, data.title, data.stamp)
    return data


def _figure_legend(fig, axes) -> None:
    """One legend for the whole figure (the series are the same in every panel): cheaper than one each."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(8, len(handles)), frameon=False)


# ---- figures 1, 2 and the beyond-study per-user metrics -------------------------------------------

def _vs_users(name: str, title: str, ylabel: str, y: Callable[[Cell], float | None]):
    def figure(cells: Sequence[Cell], out: Path) -> FigureData:
        data = FigureData(name, title, "concurrent users", ylabel,
                          _grouped(cells, ("gpu", "model", "prompts"), ("effort",), "users", y), stamp=_stamp(cells))
        return _line_figure(data, out, logx=True)
    figure.__name__ = name
    figure.__doc__ = title
    return figure


def _pct(path: str) -> Callable[[Cell], float | None]:
    return lambda c: None if c.metric(path) is None else 100.0 * c.metric(path)  # type: ignore[operator]


fig1_response_time = _vs_users("fig1_response_time", "Fig. 1: median response time vs users", "median response time (ms)",
                               lambda c: c.metric("response_time_ms.median"))
fig2_requests_per_s = _vs_users("fig2_requests_per_s", "Fig. 2: requests per second vs users", "requests/s",
                                lambda c: c.metric("rps"))
ttft_vs_users = _vs_users("ttft_vs_users", "Time to first token (median) vs users", "median TTFT (ms)",
                          lambda c: c.metric("ttft_ms.median"))
ttfvt_vs_users = _vs_users("ttfvt_vs_users", "Time to first visible token (median) vs users", "median TTFVT (ms)",
                           lambda c: c.metric("ttfvt_ms.median"))
tpot_vs_users = _vs_users("tpot_vs_users", "Time per output token (mean) vs users", "mean TPOT (ms/token)",
                          lambda c: c.metric("tpot_ms.mean"))
reasoning_share = _vs_users("reasoning_share", "Reasoning share of output tokens", "reasoning tokens (% of output)",
                            _pct("reasoning_ratio"))
answered_share = _vs_users("answered_share", "Requests with a visible answer", "answered requests (%)",
                           _pct("answered_ratio"))


# ---- figure 3: output tokens per model and effort -------------------------------------------------

def fig3_output_tokens(cells: Sequence[Cell], out: Path) -> FigureData:
    """Per model (and prompt set): per effort, min/max/mean/median of output tokens, with the
    distribution of every request's count (pooled over the cells of that model and effort)."""
    data = FigureData("fig3_output_tokens", "Fig. 3: output tokens per model and effort", "reasoning effort", "output tokens per request",
                      stamp=_stamp(cells))
    pooled: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        panel = " ".join([c.model] + [_fmt(a, getattr(c, a)) for a in _varying(cells, ("gpu", "prompts", "max_tokens"))])
        counts = c.output_tokens()
        if not counts and c.metric("output_tokens.count"):  # no samples: the summary's figures only
            pooled[panel].setdefault(c.effort, [])
            data.extra.setdefault("from_summary", {}).setdefault(panel, {})[c.effort] = c.summary["output_tokens"]
        pooled[panel][c.effort].extend(counts)
    for panel in sorted(pooled, key=_sort_key):
        data.panels[panel] = {}
        for effort in sorted(pooled[panel], key=_effort_key):
            counts = sorted(pooled[panel][effort])
            if counts:
                n = len(counts)
                median = counts[n // 2] if n % 2 else (counts[n // 2 - 1] + counts[n // 2]) / 2
                stats = (float(counts[0]), float(counts[-1]), sum(counts) / n, float(median))
            else:
                s = data.extra["from_summary"][panel][effort]
                stats = tuple(float(s[k]) for k in ("min", "max", "mean", "median"))
            data.panels[panel][effort] = Series(("min", "max", "mean", "median"), stats)
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
            ax.set_xticks(positions, efforts)
            ax.set_title(panel)
            ax.set_xlabel(data.xlabel)
            ax.set_ylabel(data.ylabel)
            ax.set_ylim(bottom=0)
            ax.legend(loc="upper left")
        data.files = _save(fig, out, data.name, data.title + " (bars: min-max; shape: every request)", data.stamp)
    return data


# ---- figure 4: response time vs max_tokens ----------------------------------------------------------

def fig4_max_tokens(cells: Sequence[Cell], out: Path) -> FigureData:
    capped = [c for c in cells if c.max_tokens > 0]
    data = FigureData("fig4_max_tokens", "Fig. 4: median response time vs max_tokens", "max_tokens", "median response time (ms)",
                      stamp=_stamp(cells))
    panels = _grouped(capped, ("gpu", "model", "prompts"), ("effort", "users"), "max_tokens", lambda c: c.metric("response_time_ms.median"))
    data.panels = {p: {s: v for s, v in series.items() if len(v.x) > 1} for p, series in panels.items()}
    data.panels = {p: s for p, s in data.panels.items() if s}
    if not data.panels:
        data.note = "no cells vary max_tokens (run scenarios/max-tokens.yaml)"
        return data
    return _line_figure(data, out, logx=True)


# ---- figures 5-8: one GPU vs another ----------------------------------------------------------------

def _vs_gpu(name: str, title: str, ylabel: str, y: Callable[[Cell], float | None]):
    def figure(cells: Sequence[Cell], out: Path) -> FigureData:
        by: dict[tuple[str, str], set[str]] = defaultdict(set)
        for c in cells:
            by[(c.model, c.prompts)].add(c.gpu)
        shared = [c for c in cells if len(by[(c.model, c.prompts)]) > 1]
        data = FigureData(name, title, "concurrent users", ylabel, stamp=_stamp(cells))
        if shared:
            data.panels = _grouped(shared, ("model", "prompts"), ("effort", "gpu"), "users", y)
        else:
            data.note = "needs one model and prompt set measured on two GPUs (give two or more folders)"
            return data
        data.extra["gpus"] = sorted({c.gpu for c in shared})
        return _line_figure(data, out, logx=True, dash_by=data.extra["gpus"])
    figure.__name__ = name
    figure.__doc__ = title
    return figure


fig5_gpu_response_time = _vs_gpu("fig5_gpu_response_time", "Fig. 5: median response time, GPU vs GPU", "median response time (ms)",
                                 lambda c: c.metric("response_time_ms.median"))
fig6_gpu_requests_per_s = _vs_gpu("fig6_gpu_requests_per_s", "Fig. 6: requests per second, GPU vs GPU", "requests/s",
                                  lambda c: c.metric("rps"))
fig7_gpu_tpot = _vs_gpu("fig7_gpu_tpot", "Fig. 7: mean time per output token, GPU vs GPU", "mean TPOT (ms/token)",
                        lambda c: c.metric("tpot_ms.mean"))
fig8_gpu_output_throughput = _vs_gpu("fig8_gpu_output_throughput", "Fig. 8: output throughput, GPU vs GPU", "output throughput (tok/s)",
                                     lambda c: c.metric("output_throughput_tok_s"))


# ---- beyond the study -------------------------------------------------------------------------------

def throughput_vs_latency(cells: Sequence[Cell], out: Path) -> FigureData:
    """One curve per configuration (GPU, model, prompts, effort): users grow along it."""
    data = FigureData("throughput_vs_latency", "Output throughput vs median latency (users grow along each curve)",
                      "median response time (ms)", "output throughput (tok/s)", stamp=_stamp(cells))
    groups: dict[str, list[Cell]] = defaultdict(list)
    attrs = ["gpu", "model", "prompts", "effort", "max_tokens"]
    shown = [a for a in attrs if a in _varying(cells, attrs)] or ["effort"]
    for c in cells:
        if c.metric("response_time_ms.median") is not None and c.metric("output_throughput_tok_s") is not None:
            groups[" ".join(_fmt(a, getattr(c, a)) for a in shown)].append(c)
    series = {}
    for label in sorted(groups, key=_sort_key):
        pts = sorted(groups[label], key=lambda c: c.users)
        series[label] = Series(tuple(c.metric("response_time_ms.median") for c in pts), tuple(c.metric("output_throughput_tok_s") for c in pts))
        data.extra.setdefault("users", {})[label] = tuple(c.users for c in pts)
    if not series:
        data.note = "no cells hold latency and throughput"
        return data
    data.panels = {"all configurations": series}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for i, (label, s) in enumerate(series.items()):
            line, = ax.plot(s.x, s.y, marker="o", color=PALETTE[i % len(PALETTE)], linestyle=LINESTYLES[(i // len(PALETTE)) % 4], label=label)
            for x, y, u in zip(s.x, s.y, data.extra["users"][label]):
                ax.annotate(f"u{u}", (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points", color=line.get_color())
        ax.set_xlabel(data.xlabel)
        ax.set_ylabel(data.ylabel)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), ncols=1 + len(series) // 24)
        data.files = _save(fig, out, data.name, data.title, data.stamp)
    return data


def server_timeline(cells: Sequence[Cell], out: Path) -> FigureData:
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
            label = c.label if len({x.source for x in cells}) == 1 else f"{c.gpu} {c.label}"
            data.panels[label] = panel
    if not data.panels:
        data.note = "no cell holds server_metrics.jsonl samples (the server had no /metrics, or these are make load runs)"
        return data
    return _small_multiples(data, out, ("running", "waiting"))


def kv_cache_timeline(cells: Sequence[Cell], out: Path) -> FigureData:
    """Small multiples, one per cell: the server's KV-cache usage (%) over the cell."""
    data = FigureData("kv_cache_timeline", "Server: KV-cache usage over each cell", "time in cell (s)", "KV cache used (%)",
                      stamp=_stamp(cells))
    for c in cells:
        kv = [(s.t_s, 100.0 * s.kv_cache_usage) for s in c.server_samples if s.kv_cache_usage is not None]
        if kv:
            label = c.label if len({x.source for x in cells}) == 1 else f"{c.gpu} {c.label}"
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


STUDY_FIGURES = (fig1_response_time, fig2_requests_per_s, fig3_output_tokens, fig4_max_tokens,
                 fig5_gpu_response_time, fig6_gpu_requests_per_s, fig7_gpu_tpot, fig8_gpu_output_throughput)
BEYOND_FIGURES = (ttft_vs_users, ttfvt_vs_users, tpot_vs_users, throughput_vs_latency, server_timeline, kv_cache_timeline,
                  reasoning_share, answered_share)


_work: tuple[Sequence[Callable], Sequence[Cell], Path] | None = None


def _draw(index: int) -> FigureData:
    assert _work is not None
    figures, cells, out = _work
    return figures[index](cells, out)


def draw_all(cells: Sequence[Cell], out: Path, figures: Sequence[Callable] = STUDY_FIGURES + BEYOND_FIGURES) -> list[FigureData]:
    """Every figure into ``out``, on every core; the skipped ones come back with a note and no files."""
    global _work
    _work = (tuple(figures), cells, Path(out))
    workers = min(len(figures), os.cpu_count() or 1)
    if workers < 2:
        return [_draw(i) for i in range(len(figures))]
    # Forked workers inherit the figures and the loaded cells; each figure is drawn and saved in one.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(_draw, range(len(figures))))
