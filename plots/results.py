"""Results folders loaded into frozen dataclasses: a sweep's OUT (scenario.json, cells/<key>/...) or
one `make load` run folder (summary.json + samples.jsonl).

A sweep cell is *complete* when its cell.json exists. A cell listed in scenario.json whose folder
holds a summary.json but no cell.json is loaded as *partial* (drawn, and said so); one with no
summary at all is *missing*. Nothing here writes to a results folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from llmload.errors import ResultsError
from llmload.options import config_name, option_by_key
from llmload.results.predicted import kind_of
from llmload.results.provenance import bare_model_name, served_by_of
from llmload.timescale import TimeScale, time_scale_of
from llmload.results.records import record_rows
from llmload.results.server_metrics import MetricsSample, read_samples
from llmload.results.summary import Measures, Summary, metric_ci95, metric_value
from llmload.results.storage import CELL_FILE, METRICS_FILE, SAMPLES_FILE, SCENARIO_FILE, SUMMARY_FILE, read_summary, rebuild_summary
from llmload.results.sweepfiles import PlannedCell, read_cell_marker, read_scenario

__all__ = ["ResultsError", "MeasuredCell", "effort_part", "MissingCell", "Results", "load_results", "WORKLOAD_KEYS"]

WORKLOAD_KEYS = ("MODEL", "PROMPTS", "EFFORT", "USERS", "MAX_TOKENS", "REQUESTS", "WARMUP_REQUESTS",
                 "ORDER", "NONCE", "TEMPERATURE", "SEED", "EXTRA_BODY", "CLIENT", "TURNS", "THINK_TIME", "PREFIX_TOKENS",
                 "PREFIX_GROUPS", "TRACE", "TRACE_SPEED", "TRACE_LIMIT", "API", "RESPONSE_FORMAT")
"""The settings that define a workload; a cell's GPU and server are not among them."""


def _short_model(model: Any) -> str:
    text = str(model or "")
    return bare_model_name(text) or "(server's)"


