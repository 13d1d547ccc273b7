"""A tune's plan, checked whole before any server starts: the configurations (GRID or a scenario's server.configs), the
workload (a scenario's cells, or one load's capacity search with SLO, or that load as one cell), the objective, the
search and its rungs, the budget; and each configuration's launch: SERVE's command, or without SERVE the built-in
target playing the flags its step model has (the others said, and predicting the baseline).

    OUT/tune.json, OUT/configs.csv          the result (llmload/results/tunefile.py)
    OUT/configs/<slug>/server-<rung>/       each server's launch.json, server.log, version, startup, metrics
    OUT/configs/<slug>/rung-<rung>/         its load: a sweep's folder (cells) or a capacity search's
"""

from __future__ import annotations

import math
import shlex
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llmload.errors import ConfigError, PromptSetError
from llmload.results.cost import usd_per_gpu_hour
from llmload.settings import parse_duration_s
from llmload.sim.serverflags import MODELLED_FLAGS
from llmload.sweep.scenarios import Cell, load_scenario, make_cell

from .estimate import OBJECTIVES
from .grid import Configuration, grid_configurations, parse_grid, scenario_configurations
from .server import PORT_FIELD

__all__ = ["TunePlan", "plan_tune", "SEARCHES", "HALVING_ABOVE", "HALVING_ETA", "HALVING_RUNGS", "server_command"]

SEARCHES = ("auto", "grid", "halving")
HALVING_ABOVE = 4
"""SEARCH=auto halves above this many configurations."""
HALVING_ETA = 3
"""Each rung measures three times as long as the one before, and keeps about a third of its configurations."""
HALVING_RUNGS = 4
"""The most rungs: the first runs every configuration for 1/27 of the workload's load time (28 or more of them)."""


@dataclass(frozen=True)
class TunePlan:
    """What a tune runs, checked."""

    configurations: tuple[Configuration, ...]
    objective: str
    search: str
    """grid or halving (auto resolved)."""
    rung_factors: tuple[float, ...]
    """Each rung's share of the workload's load time (grid: 1.0 alone)."""
    cells: tuple[Cell, ...]
    """The workload's cells; none for a capacity search."""
    capacity_words: dict[str, str]
    """The capacity search's settings (the load's, SLO included); empty for cells."""
    serve: str
    """The server's command (``{port}`` where the port goes); empty: the built-in target plays each configuration."""
    budget_s: float | None
    serve_timeout_s: float
    speedup: float
    rehearsal_words: dict[str, str]
    """A rehearsal's target: GPU, MODEL, PROFILE (the built-in target's flags)."""
    gpus: int = 1
    """GPUs per server (the Pareto frontier's tokens/s per GPU)."""


def _objective(options: Any, scenario: bool) -> str:
    objective = options.objective or ("capacity" if options.slo and not scenario else "throughput")
    if objective not in OBJECTIVES:
        raise ConfigError(f"OBJECTIVE={objective} is not one of {', '.join(OBJECTIVES)}")
    if objective == "capacity" and not options.slo:
        raise ConfigError("OBJECTIVE=capacity needs SLO: the capacity is the largest load meeting it, e.g. "
                          "SLO='ttft_p90<=2s,tpot_p90<=50ms'")
    if objective == "capacity" and scenario:
        raise ConfigError("OBJECTIVE=capacity searches one load's settings; with SCENARIO give OBJECTIVE=throughput or "
                          "cost, or leave SCENARIO out")
    if objective == "cost" and usd_per_gpu_hour(options.price) is None:
        raise ConfigError("OBJECTIVE=cost needs a price: give PRICE=<USD per GPU-hour>, e.g. PRICE=2.49")
    return objective


def _serve(text: str) -> str:
    """SERVE checked: its program exists, ``{port}`` at most once."""
    if not text.strip():
        return ""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"SERVE={text!r} is not a command line ({e})") from None
    if text.count(PORT_FIELD) > 1:
        raise ConfigError(f"SERVE gives {PORT_FIELD} {text.count(PORT_FIELD)} times; give it once, where the port goes")
    if shutil.which(words[0]) is None and not Path(words[0]).is_file():
        raise ConfigError(f"SERVE={text!r}: {words[0]} is not found (not on PATH, not a file); give the server's command, "
                          "e.g. SERVE='vllm serve openai/gpt-oss-20b'")
    return text


