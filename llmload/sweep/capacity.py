"""`make capacity`: the largest USERS (or RATE) whose run meets SLO, by an adaptive search over sweep cells.

With TURNS, USERS are users holding conversations and RATE starts conversations per second: the search finds how
many of either the server takes.

From CAPACITY_START the load doubles until a step fails, then the search bisects between the largest
passing and the smallest failing step, until they are within CAPACITY_PRECISION of the answer (or
one user apart) or CAPACITY_STEPS are spent. Every step is a sweep cell run with EARLY_STOP=on, kept
in OUT/cells/<key>/ like any other: rerunning the same command reuses finished steps.

    OUT/capacity.json   max_users (or max_rate), its interval, why the search stopped, every step
    OUT/capacity.png    each SLO's statistic against the load, its limit and the answer (drawn by plots, svg too)
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Mapping

import orjson

from llmload.errors import ConfigError, Interrupted
from llmload.system.files import write_atomic
from llmload.loadtest.preflight import probe_server, served_by
from llmload.loadtest.target import target
from llmload.system.processes import SignalForwarder
from llmload.results.decision import CapacityPoint, capacity_point
from llmload.results.report import figure_text
from llmload.timescale import resolve_time_scale
from llmload.results.storage import CAPACITY_FILE, CAPACITY_SCHEMA_VERSION, CELL_FILE, read_summary
from llmload.results.summary import Summary
from llmload.results.sweepfiles import Step
from llmload.sweep.runner import run_cell, set_aside, write_cells_csv
from llmload.sweep.scenarios import cell_key, cell_options, make_cell

__all__ = ["CAPACITY_FILE", "CAPACITY_SCHEMA_VERSION", "Step", "step_of", "next_load", "answer", "check_capacity_settings", "run_capacity"]

_SEARCHED = {"users": "USERS", "rate": "RATE"}


def _bracket(steps: list[Step]) -> tuple[float | None, float | None]:
    """(largest passing load below the smallest failing one, smallest failing load); None where there is none."""
    fails = [s.load for s in steps if not s.passed]
    high = min(fails) if fails else None
    low = max((s.load for s in steps if s.passed and (high is None or s.load < high)), default=None)
    return low, high


def next_load(steps: list[Step], start: float, maximum: float, precision: float, whole: bool) -> float | None:
    """The next load to try, or None when the search is done (``whole``: loads are whole users)."""
    if not steps:
        return start
    low, high = _bracket(steps)
    if high is None:  # everything passed: grow
        return None if low >= maximum else min(maximum, low * 2)
    if low is None:  # everything failed: shrink
        smaller = high // 2 if whole else high / 2
        return None if smaller < (1 if whole else start / 1024) else smaller
    if high - low <= max(precision * low, 1 if whole else 0):
        return None
    middle = (low + high) // 2 if whole else (low + high) / 2
    return None if middle in (low, high) else middle


def answer(steps: list[Step], whole: bool) -> tuple[float | None, list[float | None]]:
    """The capacity and its interval [lo, hi]: lo the largest surely passing load, hi under the smallest surely failing one.

    lo is 0 when no step passed for certain; hi is None when no step failed for certain.
    """
    low, high = _bracket(steps)
    sure_fails = [s.load for s in steps if not s.passed and s.certain]
    upper = min(sure_fails) if sure_fails else None
    sure_passes = [s.load for s in steps if s.passed and s.certain and (upper is None or s.load < upper)]
    if upper is not None and whole:
        upper -= 1
    return low, [max(sure_passes, default=0.0), upper]


def step_of(load: float, key: str, summary: Summary) -> Step:
    """A run as a step of the search; its verdict is certain when every SLO surely passed, or one surely failed.

    A failure needs one sure miss, not every SLO sure (a step EARLY_STOP ended was stopped by a sure miss at 99.5%).
    """
    results = [r for part in (summary, *summary.by_effort.values()) for r in part.slo]
    passed = summary.slo_met is True and summary.requests_ok > 0
    if passed:
        certain = all(r.certain for r in results)
    else:
        certain = summary.stopped_early is not None or any(r.certain and not r.passed for r in results)
    return Step(load, passed, certain, key, summary.stopped_early, summary.requests_ok, tuple(summary.slo))


def _format_load(load: float, whole: bool) -> str:
    return str(int(load)) if whole else f"{load:g}"


def run_capacity(words: dict[str, str], capacity: Any, out: Path, host: str, speedup: float, api_key: str = "",
                 progress: Callable[[str], None] = print, exported: Mapping[str, str] | None = None) -> int:
    """Search, print each step and the answer, write OUT/capacity.json; 0 when the search ended, 1 when a step crashed.

    ``exported``: METRICS_HOST and METRICS_PORT for every step (runner settings: no part of a step's key).
    """
    by, whole = capacity.capacity_by, capacity.capacity_by == "users"
    searched = _SEARCHED[by]
    base = {**words, "EARLY_STOP": "on"}
    (out / "cells").mkdir(parents=True, exist_ok=True)
    steps: list[Step] = []
    with SignalForwarder("stopped between steps; finished steps are kept: rerun the same command to resume") as signals, \
            target(cell_options(base, host, speedup)) as url:
        info = probe_server(url, api_key)  # a target that does not answer stops the search before any step
        scale = resolve_time_scale(speedup, served_by(info, ""))
        if scale.sped_up:
            progress(f"Times below are the built-in target's ({scale.text()}); each SLO limit is put on its clock to "
                     "judge them")
        while True:
            load = next_load(steps, capacity.capacity_start, capacity.capacity_max, capacity.capacity_precision, whole)
            if load is None:
                stopped_because = _why_done(steps, capacity.capacity_max, whole)
                break
            if len(steps) == capacity.capacity_steps:
                stopped_because = f"CAPACITY_STEPS={capacity.capacity_steps} steps are spent"
                break
            settings = {**base, searched: _format_load(load, whole)}
            key = cell_key(settings)
            cell_dir = out / "cells" / key
            if not (cell_dir / CELL_FILE).exists():
                set_aside(cell_dir)
                cell = make_cell(len(steps), settings, f"{searched}={settings[searched]}", {})
                started_s = time.monotonic()
                ran = run_cell(cell, cell_dir, url, scale, 1.0, api_key, lambda elapsed_s: None, signals, exported=exported)
                if signals.first:
                    raise Interrupted(signals.first, f"step {searched}={settings[searched]} stopped early and is kept "
                                                     f"unfinished in {cell_dir}; rerun the same command to resume")
                if not ran:
                    progress(f"step {searched}={settings[searched]} FAILED to run (see {cell_dir / 'load.log'}); rerun to resume")
                    return 1
                write_cells_csv(out)
                took = f" in {time.monotonic() - started_s:.0f} s"
            else:
                took = " (finished before, reused)"
            summary = read_summary(cell_dir)
            steps.append(step_of(load, key, summary))
            progress(_describe(steps[-1], searched, whole) + took)
            if (cause := unmeasurable_cause(summary)) is not None:
                stopped_because = cause
                break
    best, interval = answer(steps, whole)
    name = "max_users" if whole else "max_rate"
    number = int if whole else float  # whole users read as 13, not 13.0
    at = next((s for s in steps if best is not None and s.load == best), None)
    point = capacity_point(read_summary(out / "cells" / at.key), number(best)) if at is not None and best is not None else None
    document = {
        "schema_version": CAPACITY_SCHEMA_VERSION, "by": by, name: None if best is None else number(best),
        f"{name}_ci95": [None if b is None else number(b) for b in interval],
        "stopped_because": stopped_because, "slo": base.get("SLO", ""), "settings": base,
        "steps": [{**asdict(s), "load": number(s.load)} for s in steps],
        "at_capacity": None if point is None else asdict(point),
    }
    write_atomic(out / CAPACITY_FILE, orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    shown = "none" if best is None else _format_load(best, whole)
    bounds = ", ".join("n/a" if b is None else _format_load(b, whole) for b in interval)
    unit = "" if base.get("TURNS", "1").strip() == "1" else " users holding conversations" if whole else " conversations/s"
    progress(f"Capacity: {searched}={shown}{unit} meets SLO {base.get('SLO')} (95% interval [{bounds}]); "
             f"stopped because {stopped_because}; {out / CAPACITY_FILE}")
    if point is not None:
        progress(capacity_cost_line(point))
    return 0


def capacity_cost_line(point: CapacityPoint) -> str:
    """What the capacity found delivers and costs: the decision figures, each with its interval (and a prediction's
    model error), and the price."""
    shown = "; ".join(f"{f.label} {figure_text(f.value, f.ci95, f.model_error)}" for f in point.figures)
    price = (f"at {point.usd_per_gpu_hour:g} USD per GPU-hour x {point.gpus}" if point.usd_per_gpu_hour is not None
             else f"no cost ({point.price_source})")
    return f"At that load ({point.basis}): {shown}; {price}"


def _why_done(steps: list[Step], maximum: float, whole: bool) -> str:
    low, high = _bracket(steps)
    if high is None:
        return f"CAPACITY_MAX={_format_load(maximum, whole)} passed"
    if low is None:
        return "even the smallest load failed"
    return "the largest passing and the smallest failing load are within CAPACITY_PRECISION"


def unmeasurable_cause(summary: Summary) -> str | None:
    """Why the search cannot go on when an SLO's metric has no value on any answer (TPOT or ITL from answers that came
    in one event): no load can meet it; None when every SLO was measured."""
    for result in summary.slo:
        if result.value_ms is None and result.requests_unmeasurable:
            metric = result.slo.split("_")[0]
            one_event = summary.delivery is not None and summary.delivery.every_answer_in_one_event
            why = ("every answer came in one event, and it is timed between token events" if one_event
                   else "no answer gave a value of it")
            return (f"SLO {result.slo} is not measurable on this server: none of the {summary.requests_ok} answers of the "
                    f"first step had a {metric} ({why}); give an SLO the answers can show (e2e, ttft), or a server that "
                    "streams token by token")
    return None


def _describe(step: Step, searched: str, whole: bool) -> str:
    verdict = ("PASS" if step.passed else "FAIL") + ("" if step.certain else "?")
    values = "; ".join(f"{r.slo} {'not measurable' if r.value_ms is None else f'{round(r.value_ms, 1)} ms'}"
                       for r in step.slo)
    early = f", stopped early: {step.stopped_early}" if step.stopped_early else ""
    return f"  {searched}={_format_load(step.load, whole)}: {verdict} ({step.requests_ok} ok; {values}){early}"


def check_capacity_settings(words: dict[str, str], capacity: Any) -> None:
    """ConfigError for settings the search cannot use (before any load is sent)."""
    if not words.get("SLO"):
        raise ConfigError("SLO is missing: capacity is the largest load meeting it, e.g. SLO='ttft_p90<=2s,tpot_p90<=50ms'")
    searched = _SEARCHED[capacity.capacity_by]
    if searched in words or (searched == "RATE" and "USERS" in words):
        raise ConfigError(f"{searched} is what CAPACITY_BY={capacity.capacity_by} searches; leave it out")
    if capacity.capacity_start > capacity.capacity_max:
        raise ConfigError(f"CAPACITY_START={capacity.capacity_start:g} is above CAPACITY_MAX={capacity.capacity_max:g}; "
                          "lower CAPACITY_START or raise CAPACITY_MAX")
    if capacity.capacity_by == "users" and capacity.capacity_start != int(capacity.capacity_start):
        raise ConfigError(f"CAPACITY_START={capacity.capacity_start:g} must be a whole number of users")
    if "REQUESTS" in words:
        raise ConfigError("REQUESTS does not apply to capacity steps: each runs DURATION, or less when it surely fails")
    if "TRACE" in words:
        raise ConfigError("TRACE replays its own load, which the search cannot vary: leave it out (a sweep can vary "
                          "TRACE_SPEED)")
    cell_options({**words, searched: f"{capacity.capacity_start:g}", "EARLY_STOP": "on"})
