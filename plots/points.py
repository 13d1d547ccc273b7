"""What a figure plots, before any drawing: the varying axis, panels, series and their points.

Each point keeps what a reader needs to judge it: how many requests stand behind it (``n``), the
percentile band above a median, the 95% interval when summary.json has one (``<metric>_ci95``),
and whether its cell was cut short (partial). A run that mixed efforts (EFFORT=mix:...) is also
broken down into one part per effort (``effort_parts``): each its own series, in the effort's colour.
No matplotlib here: tests read these directly.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from llmload.results.metrics import Metric
from llmload.results.predicted import kind_of, scaled_distribution
from llmload.results.slo import parse_slos
from plots.results import MeasuredCell, effort_part

__all__ = ["EFFORT_ORDER", "AXES", "AXIS_LABELS", "NUMERIC_AXES", "THIN_SAMPLE", "Plotted", "Series", "sort_key", "effort_key", "varying",
           "fmt", "x_axis", "grouped", "same_point", "slo_value", "effort_parts", "by_turn"]

EFFORT_ORDER = ("none", "low", "medium", "high")
AXES = ("users", "rate", "max_tokens", "turns", "think_time", "prefix_tokens", "trace_speed", "api", "response_format", "prompts", "model",
        "effort", "gpu")
"""The settings a scenario varies, in the order a figure prefers them as its x axis."""
AXIS_LABELS = {"users": "concurrent users", "rate": "arrivals per second (RATE)", "max_tokens": "max_tokens", "turns": "turns per conversation (TURNS)",
               "think_time": "think time (THINK_TIME)", "prefix_tokens": "shared prefix tokens (PREFIX_TOKENS)",
               "trace_speed": "trace speed (TRACE_SPEED)", "api": "API (chat or responses)",
               "response_format": "structured output (RESPONSE_FORMAT)", "prompts": "prompt set", "model": "model",
               "effort": "reasoning effort", "gpu": "GPU"}
NUMERIC_AXES = ("users", "rate", "max_tokens")
THIN_SAMPLE = 20
"""A point that stands on fewer requests than this is marked thin (drawn hollow, its n in red)."""


@dataclass(frozen=True)
class Plotted:
    """One summary figure to plot, and where its sample size, band and SLO come from."""

    path: str
    """Dotted summary.json path of the value, e.g. ``ttft_ms.median``."""
    n_path: str
    """The count of the sample behind it, e.g. ``ttft_ms.count``."""
    scale: float = 1.0
    band: str | None = None
    """Upper edge of the band drawn above the value, e.g. ``ttft_ms.p90``."""
    slo: str | None = None
    """The SLO metric on this value (``ttft``, as in SLO=ttft_p90<=2s): the runs' limit is drawn as a line."""

    @classmethod
    def median_of(cls, metric: Metric) -> "Plotted":
        """A metric of the metric table: its median, the band up to its p90, its SLO line."""
        return cls(metric.path("median"), metric.path("count"), band=metric.path("p90"), slo=metric.name)

    def value(self, cell: MeasuredCell) -> float | None:
        v = cell.metric(self.path)
        return None if v is None else v * self.scale

    def upper(self, cell: MeasuredCell) -> float | None:
        v = cell.metric(self.band) if self.band else None
        return None if v is None else v * self.scale

    def ci95(self, cell: MeasuredCell) -> tuple[float, float] | None:
        """The 95% interval summary.json gives for the value (``median_ci95`` beside ``median``), if any."""
        ci = cell.ci95(self.path)
        return None if ci is None else (ci[0] * self.scale, ci[1] * self.scale)


@dataclass(frozen=True)
class Series:
    """One line: points sorted by x, each with its sample size, band top, interval and completeness."""

    x: tuple[Any, ...]
    y: tuple[float, ...]
    n: tuple[int, ...] = ()
    upper: tuple[float | None, ...] = ()
    ci95: tuple[tuple[float, float] | None, ...] = ()
    partial: tuple[bool, ...] = ()
    effort: str = ""
    """The series' effort when all its points share one (its colour), else empty."""
    gpu: str = ""
    """The series' GPU when all its points share one (its marker), else empty."""
    mix: str = ""
    """Set when the series is one effort's part of mixed runs: their EFFORT=mix:... (drawn in that mix's line style)."""

    @property
    def thin(self) -> tuple[bool, ...]:
        return tuple(n < THIN_SAMPLE for n in self.n)


def effort_key(effort: str) -> tuple[int, str]:
    return (EFFORT_ORDER.index(effort) if effort in EFFORT_ORDER else len(EFFORT_ORDER), effort)


def sort_key(text: Any) -> tuple:
    """Natural order for labels: numbers inside compare as numbers, efforts in their order."""
    out: list[Any] = []
    for word in str(text).split():
        if word in EFFORT_ORDER:
            out.append((0, EFFORT_ORDER.index(word), ""))
        else:
            digits = "".join(ch for ch in word if ch.isdigit())
            out.append((1, int(digits) if digits else 0, word))
    return tuple(out)


def varying(cells: Sequence[MeasuredCell], attrs: Iterable[str]) -> list[str]:
    return [a for a in attrs if len({getattr(c, a) for c in cells}) > 1]


def effort_parts(cells: Sequence[MeasuredCell], keep_mixed: bool = True) -> list[MeasuredCell]:
    """The cells, each run that mixed efforts followed by one part per effort it sent (``keep_mixed=False``:
    the parts in place of the mixed run)."""
    out: list[MeasuredCell] = []
    for c in cells:
        efforts = [e for e, part in c.summary.by_effort.items() if part.requests_ok or part.requests_failed]
        out.extend(([c] if keep_mixed or not efforts else []) + [effort_part(c, e) for e in efforts])
    return out