@dataclass(frozen=True)
class MeasuredCell:
    """One measured run: a sweep cell or a lone `make load` folder."""

    path: Path
    key: str
    index: int | None
    label: str
    settings: dict[str, str]
    summary: Summary
    server: dict[str, str]
    """What the scenario declares the study ran on (not checked against the server): see ``served_by``."""
    complete: bool
    source: str = ""
    """The results folder this cell was loaded from (for figures over several folders)."""
    mix: str = ""
    """Set on one effort's part of a run that mixed efforts (``effort_part``): that run's EFFORT=mix:...; else empty."""

    @property
    def config(self) -> dict[str, Any]:
        return self.summary.config

    def value(self, key: str) -> Any:
        """A setting by its KEY (``GPU``): as the run recorded it, else as the scenario set it, else None."""
        recorded = self.config.get(config_name(option_by_key(key)))
        if recorded not in (None, ""):
            return recorded
        return self.settings.get(key) or (self.server.get("gpu") if key == "GPU" else None)

    @property
    def served_by(self) -> dict[str, Any] | None:
        """What answered this cell's requests, by the server's own report; None in results older than the record."""
        return served_by_of(self.config)

    @property
    def gpu(self) -> str:
        return str(self.value("GPU") or "?")

    @property
    def model(self) -> str:
        return _short_model(self.value("MODEL"))

    @property
    def prompts(self) -> str:
        value = str(self.value("PROMPTS") or "?")
        return Path(value).stem if "/" in value and ":" not in value else value

    @property
    def effort(self) -> str:
        return str(self.value("EFFORT") or "?")

    @property
    def users(self) -> int:
        return int(self.value("USERS") or 0)

    @property
    def rate(self) -> float:
        """RATE's arrivals per second; 0 in closed loop (and for a trace: its own times are the schedule)."""
        return float(self.value("RATE") or 0.0)

    @property
    def max_tokens(self) -> int:
        return int(self.value("MAX_TOKENS") or 0)

    @property
    def turns(self) -> str:
        return str(self.value("TURNS") or "1")

    @property
    def think_time(self) -> str:
        return str(self.value("THINK_TIME") or "0")

    @property
    def prefix_tokens(self) -> int:
        return int(self.value("PREFIX_TOKENS") or 0)

    @property
    def trace_speed(self) -> float:
        return float(self.value("TRACE_SPEED") or 1.0)

    @property
    def api(self) -> str:
        return str(self.value("API") or "chat")

    @property
    def response_format(self) -> str:
        """RESPONSE_FORMAT as the run recorded it; empty when off."""
        return str(self.value("RESPONSE_FORMAT") or "")

    def workload(self) -> tuple[tuple[str, str], ...]:
        """What the cell measured, without where it ran: equal for the same cell on two servers. A setting the run did
        not record (results older than it) counts as its default."""
        out = []
        for key in WORKLOAD_KEYS:
            option = option_by_key(key)
            value = self.model if key == "MODEL" else self.prompts if key == "PROMPTS" else self.config.get(config_name(option), option.default)
            out.append((key, json.dumps(value, sort_keys=True)))
        return tuple(out)

    @property
    def time_scale(self) -> TimeScale:
        """The run's time scale (its figures are read as predicted for the GPU a rehearsal played); 1 for a real server."""
        return time_scale_of(self.config)

    def metric(self, path: str) -> float | None:
        """A summary number by dotted path (``response_time_ms.median``); None when this run has none. A rehearsal's
        times and rates are the played GPU's (by its time scale), as its summary's ``predicted`` block has them.

        A path that names no Summary field raises ResultsError: a misspelt metric must not silently
        leave a figure empty.
        """
        value = metric_value(self.summary, path)
        return None if value is None else value * self._played(path)

    def ci95(self, path: str) -> tuple[float, float] | None:
        """The 95% interval summary.json keeps beside the number at ``path`` (``median_ci95`` beside ``median``), if
        any; a rehearsal's scaled as its number is."""
        ci = metric_ci95(self.summary, path)
        return None if ci is None else (ci[0] * self._played(path), ci[1] * self._played(path))

    def _played(self, path: str) -> float:
        field, _, statistic = path.partition(".")
        return 1.0 if statistic == "count" else self.time_scale.factor(kind_of(field))

    def output_tokens(self) -> list[int]:
        """Each successful request's output token count, read fast (only the fields needed); an effort part's own only."""
        path = self.path / SAMPLES_FILE
        if not path.exists():
            return []
        try:
            return [int(row["completion_tokens"]) for row in record_rows(path)
                    if row.get("error") is None and not row.get("warmup") and row.get("completion_tokens") is not None
                    and (not self.mix or row.get("effort") == self.effort)]
        except (ValueError, TypeError, AttributeError) as e:
            raise ResultsError(f"{path}: not a samples file ({e})") from None

    @cached_property
    def server_samples(self) -> tuple[MetricsSample, ...]:
        path = self.path / METRICS_FILE
        if not path.exists():
            return ()
        try:
            return tuple(read_samples(path))
        except (ValueError, TypeError) as e:
            raise ResultsError(f"{path}: not a server metrics file ({e})") from None


def effort_part(cell: MeasuredCell, effort: str) -> MeasuredCell:
    """One effort's part of a mixed run as a MeasuredCell of its own: its summary is that effort's ``by_effort`` entry."""
    config = {**cell.config, "effort": effort}
    part = cell.summary.by_effort[effort]
    return replace(cell, summary=replace(cell.summary, **{f.name: getattr(part, f.name) for f in fields(Measures)}, config=config),
                   mix=str(cell.config.get("effort") or cell.effort))


@dataclass(frozen=True)
class MissingCell:
    index: int | None
    key: str
    label: str
    reason: str


@dataclass(frozen=True)
class Results:
    """A loaded results folder."""

    path: Path
    kind: str  # "sweep" or "run"
    name: str
    description: str
    server: dict[str, str]
    cells: tuple[MeasuredCell, ...]
    missing: tuple[MissingCell, ...] = field(default=())
    planned: int = 0
    """How many cells scenario.json lists (the cells found, for a run folder or no scenario.json)."""


