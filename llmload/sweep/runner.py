"""`make sweep`: every cell of a scenario, headless, one after another; resumable; one results table.

    OUT/scenario.json          the scenario as run (its server block: what the study declares it ran on)
    OUT/cells.csv              one row per finished run of a cell: its settings, summary, server metrics
    OUT/repeats.csv            with REPEATS: one row per cell, each headline metric's spread between its runs
    OUT/cells/<key>/           a finished cell: what `load` writes, load.log, server_metrics.jsonl, cell.json
    OUT/cells/<key>.repeat-N/  with REPEATS: the cell's run N (N >= 2), kept like the first
    OUT/cells/<key>.partial-N/ a cell cut short (crash, kill, spot stop), kept as it was

A cell's key is a hash of its settings, so rerunning the same command skips finished cells and
runs again the one that was cut short. Nothing finished is rewritten; cells.csv is derived from
the cells' own files each time a cell finishes. Ctrl-C (or SIGTERM) reaches the cell in flight as
it reaches `make load` (the first lets its streams finish, a second cuts them); the cell stays
unfinished, the sweep stops with one line and exit code 130 (143).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Mapping

import orjson

from llmload import options as opts
from llmload.errors import Interrupted
from llmload.system.files import write_atomic, write_csv_atomic
from llmload.loadtest.preflight import probe_server, served_by
from llmload.loadtest.target import target
from llmload.system.processes import SignalForwarder, stoppable_child
from llmload.results.server_metrics import read_samples, summarize_samples
from llmload.results.storage import CELL_FILE, METRICS_FILE, SCENARIO_FILE, SUMMARY_FILE, read_summary
from llmload.results.sweepfiles import CELL_SCHEMA_VERSION, read_cell_marker
from llmload.settings import parse_settings
from llmload.sweep.repeats import format_spread, spread_rows
from llmload.sweep.fresh import PROMPT_START, next_prompt_start
from llmload.sweep.sampler import MetricsSampler
from llmload.sweep.scenarios import Cell, Scenario, cell_options
from llmload.timescale import TimeScale, resolve_time_scale

__all__ = ["run_sweep", "run_cell", "run_dir", "set_aside", "cell_row", "write_cells_csv"]

_SUMMARY_SKIP = ("config", "errors", "finish_reasons", "token_sources", "schema_version")


def _flatten(prefix: str, value: Any, row: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}_{key}" if prefix else key, inner, row)
    elif prefix.endswith("_ci95"):  # [lo, hi] or None: two columns in every row either way
        row[f"{prefix}_lo"], row[f"{prefix}_hi"] = value or (None, None)
    elif isinstance(value, (list, tuple)) and value and all(isinstance(item, dict) and "slo" in item for item in value):
        for item in value:  # SLO verdicts: columns named by the SLO, e.g. slo_ttft_p90<=2s_passed
            _flatten(f"{prefix}_{item['slo']}", {k: v for k, v in item.items() if k != "slo"}, row)
    else:
        row[prefix] = list(value) if isinstance(value, tuple) else value  # as the file has it: a JSON list


def cell_row(cell_dir: Path) -> dict[str, Any]:
    """One cells.csv row from a finished cell's files: settings, summary, server metrics."""
    cell = read_cell_marker(cell_dir)
    summary = read_summary(cell_dir)
    row: dict[str, Any] = {"cell": cell.index, "key": cell.key, "label": cell.label, "repeat": cell.repeat}
    row.update(cell.settings)
    for key in ("API", "RESPONSE_FORMAT"):  # what each request spoke and asked, set by the scenario or not
        row.setdefault(key, summary.config.get(key.lower()) or opts.option_by_key(key).default)
    _flatten("served_by", summary.config.get("served_by") or {}, row)  # what answered, by its own report
    _flatten("declared", cell.declared_server, row)  # what the scenario says the study ran on
    _flatten("", {k: v for k, v in summary.to_dict().items() if k not in _SUMMARY_SKIP}, row)
    _flatten("server", asdict(cell.server_metrics) if cell.server_metrics else None, row)
    return row


def write_cells_csv(out: Path) -> Path:
    """Rewrite OUT/cells.csv from every finished run, and OUT/repeats.csv when a cell ran more than once (derived data)."""
    rows = _finished_rows(out)
    if any(r["repeat"] > 1 for r in rows):
        write_csv_atomic(out / "repeats.csv", spread_rows(rows))
    return write_csv_atomic(out / "cells.csv", rows)


def _finished_rows(out: Path) -> list[dict[str, Any]]:
    """cell_row of every finished run in OUT/cells, by cell and run."""
    return sorted((cell_row(d) for d in (out / "cells").iterdir() if (d / CELL_FILE).exists()), key=lambda r: (r["cell"], r["repeat"]))


def run_dir(out: Path, cell: Cell, repeat: int) -> Path:
    """Where run ``repeat`` (from 1) of a cell goes: OUT/cells/<key>/, then OUT/cells/<key>.repeat-<repeat>/."""
    return out / "cells" / (cell.key if repeat == 1 else f"{cell.key}.repeat-{repeat}")