def fmt(attr: str, value: Any) -> str:
    if attr == "mix":
        return f"in {value}" if value else ""
    if attr == "users":
        return f"u{value}"
    if attr == "rate":
        return f"RATE={value:g}" if value else "closed loop"
    if attr == "max_tokens":
        return f"max_tokens={value or 'unset'}"
    if attr in ("turns", "think_time", "prefix_tokens"):
        return f"{attr}={value}"
    if attr == "trace_speed":
        return f"{value:g}x"
    if attr == "api":
        return f"API={value}"
    if attr == "response_format":
        kind, _, path = str(value).partition(":")
        return f"{kind}:{Path(path).stem}" if path else kind or "text"
    return str(value)


def x_axis(cells: Sequence[MeasuredCell], exclude: Sequence[str] = ()) -> str:
    """The setting the cells vary, first in AXES order; effort parts aside. When nothing varies (a lone run): RATE
    when every run kept one, else users (an open loop's one dispatching user says nothing of its load)."""
    runs = [c for c in cells if not c.mix] or cells
    lone = "rate" if all(c.rate for c in runs) else "users"
    return next((a for a in AXES if a not in exclude and a in varying(runs, AXES)), lone)


def slo_value(cells: Sequence[MeasuredCell], metric: Plotted) -> float | None:
    """The SLO the runs set on this metric (the first cell's that has one), scaled like the metric."""
    if metric.slo is None:
        return None
    for c in cells:
        for slo in parse_slos(str(c.config.get("slo") or "")):
            if slo.metric == metric.slo:
                return slo.limit_s * 1000.0 * metric.scale  # the values are milliseconds before scaling
    return None


def grouped(cells: Sequence[MeasuredCell], panel_attrs: Sequence[str], series_attrs: Sequence[str], x_attr: str,
            metric: Plotted) -> dict[str, dict[str, Series]]:
    """Panels keyed by panel_attrs (plus every other varying setting, so no two cells share a point),
    series by series_attrs, points sorted by x; cells without the value are left out. Runs of the same settings
    share one point: the last given is drawn (``same_point`` names them)."""
    panel_attrs = [a for a in panel_attrs if a != x_attr]
    series_attrs = [a for a in series_attrs if a != x_attr] + (["mix"] if any(c.mix for c in cells) else [])
    others = [a for a in varying(cells, AXES) if a not in (*panel_attrs, *series_attrs, x_attr)]
    panel_attrs = [a for a in panel_attrs if a != "gpu" or a in varying(cells, ("gpu",))] + others  # the GPU only when it varies
    points: dict[str, dict[str, dict[Any, MeasuredCell]]] = defaultdict(lambda: defaultdict(dict))
    for c in cells:
        if metric.value(c) is None:
            continue
        panel = " ".join(fmt(a, getattr(c, a)) for a in panel_attrs) or "all"
        series = " ".join(filter(None, (fmt(a, getattr(c, a)) for a in series_attrs))) or "all"
        points[panel][series][getattr(c, x_attr)] = c
    out: dict[str, dict[str, Series]] = {}
    for panel in sorted(points, key=sort_key):
        out[panel] = {}
        for label in sorted(points[panel], key=sort_key):
            by_x = points[panel][label]
            xs = sorted(by_x, key=lambda v: v if isinstance(v, (int, float)) else sort_key(v))
            cs = [by_x[x] for x in xs]
            efforts, gpus, mixes = {c.effort for c in cs}, {c.gpu for c in cs}, {c.mix for c in cs}
            out[panel][label] = Series(
                tuple(xs), tuple(metric.value(c) for c in cs), tuple(int(c.metric(metric.n_path) or 0) for c in cs),
                tuple(metric.upper(c) for c in cs), tuple(metric.ci95(c) for c in cs), tuple(not c.complete for c in cs),
                efforts.pop() if len(efforts) == 1 else "", gpus.pop() if len(gpus) == 1 else "", mixes.pop() if len(mixes) == 1 else "")
    return out


def same_point(cells: Sequence[MeasuredCell]) -> list[tuple[MeasuredCell, ...]]:
    """Runs that share every setting a figure tells apart (AXES), in the order given: a figure has one point for them
    and draws the last (``grouped``), so the others are named to the reader rather than dropped unsaid."""
    by_settings: dict[tuple[Any, ...], list[MeasuredCell]] = defaultdict(list)
    for c in cells:
        by_settings[tuple(getattr(c, a) for a in AXES) + (c.mix,)].append(c)
    return [tuple(group) for group in by_settings.values() if len(group) > 1]


def by_turn(cells: Sequence[MeasuredCell], field: str) -> dict[str, Series]:
    """Per run with conversations (summary.json's ``by_turn``): the median of ``field`` (``ttft_ms``) at each turn, a
    band to its p90, its interval and n; one series per run, labelled by what tells the runs apart."""
    out: dict[str, Series] = {}
    for c in cells:
        turns = sorted(c.summary.by_turn.items(), key=lambda item: int(item[0]))
        shown = [(int(turn), getattr(part, field)) for turn, part in turns if getattr(part, field).median is not None]
        if not shown:
            continue
        label = (c.label if len({x.source for x in cells}) == 1 else f"{c.gpu} {c.label}") or "run"
        played = [scaled_distribution(d, c.time_scale.factor(kind_of(field))) for _, d in shown]  # a rehearsal's: the GPU's
        out[label] = Series(tuple(t for t, _ in shown), tuple(p.median for p in played), tuple(d.count for _, d in shown),
                            tuple(p.p90 for p in played),
                            tuple(None if p.median_ci95 is None else tuple(p.median_ci95) for p in played),
                            tuple(not c.complete for _ in shown), gpu=c.gpu)
    return out
