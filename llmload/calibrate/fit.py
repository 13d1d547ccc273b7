"""Fit the step-time model and the API server's costs to measured cells; predict a cell from a profile.

Each parameter is fitted in log space, pulled toward its prior from the hardware figures (hardware.py) with the
prior's width below: a few cells cannot pin eight parameters alone, and a parameter the cells say nothing about
keeps its physical value. Each measured figure counts as a log error with MEASURED_SIGMA (runs of one load agreed
within a few percent). A cell's requests prefill only what its hit rate leaves uncached of their prompts.
Levenberg-Marquardt on forward differences: every evaluation replays every cell (replay.py), which is
deterministic. Pure: numpy, no files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from llmload.sim.replay import replay_closed_loop
from llmload.sim.stepmodel import EngineLimits, Frontend, StepTimes

from .cells import Cell

__all__ = ["Model", "PARAMETERS", "MEASURED_SIGMA", "predict", "fit", "held_out_predictions", "relative_error"]

PARAMETERS = (  # (block, name, the prior's width as a factor)
    ("step", "overhead_s", 2.0),
    ("step", "expert_weights_s", 2.0),
    ("step", "expert_saturation_tokens", 10.0),  # dummy weights route unlike trained ones: let the cells say
    ("step", "token_s", 2.0),
    ("step", "context_token_s", 2.0),
    ("step", "attention_pair_s", 3.0),
    ("frontend", "latency_s", 4.0),  # the API server's costs depend on the host's CPU, not on published figures
    ("frontend", "request_s", 4.0),
    ("frontend", "output_token_s", 4.0),
    ("frontend", "prompt_token_s", 4.0),
)
MEASURED_SIGMA = 0.05
"""A measured figure's log error counts in units of 5%."""
_STEP_LOG = 0.02  # forward difference in log space


@dataclass(frozen=True)
class Model:
    """What a replay needs: the server's limits, the step-time model, the API server."""

    limits: EngineLimits
    step: StepTimes
    frontend: Frontend

    def vector(self, parameters: Sequence[tuple[str, str, float]] = PARAMETERS) -> np.ndarray:
        return np.log([getattr(getattr(self, block), name) for block, name, _ in parameters])

    def with_vector(self, values: np.ndarray, parameters: Sequence[tuple[str, str, float]] = PARAMETERS) -> "Model":
        changes: dict[str, dict[str, float]] = {"step": {}, "frontend": {}}
        for (block, name, _), value in zip(parameters, values):
            changes[block][name] = float(math.exp(value))
        return replace(self, step=replace(self.step, **changes["step"]), frontend=replace(self.frontend, **changes["frontend"]))


def predict(model: Model, cell: Cell) -> dict[str, float]:
    """What ``cell``'s load would measure on ``model``: every metric cells.METRICS names, each request prefilling only
    what its cell's hit rate leaves uncached."""
    limits = replace(model.limits, **cell.engine) if cell.engine else model.limits
    runs = replay_closed_loop(limits, model.step, model.frontend, cell.users, cell.prompt_tokens, cell.output_tokens,
                              cell.cached_tokens(limits.block_size))
    span_s = max(r.last_delivered_s for r in runs) - min(r.sent_s for r in runs)
    tpots = [r.tpot_s for r in runs if r.tpot_s is not None]
    gaps = sum(r.output_tokens - 1 for r in runs)
    return {
        "rps": len(runs) / span_s,
        "ttft_median_ms": float(np.median([r.ttft_s for r in runs])) * 1e3,
        "tpot_median_ms": float(np.median(tpots)) * 1e3 if tpots else math.nan,
        "e2e_median_ms": float(np.median([r.e2e_s for r in runs])) * 1e3,
        "server_ttft_mean_ms": float(np.mean([r.server_ttft_s for r in runs])) * 1e3,
        "server_itl_mean_ms": sum(r.last_engine_s - r.first_engine_s for r in runs) / gaps * 1e3 if gaps else math.nan,
        "server_e2e_mean_ms": float(np.mean([r.server_e2e_s for r in runs])) * 1e3,
    }


def relative_error(predicted: float, observed: float) -> float:
    """(predicted - observed) / observed."""
    return (predicted - observed) / observed


def _residuals(model: Model, prior: np.ndarray, widths: np.ndarray, cells: Sequence[Cell],
               parameters: Sequence[tuple[str, str, float]]) -> np.ndarray:
    errors = []
    for cell in cells:
        predicted = predict(model, cell)
        errors += [math.log(max(predicted[m], 1e-12) / value) / MEASURED_SIGMA for m, value in cell.observed.items()]
    return np.concatenate([np.asarray(errors), (model.vector(parameters) - prior) / widths])


def fit(start: Model, cells: Sequence[Cell], iterations: int = 40) -> Model:
    """The model nearest ``start`` (the prior) that best reproduces the fitted cells' measurements.

    Cells whose requests all have one prompt length cannot tell the API server's work per prompt token from its work
    per request: there the request's work is all ``request_s`` (``prompt_token_s`` 0), as before the model had it."""
    fitted = [c for c in cells if c.fitted]
    if not fitted:
        return start
    parameters = PARAMETERS
    if len({p for c in fitted for p in c.prompt_tokens}) < 2:
        parameters = tuple(p for p in PARAMETERS if p[1] != "prompt_token_s")
        start = replace(start, frontend=replace(start.frontend, prompt_token_s=0.0))
    prior = start.vector(parameters)
    widths = np.log([w for _, _, w in parameters])
    theta = prior.copy()
    r = _residuals(start, prior, widths, fitted, parameters)
    cost, damping = float(r @ r), 1e-2
    for _ in range(iterations):
        jacobian = np.empty((r.size, theta.size))
        for i in range(theta.size):
            moved = theta.copy()
            moved[i] += _STEP_LOG
            jacobian[:, i] = (_residuals(start.with_vector(moved, parameters), prior, widths, fitted, parameters) - r) / _STEP_LOG
        normal, gradient = jacobian.T @ jacobian, jacobian.T @ r
        improved = False
        while damping < 1e6:
            step = np.linalg.solve(normal + damping * np.diag(np.diag(normal) + 1e-9), -gradient)
            trial = theta + np.clip(step, -1.0, 1.0)
            r_trial = _residuals(start.with_vector(trial, parameters), prior, widths, fitted, parameters)
            if float(r_trial @ r_trial) < cost:
                theta, r, cost, damping, improved = trial, r_trial, float(r_trial @ r_trial), max(damping / 3, 1e-6), True
                break
            damping *= 4
        if not improved or float(np.max(np.abs(step))) < 1e-3:
            break
    return start.with_vector(theta, parameters)


def held_out_predictions(start: Model, cells: Sequence[Cell], iterations: int = 40) -> dict[str, dict[str, float]]:
    """Each fitted cell predicted by a fit to the other operating points (its own load and limits held out)."""
    out: dict[str, dict[str, float]] = {}
    groups = sorted({c.group for c in cells if c.fitted})
    if len(groups) < 2:
        return out
    for group in groups:
        rest = [c for c in cells if c.group != group]
        model = fit(start, rest, iterations)
        for cell in cells:
            if cell.group == group and cell.fitted:
                out[cell.name] = predict(model, cell)
    return out