def set_aside(cell_dir: Path) -> Path | None:
    """Move a cut-short cell out of the way (kept, never deleted); None if there is none."""
    if not cell_dir.exists():
        return None
    n = 1
    while (aside := cell_dir.with_name(f"{cell_dir.name}.partial-{n}")).exists():
        n += 1
    cell_dir.rename(aside)
    return aside


def _format_s(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m" if hours else f"{m}m{s:02d}s"


CELL_OVERHEAD_S = 5.0
"""What a cell takes beyond its DURATION (target and Locust start, drain, files) until one has been timed."""


def _cell_expected_s(cell: Cell, scale: TimeScale, done_wall_s: list[float], overhead_s: list[float]) -> float:
    """How long a cell should take: its DURATION on the target's clock plus the overhead cells took so far, or for a
    request count the mean of finished cells."""
    if cell.duration_s is None:
        return sum(done_wall_s) / len(done_wall_s) if done_wall_s else 60.0
    return scale.target_s(cell.duration_s) + (sum(overhead_s) / len(overhead_s) if overhead_s else CELL_OVERHEAD_S)


def run_cell(cell: Cell, cell_dir: Path, host: str, scale: TimeScale, metrics_interval_s: float, api_key: str,
              tick: Callable[[float], None], signals: SignalForwarder, repeat: int = 1,
              exported: Mapping[str, str] | None = None) -> bool:
    """Run one cell (its run ``repeat``) into ``cell_dir``; True when it finished and was marked complete.

    ``scale``: the time scale the target runs on (the cell's load takes it); ``exported``: METRICS_HOST and
    METRICS_PORT for the cell's load process (runner settings, not the cell's).
    """
    # fresh prompts: past every run under the study's folder (OUT/cells/<key>: OUT)
    exported = exported or {}
    first = int(exported.get(PROMPT_START, 0))  # the study's own start (PROMPT_START given to it)
    settings = {**cell.settings, **exported, "HOST": host, "OUT": str(cell_dir), **scale.as_setting(),
                PROMPT_START: str(next_prompt_start(cell_dir.parent.parent, first))}
    cell_dir.mkdir(parents=True)
    sampler = MetricsSampler(host, cell_dir / METRICS_FILE, metrics_interval_s, api_key)
    sampler.start()
    try:
        with (cell_dir / "load.log").open("wb") as log:
            started_s = time.monotonic()
            # Its own session: a Ctrl-C reaches it once, through `signals`, as it reaches `make load`.
            load = subprocess.Popen([sys.executable, "-m", "llmload", "load", *(f"{k}={v}" for k, v in settings.items())],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=stoppable_child, env={**os.environ, "API_KEY": api_key})  # the key never goes on a command line
            code = signals.wait(load, lambda: tick(time.monotonic() - started_s))
    finally:
        sampler.stop()
    if code != 0 or signals.first or not (cell_dir / SUMMARY_FILE).exists():
        return False
    marker = {"schema_version": CELL_SCHEMA_VERSION, "index": cell.index, "key": cell.key, "label": cell.label,
              "repeat": repeat, "settings": cell.settings, "declared_server": cell.server, "finished_unix_s": time.time(),
              "server_metrics": asdict(summarize_samples(read_samples(cell_dir / METRICS_FILE))),
              "server_metrics_failures": sampler.failures, "server_metrics_error": sampler.first_error}
    write_atomic(cell_dir / CELL_FILE, orjson.dumps(marker, option=orjson.OPT_INDENT_2))
    return True


def _bar(fraction: float, width: int = 24) -> str:
    filled = int(min(1.0, fraction) * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _terminal_line(text: str) -> None:
    """Redraw one status line on a terminal; nothing when output goes to a file or a pipe."""
    if sys.stdout.isatty():
        sys.stdout.write(f"\r\x1b[2K{text}")
        sys.stdout.flush()


def run_sweep(scenario: Scenario, out: Path, host: str = "", speedup: float = 1.0, metrics_interval_s: float = 1.0,
              api_key: str = "", progress: Callable[[str], None] = print, live: Callable[[str], None] = _terminal_line,
              repeats: int = 0, exported: Mapping[str, str] | None = None) -> int:
    """Run every unfinished run of every cell; 0 when all are finished, 1 when some failed (they stay to rerun).

    ``repeats``: runs of each cell, in place of each cell's REPEATS (0: the cells' own). ``exported``: see run_cell.

    Interrupted (one line for the CLI) when SIGINT or SIGTERM stops it; the cell in flight stays unfinished.
    """
    # A HOST that does not answer, or runs on another time scale, stops the sweep before OUT is made; without one,
    # each cell's own target runs on the sweep's.
    scale = resolve_time_scale(speedup, served_by(probe_server(host, api_key), "")) if host else TimeScale(speedup)
    with SignalForwarder("stopped between cells; finished cells are kept: rerun the same command to resume") as signals:
        return _run_cells(scenario, out, host, speedup, scale, metrics_interval_s, api_key, progress, live, signals, repeats,
                          exported)


def _run_cells(scenario: Scenario, out: Path, host: str, speedup: float, scale: TimeScale, metrics_interval_s: float, api_key: str,
               progress: Callable[[str], None], live: Callable[[str], None], signals: SignalForwarder, repeats: int,
               exported: Mapping[str, str] | None) -> int:
    (out / "cells").mkdir(parents=True, exist_ok=True)
    cells = list(scenario.cells)
    _write_missing_prompt_sets(cells, progress)
    runs = [(c, r, repeats or c.repeats) for c in cells for r in range(1, (repeats or c.repeats) + 1)]
    todo = [run for run in runs if not (run_dir(out, run[0], run[1]) / CELL_FILE).exists()]
    unit = "cells" if len(runs) == len(cells) else f"runs ({len(cells)} cell{'s' if len(cells) > 1 else ''} x REPEATS)"
    progress(f"{scenario.name}: {len(runs)} {unit}, {len(runs) - len(todo)} already finished, {len(todo)} to run -> {out}")
    failed: list[Cell] = []
    done_wall_s: list[float] = []
    overhead_s: list[float] = []
    for number, (cell, repeat, of) in enumerate(todo, 1):
        cell_dir = run_dir(out, cell, repeat)
        aside = set_aside(cell_dir)
        if aside is not None:
            progress(f"  kept the cut-short run of cell {cell.index} as {aside.name}")
        left_s = sum(_cell_expected_s(c, scale, done_wall_s, overhead_s) for c, _, _ in todo[number - 1:])
        which = f" run {repeat}/{of}" if of > 1 else ""
        progress(f"[{number}/{len(todo)}] cell {cell.index}{which} {cell.label}: {' '.join(f'{k}={v}' for k, v in cell.settings.items())}"
                 f"  (sweep time left ~{_format_s(left_s)})")
        started_s = time.monotonic()
        with target(cell_options(cell.settings, host, speedup)) as url:
            # the target answers, takes the key, and says its time scale before the cell starts
            scale = resolve_time_scale(speedup, served_by(probe_server(url, api_key), ""))
            _write_scenario(out, scenario)
            cell_s = _cell_expected_s(cell, scale, done_wall_s, overhead_s)
            ok = run_cell(cell, cell_dir, url, scale, metrics_interval_s, api_key,
                           lambda elapsed_s: live(f"    {_bar(elapsed_s / cell_s)} {_format_s(elapsed_s)} of ~{_format_s(cell_s)}, "
                                                  f"sweep time left ~{_format_s(max(0.0, left_s - elapsed_s))}"), signals, repeat,
                          exported)
            live("")
        if signals.first:
            raise Interrupted(signals.first, f"cell {cell.index}{which} ({cell.label}) stopped early and is kept unfinished in {cell_dir}; "
                                             f"rerun the same command to resume: it runs that cell again")
        done_wall_s.append(time.monotonic() - started_s)
        if cell.duration_s is not None:
            overhead_s.append(max(0.0, done_wall_s[-1] - scale.target_s(cell.duration_s)))
        if ok:
            write_cells_csv(out)
            summary = read_summary(cell_dir)
            progress(f"    done in {_format_s(done_wall_s[-1])}: {summary.requests_ok} ok, {summary.rps:.2f} req/s, "
                     f"median {summary.response_time_ms.median or 0:.0f} ms")
        else:
            failed.append(cell)
            progress(f"    FAILED (see {cell_dir / 'load.log'}); it will run again on the next sweep")
    progress(f"{len(runs) - len(failed)} of {len(runs)} {unit.split()[0]} finished; table: {out / 'cells.csv'}")
    if len(runs) != len(cells) and (out / "repeats.csv").exists():
        progress(f"spread between runs ({out / 'repeats.csv'}):")
        for row in spread_rows(_finished_rows(out)):
            if row["runs"] > 1:
                progress("  " + format_spread(row))
    return 1 if failed else 0


def _write_missing_prompt_sets(cells: list[Cell], progress: Callable[[str], None]) -> None:
    """Generate the 2k/4k/8k sets the cells need and prompts/ lacks, as `make load` would."""
    from llmload.promptsets.catalog import GENERATED, GENERATED_DIR
    from llmload.promptsets.write import write_prompt_sets

    missing = sorted({c.settings.get("PROMPTS", "") for c in cells} & set(GENERATED))
    missing = [size for size in missing if not (GENERATED_DIR / f"{size}.jsonl").exists()]
    if missing:
        progress(f"writing the prompt sets the cells need: {', '.join(missing)} ({GENERATED_DIR}/)")
        defaults = parse_settings([], opts.PROMPT_OPTIONS)
        write_prompt_sets(missing, defaults.count, defaults.seed, Path(defaults.templates), GENERATED_DIR)


def _write_scenario(out: Path, scenario: Scenario) -> None:
    data = {"name": scenario.name, "description": scenario.description, "path": str(scenario.path),
            "server": scenario.server, "cells": [asdict(c) for c in scenario.cells]}
    write_atomic(out / SCENARIO_FILE, orjson.dumps(data, option=orjson.OPT_INDENT_2))
