"""The study's figures (1-8) and the ones beyond it, drawn from loaded results through plots/drawing.py.

Every figure function takes cells and an output folder, writes ``<name>.png`` and ``<name>.svg``
and returns a :class:`FigureData` with exactly what it plotted (panels -> series -> points), so tests
check the data, not pixels. A figure whose data is absent writes nothing and returns a note.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

from llmload.results.metrics import BY_NAME, METRICS, Metric
from plots.drawing import (COLORS, LINESTYLES, PALETTE, STYLE, FigureData, draw_series, effort_color, figure_legend,
                           gpu_marker, line_figure, line_style, panel_grid, plt, save_figure, stamp_of)
from plots.points import (AXIS_LABELS, Plotted, Series, by_turn, effort_key, effort_parts, fmt, grouped, slo_value, sort_key,
                          varying, x_axis)
from plots.results import MeasuredCell
from plots.timelines import kv_cache_timeline, server_timeline

__all__ = ["FigureData", "Series", "METRIC_FIGURES", "STUDY_FIGURES", "BEYOND_FIGURES", "draw_all"]


# ---- figures 1, 2 and the per-setting ones beyond the study (a metric's: results/metrics.py) ---------

def _vs_setting(name: str, title: str, ylabel: str, metric: Plotted):
    """A figure of ``metric`` against the setting the cells vary (users in a user sweep), one colour per effort
    (a mixed run: its whole, and each effort's part in that effort's colour)."""
    def figure(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
        x = x_axis(cells)
        data = FigureData(name, f"{title} vs {AXIS_LABELS[x]}", AXIS_LABELS[x], ylabel,
                          grouped(effort_parts(cells), ("gpu", "model", "prompts"), ("effort",), x, metric), stamp=stamp_of(cells),
                          x_setting=x, slo=slo_value(cells, metric))
        return line_figure(data, out)
    figure.__name__ = name
    figure.__doc__ = title
    return figure


RESPONSE_TIME = Plotted.median_of(BY_NAME["e2e"])
fig1_response_time = _vs_setting("fig1_response_time", "Fig. 1: median response time", "median response time (ms)", RESPONSE_TIME)
fig2_requests_per_s = _vs_setting("fig2_requests_per_s", "Fig. 2: requests per second", "requests/s", Plotted("rps", "requests_ok"))
METRIC_FIGURES: dict[str, Callable] = {
    f"{m.name}_vs_users": _vs_setting(f"{m.name}_vs_users", f"{m.title} (median)",
                                      f"median {m.label} ({m.unit}{'/token' if m.per_token else ''})", Plotted.median_of(m))
    for m in METRICS if m.figure}
"""One figure per metric of the metric table that asks for one (``ttft_vs_users``, ...), by name."""
reasoning_share = _vs_setting("reasoning_share", "Reasoning share of output tokens", "reasoning tokens (% of output)",
                              Plotted("reasoning_ratio", "reasoning_tokens.count", scale=100.0))
answered_share = _vs_setting("answered_share", "Requests with a visible answer", "answered requests (%)",
                             Plotted("answered_ratio", "requests_ok", scale=100.0))
valid_answer_share = _vs_setting("valid_answer_share", "Answers valid for RESPONSE_FORMAT", "valid answers (%)",
                                 Plotted("answer_valid_ratio", "requests_ok", scale=100.0))
"""Structured output's valid share with its interval (Wilson's); no cell without RESPONSE_FORMAT holds a point."""


def _by_turn(metric: Metric):
    """A figure of ``metric``'s median (band to p90) against the conversation turn, a line per run with TURNS: later
    turns send the history, so the prefix cache decides how it grows."""
    name = f"{metric.name}_by_turn"

    def figure(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
        data = FigureData(name, f"{metric.title} by conversation turn (median, band to p90)", "conversation turn",
                          f"{metric.label} ({metric.unit})", stamp=stamp_of(cells), x_setting="turn",
                          slo=slo_value(cells, Plotted.median_of(metric)))
        series = by_turn(cells, metric.summary)
        if series:
            data.panels["all"] = series
        else:
            data.note = "no run held conversations (TURNS above 1)"
        return line_figure(data, out)
    figure.__name__ = name
    figure.__doc__ = f"{metric.title} by conversation turn"
    return figure


ttft_by_turn = _by_turn(BY_NAME["ttft"])
ttfvt_by_turn = _by_turn(BY_NAME["ttfvt"])


# ---- figure 3: output tokens per model and effort -------------------------------------------------

def fig3_output_tokens(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
    """Per model (and prompt set): per effort, min/max/mean/median of output tokens, with the
    distribution of every request's count (pooled over the cells of that model and effort)."""
    data = FigureData("fig3_output_tokens", "Fig. 3: output tokens per model and effort", "reasoning effort", "output tokens per request",
                      stamp=stamp_of(cells))
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
        fig, axes = panel_grid(len(data.panels))
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
        data.files = save_figure(fig, out, data.name, data.title + " (bars: min-max; shape: every request)", data.stamp)
    return data