def _settings_from_config(config: dict[str, Any]) -> dict[str, str]:
    """A lone run's settings by KEY, from the config its summary recorded."""
    pairs = {key: config.get(config_name(option_by_key(key))) for key in ("GPU", "MODEL", "PROMPTS", "EFFORT", "USERS", "MAX_TOKENS")}
    pairs["MODEL"] = _short_model(pairs["MODEL"])
    return {k: str(v) for k, v in pairs.items() if v not in (None, "")}


def _load_run(path: Path) -> Results:
    """A `make load` folder; one killed before its summary is drawn from its samples (rebuilt here, not written)."""
    summary = read_summary(path) if (path / SUMMARY_FILE).exists() else rebuild_summary(path)
    settings = _settings_from_config(summary.config)
    label = " ".join(settings.get(k, "") for k in ("GPU", "MODEL", "PROMPTS", "EFFORT")) + f" u{settings.get('USERS', '?')}"
    complete = not summary.partial
    cell = MeasuredCell(path, path.name, 0, label, settings, summary, {}, complete, str(path))  # a lone run declares no server
    missing = () if complete else (MissingCell(0, path.name, label, "partial: the run died; missing " + "; ".join(summary.missing)),)
    return Results(path, "run", path.name, f"one run ({label})", {}, (cell,), missing, 1)


def _load_sweep(path: Path) -> Results:
    scenario = read_scenario(path)
    planned = scenario.cells
    cells_dir = path / "cells"
    on_disk = {d.name: d for d in cells_dir.iterdir() if d.is_dir() and ".partial-" not in d.name
               and ".repeat-" not in d.name} if cells_dir.is_dir() else {}  # REPEATS' later runs: in repeats.csv
    cells: list[MeasuredCell] = []
    missing: list[MissingCell] = []
    seen: set[str] = set()
    for entry in planned:
        seen.add(entry.key)
        cell = _load_cell(on_disk.get(entry.key), entry, str(path))
        label = entry.label or entry.key
        if isinstance(cell, MeasuredCell):
            cells.append(cell)
            if not cell.complete:
                missing.append(MissingCell(entry.index, entry.key, label, "partial: no cell.json (cut short); drawn from what it wrote"))
        else:
            missing.append(MissingCell(entry.index, entry.key, label, cell))
    for key, d in sorted(on_disk.items()):  # finished cells scenario.json does not list (an edited scenario)
        if key not in seen and (d / CELL_FILE).exists():
            cell = _load_cell(d, PlannedCell(key), str(path))
            if isinstance(cell, MeasuredCell):
                cells.append(cell)
    cells.sort(key=lambda c: (c.index if c.index is not None else 10**9, c.key))
    return Results(path, "sweep", scenario.name or path.name, scenario.description, scenario.server, tuple(cells),
                   tuple(missing), len(planned) or len(cells))


def _load_cell(d: Path | None, entry: PlannedCell, source: str) -> MeasuredCell | str:
    """A MeasuredCell (as its cell.json has it, else as scenario.json plans it), or the reason there is none."""
    if d is None:
        return "not run (no folder)"
    if not (d / SUMMARY_FILE).exists():
        return "no summary.json (cut short before it finished)" if d.exists() else "not run (no folder)"
    summary = read_summary(d)
    if (d / CELL_FILE).exists():
        marker = read_cell_marker(d)
        entry = PlannedCell(marker.key, marker.index, marker.label, marker.settings, marker.declared_server)
    return MeasuredCell(d, entry.key, entry.index, entry.label or d.name, entry.settings or _settings_from_config(summary.config),
                summary, entry.server, (d / CELL_FILE).exists(), source)


def load_results(path: str | Path) -> Results:
    """Load a results folder; ResultsError (one line) when it is none."""
    path = Path(path)
    if not path.is_dir():
        raise ResultsError(f"{path}: no such folder" if not path.exists() else f"{path}: not a folder")
    try:
        if (path / SCENARIO_FILE).exists() or (path / "cells").is_dir():
            return _load_sweep(path)
        if (path / SUMMARY_FILE).exists() or (path / SAMPLES_FILE).exists():
            return _load_run(path)
    except ResultsError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ResultsError(f"{path}: malformed results ({type(e).__name__}: {e})") from None
    raise ResultsError(f"{path}: not a results folder (no scenario.json, cells/, summary.json or samples.jsonl)")