def plan_tune(options: Any, words: dict[str, str]) -> TunePlan:
    """The tune ``options`` ask for (``words``: the KEY=VALUE load settings given); ConfigError for bad input."""
    scenario = load_scenario(Path(options.scenario)) if options.scenario else None
    objective = _objective(options, scenario is not None)
    configs_raw = scenario.configs if scenario is not None else None
    if options.grid and configs_raw is not None:
        raise ConfigError("GRID and the scenario's server.configs both name configurations; give one")
    if options.grid:
        configurations = grid_configurations(parse_grid(options.grid))
    elif configs_raw is not None:
        configurations = scenario_configurations(configs_raw)
    else:
        raise ConfigError("GRID is missing: give what varies, e.g. GRID='max-num-batched-tokens=2048,4096 "
                          "async-scheduling=off,on', or a SCENARIO whose server.configs lists the configurations")
    search = options.search if options.search != "auto" else ("halving" if len(configurations) > HALVING_ABOVE else "grid")
    # halving: rungs enough that the first keeps ~HALVING_ETA ** (rungs - 1) configurations down to two or three at the
    # last (5-9: 2 rungs, 10-27: 3, then 4)
    rungs = 1 if search == "grid" else min(HALVING_RUNGS, max(2, math.ceil(math.log(len(configurations), HALVING_ETA) - 1e-9)))
    budget_s = None
    if options.budget:
        try:
            budget_s = parse_duration_s(options.budget) if options.budget[-1] in "hms" else float(options.budget) * 60
        except (ConfigError, ValueError):
            budget_s = math.nan
        if not (math.isfinite(budget_s) and budget_s > 0):
            raise ConfigError(f"BUDGET={options.budget!r} is not a positive duration of load; give minutes (BUDGET=30) or "
                              "a span (BUDGET=1h30m)")
    serve = _serve(options.serve)
    load = dict(words)
    if scenario is not None:
        cells = scenario.cells
        capacity_words: dict[str, str] = {}
    elif objective == "capacity" or (objective == "cost" and options.slo):
        cells, capacity_words = (), {**load, "SLO": options.slo}
    else:
        cells, capacity_words = (make_cell(0, load, "load", {}),), {}
    for spec in sorted({c.settings.get("PROMPTS", "builtin") for c in cells} | {capacity_words.get("PROMPTS", "builtin")}):
        _check_prompts(spec)  # a missing data set stops the tune before any server starts
    rehearsal_words = {k: words[k] for k in ("GPU", "MODEL", "PROFILE") if k in words}
    return TunePlan(tuple(configurations), objective, search,
                    tuple(float(HALVING_ETA) ** (r - rungs + 1) for r in range(rungs)), tuple(cells), capacity_words, serve, budget_s,
                    options.serve_timeout, float(options.speedup), rehearsal_words, int(options.gpus))


def _check_prompts(spec: str) -> None:
    """ConfigError when a cell's PROMPTS cannot be read (a ShareGPT file not downloaded, a set not generated)."""
    from llmload.promptsets.catalog import GENERATED, load_prompt_set

    if spec in GENERATED:
        return  # make tune writes a missing generated set first, as make load does
    try:
        load_prompt_set(spec, 0)
    except PromptSetError as e:
        raise ConfigError(str(e)) from None


def server_command(plan: TunePlan, config: Configuration) -> tuple[str, list[str], dict[str, str]]:
    """(the command, the flags or variables the built-in target does not play, notes on what the client will see)
    of one configuration: SERVE (or its own command) and its args; without SERVE the built-in target with the flags it
    plays."""
    notes = _client_notes(config.args)
    base = config.command or plan.serve
    if base:
        return " ".join([base, *(shlex.quote(a) for a in config.args)]), [], notes
    played, not_modelled = _played_flags(config.args)
    not_modelled += [f"env:{name}" for name in config.env]
    target = [sys.executable, "-m", "llmload.sim", "--speedup", f"{plan.speedup:g}"]
    for key, flag in (("GPU", "--gpu"), ("MODEL", "--model"), ("PROFILE", "--target-profile")):
        if key in plan.rehearsal_words:
            target += [flag, plan.rehearsal_words[key]]
    return " ".join(shlex.quote(w) for w in [*target, *played]), not_modelled, notes


def _played_flags(args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The args split into flags the built-in target plays (with their values) and the rest (said not modelled)."""
    played: list[str] = []
    not_modelled: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        name = word.removeprefix("--")
        takes_value = i + 1 < len(args) and not args[i + 1].startswith("--")
        value = args[i + 1] if takes_value else None
        if word.startswith("--") and name in MODELLED_FLAGS and value is not None:
            played += [word, value]
        else:
            not_modelled.append(word if value is None else f"{word} {value}")
        i += 2 if takes_value else 1
    return played, not_modelled


def _client_notes(args: tuple[str, ...]) -> list[str]:
    """Flags that change what the client sees, said beside the results."""
    notes = []
    for flag, value in zip(args, [*args[1:], ""]):
        if flag == "--stream-interval" and value.isdigit() and int(value) > 1:
            notes.append(f"--stream-interval {value}: {value} tokens per event after the first, so each inter-token gap "
                         f"spans {value} tokens (ITL); TTFT and TPOT are unchanged")
    return notes


def scaled_cell(cell: Cell, factor: float) -> Cell:
    """A cell's settings for a rung: its DURATION (or REQUESTS, at least its USERS) times ``factor``."""
    if factor == 1.0:
        return cell
    settings = dict(cell.settings)
    if "REQUESTS" in settings:
        users = int(settings.get("USERS", "1"))
        settings["REQUESTS"] = str(max(users, round(int(settings["REQUESTS"]) * factor)))
    else:
        seconds = parse_duration_s(settings.get("DURATION", "120s")) * factor
        settings["DURATION"] = f"{seconds:g}s"
    return replace(make_cell(cell.index, settings, cell.label, cell.server, cell.repeats), label=cell.label)