# ---- figure 4: response time vs max_tokens ----------------------------------------------------------

def fig4_max_tokens(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
    """The study's figure 4, at full size: median response time against max_tokens."""
    capped = [c for c in effort_parts(cells) if c.max_tokens > 0]
    data = FigureData("fig4_max_tokens", "Fig. 4: median response time vs max_tokens", "max_tokens", "median response time (ms)",
                      stamp=stamp_of(cells), x_setting="max_tokens", slo=slo_value(capped, RESPONSE_TIME))
    panels = grouped(capped, ("gpu", "model", "prompts"), ("effort", "users"), "max_tokens", RESPONSE_TIME)
    data.panels = {p: {s: v for s, v in series.items() if len(v.x) > 1} for p, series in panels.items()}
    data.panels = {p: s for p, s in data.panels.items() if s}
    if not data.panels:
        data.note = "no cells vary max_tokens (run scenarios/max-tokens.yaml)"
        return data
    return line_figure(data, out, width=8.0, height=5.2, max_cols=1)


# ---- figures 5-8: one GPU vs another ----------------------------------------------------------------

def _vs_gpu(name: str, title: str, ylabel: str, metric: Plotted):
    def figure(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
        by: dict[tuple[str, str], set[str]] = defaultdict(set)
        for c in cells:
            by[(c.model, c.prompts)].add(c.gpu)
        shared = [c for c in effort_parts(cells) if len(by[(c.model, c.prompts)]) > 1]
        if not shared:
            return FigureData(name, title, note="needs one model and prompt set measured on two GPUs (give two or more folders)")
        x = x_axis(shared, exclude=("gpu",))
        data = FigureData(name, f"{title} (x: {AXIS_LABELS[x]})", AXIS_LABELS[x], ylabel,
                          grouped(shared, ("model", "prompts"), ("effort", "gpu"), x, metric), stamp=stamp_of(cells),
                          x_setting=x, slo=slo_value(shared, metric))
        data.extra["gpus"] = sorted({c.gpu for c in shared})
        return line_figure(data, out, dash_by=data.extra["gpus"])
    figure.__name__ = name
    figure.__doc__ = title
    return figure


fig5_gpu_response_time = _vs_gpu("fig5_gpu_response_time", "Fig. 5: median response time, GPU vs GPU", "median response time (ms)",
                                 RESPONSE_TIME)
fig6_gpu_requests_per_s = _vs_gpu("fig6_gpu_requests_per_s", "Fig. 6: requests per second, GPU vs GPU", "requests/s",
                                  Plotted("rps", "requests_ok"))
fig7_gpu_tpot = _vs_gpu("fig7_gpu_tpot", "Fig. 7: median time per output token, GPU vs GPU", "median TPOT (ms/token)",
                        Plotted.median_of(BY_NAME["tpot"]))
cost_vs_users = _vs_gpu("cost_vs_users", "Cost per million output tokens, GPU vs GPU", "USD per million output tokens",
                       Plotted("cost.usd_per_million_output_tokens", "requests_ok"))
fig8_gpu_output_throughput = _vs_gpu("fig8_gpu_output_throughput", "Fig. 8: output throughput, GPU vs GPU", "output throughput (tok/s)",
                                     Plotted("output_throughput_tok_s", "requests_ok"))


# ---- beyond the study -------------------------------------------------------------------------------

def throughput_vs_latency(cells: Sequence[MeasuredCell], out: Path) -> FigureData:
    """One curve per configuration (GPU, model, prompts, effort): users grow along it."""
    data = FigureData("throughput_vs_latency", "Output throughput vs median latency (users grow along each curve)",
                      "median response time (ms)", "output throughput (tok/s)", stamp=stamp_of(cells), x_setting="users")
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
            style = {"color": effort_color(s.effort, i), "marker": gpu_marker(s.gpu, markers), "linestyle": line_style(s, mix_styles, rest_style)}
            draw_series(ax, s, label, style, float, i)
            for x, y, u in zip(s.x, s.y, data.extra["users"][label]):
                ax.annotate(f"u{u}", (x, y), fontsize=6, xytext=(3, -8), textcoords="offset points", color=style["color"])
        ax.set_xlabel(data.xlabel)
        ax.set_ylabel(data.ylabel)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        figure_legend(fig, [ax], list(series.values()), markers, dashes, mix_styles)
        data.files = save_figure(fig, out, data.name, data.title, data.stamp)
    return data


STUDY_FIGURES = (fig1_response_time, fig2_requests_per_s, fig3_output_tokens, fig4_max_tokens,
                 fig5_gpu_response_time, fig6_gpu_requests_per_s, fig7_gpu_tpot, fig8_gpu_output_throughput)
BEYOND_FIGURES = (*METRIC_FIGURES.values(), throughput_vs_latency, server_timeline, kv_cache_timeline, reasoning_share,
                  answered_share, valid_answer_share, cost_vs_users, ttft_by_turn, ttfvt_by_turn)


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
