"""``python -m llmload calibrate RESULTS="dir ..." PROFILE=name|path [OUT=file]``: fit a profile to a real server's results.

PROFILE names the profile refitted: its GPU, model, weights and server limits say what the results were measured
on; its timings are not used (the fit starts from the hardware prior, so calibrating twice gives the same file).
Prints each cell's prefix-cache hit rate as assumed and where it came from, then its measured figures beside the
fit's and beside a prediction by a fit that held the cell's operating point out; writes the fitted profile (kind
``measured``) to OUT. A cell whose hit rate cannot be accounted for is refused in one line and the rest are fitted.
"""

from __future__ import annotations

import math
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

import orjson

from llmload.errors import ConfigError
from llmload.system.files import write_atomic
from llmload.sim.hardware import GPU_FIGURES, MODEL_FIGURES
from llmload.sim.profiles import Profile, load_profile, profile_to_dict

from .cells import Cell, read_cells
from .fit import Model, fit, held_out_predictions, predict, relative_error
from .hardware import PRIOR_FRONTEND, prior_step
from .hitrate import Refused

__all__ = ["run_calibrate", "calibrated_profile", "cell_table", "error_table", "refusal_lines"]


def _start(base: Profile) -> Model:
    if base.gpu not in GPU_FIGURES or base.model not in MODEL_FIGURES:
        raise ConfigError(f"PROFILE={base.name}: no published figures for GPU {base.gpu!r} x {base.model!r} to start the fit "
                          f"from; GPUs: {', '.join(GPU_FIGURES)}; models: {', '.join(MODEL_FIGURES)}")
    return Model(base.engine, prior_step(base.gpu, base.model, base.weights), PRIOR_FRONTEND)


def calibrated_profile(base: Profile, cells: Sequence[Cell], command: str,
                       refused: Sequence[Refused] = ()) -> tuple[Profile, list[dict[str, Any]]]:
    """The profile fitted to ``cells``, and per cell its hit rate, what it measured, the fit's figures and the
    held-out prediction."""
    start = _start(base)
    model = fit(start, cells)
    held = held_out_predictions(start, cells)
    block_size = base.engine.block_size
    rows = [{"name": c.name, "source": c.source, "users": c.users, "fitted": c.fitted, "note": c.note,
             "engine": c.engine, "hit_rate": c.hit_rate, "hit_rate_source": c.hit_rate_source,
             "cached_tokens_mean": round(sum(c.cached_tokens(block_size)) / len(c.prompt_tokens), 1),
             "prompt_tokens_mean": round(sum(c.prompt_tokens) / len(c.prompt_tokens), 1), "observed": c.observed,
             "predicted": {k: v for k, v in predict(model, c).items() if k in c.observed},
             "held_out": {k: v for k, v in held.get(c.name, {}).items() if k in c.observed}} for c in cells]
    prior = start.step
    sources = sorted({c.source.split(": ")[0] for c in cells})
    server = base.fit.get("server") or base.source
    left_out = f"; {len(refused)} refused (no hit rate)" if refused else ""
    profile = Profile(
        name=base.name, gpu=base.gpu, model=base.model, weights=base.weights, kind="measured",
        source=f"MEASURED: fitted by `{command}` to {sum(c.fitted for c in cells)} of {len(cells)} cells from "
               f"{', '.join(sources)}{left_out}. Server: {server}",
        engine=model.limits, step=model.step, frontend=model.frontend,
        fit={"server": server, "command": command, "cells": rows,
             **({"refused": [{"cell": r.cell, "reason": r.reason} for r in refused]} if refused else {}),
             "fitted_over_prior": {k: round(getattr(model.step, k) / getattr(prior, k), 4)
                                   for k in ("overhead_s", "expert_weights_s", "expert_saturation_tokens", "token_s",
                                             "context_token_s", "attention_pair_s")}})
    return profile, rows


def _pct(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value * 100:+.1f}%"


def _num(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.4g}"


def refusal_lines(refused: Sequence[Refused]) -> list[str]:
    """One line per refused cell: what it is and why its hit rate cannot be accounted for."""
    return [f"refused: {r.cell}: {r.reason}" for r in refused]


