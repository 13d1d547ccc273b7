"""The server's own series over each cell, as small multiples: requests running and waiting, KV-cache usage."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from plots.drawing import PALETTE, STYLE, FigureData, matplotlib, plt, save_figure, stamp_of
from plots.points import Series
from plots.results import MeasuredCell

__all__ = ["server_timeline", "kv_cache_timeline"]


def server_timeline(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
    """Small multiples, one per cell: requests running and waiting (KV-cache usage: kv_cache_timeline)."""
    data = FigureData("server_timeline", "Server: requests running and waiting over each cell",
                      "time in cell (s)", "requests", stamp=stamp_of(cells, scaled=False))
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
                      stamp=stamp_of(cells, scaled=False))
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
        data.files = save_figure(fig, out, data.name, data.title, data.stamp)
    return data
