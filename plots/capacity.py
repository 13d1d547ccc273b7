"""What the capacity figure plots, read from a `make capacity` OUT: capacity.json and each step's summary.json.

One panel per SLO: its statistic at every step against the load (USERS or RATE), with the 95% interval,
the whole run's line and, under a mix, one line per effort (each effort's verdict counts); the limit;
and the answer with its interval. No matplotlib here: tests read these directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from llmload.results.provenance import is_rehearsal, rehearsal_label, served_by_of
from llmload.timescale import TimeScale, time_scale_of
from llmload.results.slo import SloResult
from llmload.results.storage import SUMMARY_FILE, read_summary
from llmload.results.sweepfiles import read_capacity

__all__ = ["SloPoint", "SloPanel", "CapacityPlot", "WHOLE_RUN", "load_capacity"]

WHOLE_RUN = "whole run"
"""The line of every request together (beside each effort's under a mix)."""


@dataclass(frozen=True)
class SloPoint:
    """One step's value of one SLO's statistic."""

    load: float
    value_ms: float | None
    ci95_ms: tuple[float, float] | None
    passed: bool
    certain: bool


@dataclass(frozen=True)
class SloPanel:
    slo: str
    """As given, e.g. ttft_p90<=2s."""
    limit_ms: float
    lines: dict[str, tuple[SloPoint, ...]]
    """WHOLE_RUN, then each effort of a mix: points sorted by load."""


@dataclass(frozen=True)
class CapacityPlot:
    by: str
    """users or rate."""
    answer: float | None
    answer_ci95: tuple[float | None, float | None]
    stopped_because: str
    panels: tuple[SloPanel, ...]
    steps: tuple[tuple[float, bool, str | None], ...]
    """Each step's load, whether it met every SLO, and why it stopped early (None: it ran out DURATION)."""
    rehearsals: tuple[str, ...] = ()
    """REHEARSAL with its factor, one per factor, when the steps ran against the built-in target."""
    conversations: bool = False
    """The steps' users held conversations (TURNS above 1): RATE counts conversations started per second."""
    played: tuple[str, ...] = ()
    """Each GPU a sped-up rehearsal's steps are drawn for, with the factor their times took (``h100 (times x4)``)."""


def _points(results: Sequence[SloResult], load: float, scale: TimeScale) -> dict[str, SloPoint]:
    """Each SLO's point; a rehearsal's times as the played GPU's (its time scale's), on the scale of the SLO as given."""
    return {r.slo: SloPoint(load, scale.played(r.value_ms, "time"), scale.played_interval(r.value_ms_ci95, "time"),
                            r.passed, r.certain) for r in results}


def load_capacity(out: Path) -> CapacityPlot:
    """Read OUT/capacity.json and the summaries of its steps; ResultsError (one line) when it is no capacity result."""
    result = read_capacity(Path(out))
    steps = sorted(result.steps, key=lambda s: s.load)
    lines: dict[str, dict[str, list[SloPoint]]] = {}  # slo -> line -> points
    limits: dict[str, float] = {}
    stamps: set[str] = set()
    played: set[str] = set()
    turns: set[str] = set()
    for step in steps:
        cell = Path(out) / "cells" / step.key
        summary = read_summary(cell) if (cell / SUMMARY_FILE).exists() else None  # else the step's own record
        served_by = served_by_of(summary.config if summary else {})
        scale = time_scale_of(summary.config if summary else {})
        if is_rehearsal(served_by):
            stamps.add(rehearsal_label(served_by))
            if scale.sped_up:
                played.add(f"{served_by.get('gpu_profile') or '?'} (times x{scale.factor('time'):g})")
        if summary is not None:
            turns.add(str(summary.config.get("turns") or "1").strip())
        parts = {WHOLE_RUN: summary.slo, **{e: m.slo for e, m in summary.by_effort.items()}} if summary else {WHOLE_RUN: step.slo}
        for line, results in parts.items():
            for slo, point in _points(results, float(step.load), scale).items():
                lines.setdefault(slo, {}).setdefault(line, []).append(point)
        limits.update({r.slo: scale.played(r.limit_ms, "time") for r in parts[WHOLE_RUN]})  # judged on the target's clock
    panels = tuple(SloPanel(slo, limits[slo], {line: tuple(points) for line, points in by_line.items()})
                   for slo, by_line in lines.items())
    return CapacityPlot(result.by, result.answer, result.answer_ci95, result.stopped_because, panels,
                        tuple((float(s.load), s.passed, s.stopped_early) for s in steps), tuple(sorted(stamps)),
                        any(t != "1" for t in turns), tuple(sorted(played)))