def cell_table(rows: Sequence[dict[str, Any]], block_size: int) -> list[str]:
    """Each cell's prefix-cache hit rate as assumed, its mean cached and prompt tokens, and where the rate comes from
    (a note per source, numbered, under the table)."""
    sources = list(dict.fromkeys(row["hit_rate_source"] for row in rows))
    lines = [f"Prefix cache: each request's cached tokens are its cell's hit rate of its prompt, down to whole blocks "
             f"of {block_size}; it prefills the rest",
             f"{'cell':<34} {'hit rate':>8} {'cached of prompt':>18}  from"]
    for row in rows:
        tokens = f"{row['cached_tokens_mean']:.0f} of {row['prompt_tokens_mean']:.0f}"
        note = sources.index(row["hit_rate_source"]) + 1
        lines.append(f"{row['name'][:34]:<34} {row['hit_rate'] * 100:>7.2f}% {tokens:>18}  [{note}]")
    return lines + [f"[{n}] {source}" for n, source in enumerate(sources, 1)]


def error_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Each cell's figures: measured, fitted (error), held out (error); the worst errors last."""
    lines = [f"{'cell':<34} {'metric':<20} {'measured':>10} {'fitted':>10} {'error':>8} {'held out':>10} {'error':>8}"]
    worst: dict[str, list[float]] = {"fitted": [], "held out": [], "predicted only": []}
    for row in rows:
        label = row["name"] + ("" if row["fitted"] else " (not fitted)")
        for metric, observed in row["observed"].items():
            fitted, held = row["predicted"].get(metric), row["held_out"].get(metric)
            e_fit = relative_error(fitted, observed) if fitted is not None else None
            e_held = relative_error(held, observed) if held is not None else None
            lines.append(f"{label[:34]:<34} {metric:<20} {_num(observed):>10} {_num(fitted):>10} {_pct(e_fit):>8} "
                         f"{_num(held):>10} {_pct(e_held):>8}")
            if e_fit is not None and math.isfinite(e_fit):
                worst["fitted" if row["fitted"] else "predicted only"].append(abs(e_fit))
            if e_held is not None and math.isfinite(e_held):
                worst["held out"].append(abs(e_held))
    for kind, errors in worst.items():
        if errors:
            lines.append(f"{kind}: {len(errors)} figures, median |error| {sorted(errors)[len(errors) // 2] * 100:.1f}%, "
                         f"worst {max(errors) * 100:.1f}%, within 15%: {sum(e <= 0.15 for e in errors)}")
    return lines


def run_calibrate(options: Any, argv: Sequence[str] = ()) -> int:
    """The command: read, fit, print, write; ConfigError (one line, exit 2) on bad input."""
    if not options.target_profile:
        raise ConfigError("PROFILE is missing: name the profile the results were measured on (its GPU, model, weights "
                          "and server limits), e.g. PROFILE=h200-gpt-oss-20b-bf16, or a profile file")
    if not options.results.strip():
        raise ConfigError('RESULTS is missing: give results folders of runs against a real server, e.g. '
                          'RESULTS="results/run1 results/sweep"')
    base = load_profile(options.target_profile)
    cells, refused = read_cells(options.results.split())
    out = Path(options.out) if options.out else Path("profiles") / f"{base.name}.json"
    if out.exists() and out.is_dir():
        raise ConfigError(f"OUT={out} is a folder; give the profile file to write, e.g. OUT=profiles/{base.name}.json")
    for line in refusal_lines(refused):
        print(line)
    if not cells:
        sys.stdout.flush()
        raise ConfigError(f"RESULTS: every cell was refused ({len(refused)}, each above with its reason): give results "
                          "whose prefix-cache hit rate is known (the server's counters, a cache.json beside vLLM bench "
                          "files, a table's hit_rate)")
    command = "python -m llmload calibrate " + " ".join(shlex.quote(a) for a in argv)
    profile, rows = calibrated_profile(base, cells, command, refused)
    refusals = f", {len(refused)} refused" if refused else ""
    print(f"Calibrating {base.name} ({base.gpu}, {base.model}, {base.weights}) on {len(cells)} cells{refusals}; "
          "held out: each operating point predicted by a fit to the others")
    print("\n".join(cell_table(rows, base.engine.block_size)))
    print("\n".join(error_table(rows)))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, orjson.dumps(profile_to_dict(profile), option=orjson.OPT_INDENT_2) + b"\n")
    print(f"Profile: {out} (make serve-sim PROFILE={out}, make load PROFILE={out})")
    sys.stdout.flush()
    return 0
