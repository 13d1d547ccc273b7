"""The built-in target's profiles (one GPU x model x weights each, in JSON files), and its output-length model.

A profile holds the step-time model's parameters (stepmodel.py), the API server's costs and the server's limits,
with where they came from: ``measured`` (fitted by ``llmload calibrate`` to a real server's results) or
``extrapolated`` (scaled from a measured one by published hardware figures). The shipped ones are in
llmload/data/profiles/; PROFILE takes one's name or any file's path. A GPU label alone (GPU=h100) plays the
label's MXFP4 profile for the model (the released gpt-oss weights).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llmload.errors import ProfileError
from llmload.results.efforts import REASONING_EFFORTS as EFFORTS
from llmload.results.provenance import bare_model_name

from .hardware import GPU_FIGURES, MODEL_FIGURES, WEIGHT_BYTES
from .stepmodel import EngineLimits, Frontend, StepTimes

__all__ = ["Profile", "PROFILE_SCHEMA_VERSION", "PROFILES_DIR", "GPUS", "MODELS", "KINDS", "DEFAULT_MODEL",
           "MODEL_PREFIX", "lookup_profile", "choose_profile", "load_profile", "profile_from_dict", "profile_to_dict", "shipped_profiles",
           "normalize_effort", "sample_lengths", "validation_of", "HELD_OUT_METHOD"]

PROFILE_SCHEMA_VERSION = 1
PROFILES_DIR = Path(__file__).resolve().parents[1] / "data" / "profiles"
MODEL_PREFIX = "openai/"
GPUS = tuple(GPU_FIGURES)
MODELS = tuple(MODEL_FIGURES)
KINDS = ("measured", "extrapolated")
WEIGHTS = tuple(WEIGHT_BYTES)
DEFAULT_MODEL = MODELS[0]
"""What the built-in target serves when MODEL is empty."""


@dataclass(frozen=True)
class Profile:
    """Timing and capacity of one GPU x model x weights, and their source."""

    name: str
    gpu: str
    model: str
    """Bare: gpt-oss-20b."""
    weights: str
    kind: str
    source: str
    engine: EngineLimits
    step: StepTimes
    frontend: Frontend
    path: str = field(default="", compare=False)
    """The file it was read from."""
    fit: dict[str, Any] = field(default_factory=dict, compare=False)
    """How it was made (calibrate's cells and errors, or the extrapolation's ratios), kept as written."""
    validation: dict[str, Any] = field(default_factory=dict, compare=False)
    """How far its predictions were checked against measurements it was not fitted to (validation_of)."""

    @property
    def served_model(self) -> str:
        """The id /v1/models reports and requests must name."""
        return MODEL_PREFIX + self.model


def _short_model(model: str) -> str:
    """Strip the optional 'openai/' prefix and normalise case."""
    return bare_model_name(model.strip().lower())


def shipped_profiles() -> list[str]:
    """Names of the profiles that ship with the suite."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.json"))


def lookup_profile(gpu: str, model: str) -> Profile:
    """The MXFP4 profile a GPU label plays for ``model``; ProfileError listing valid choices."""
    g = gpu.strip().lower()
    m = _short_model(model)
    if g not in GPUS:
        raise ProfileError(f"unknown GPU {gpu!r}; valid GPUs: {', '.join(GPUS)} (or give PROFILE=name|path)")
    if m not in MODELS:
        raise ProfileError(f"unknown model {model!r}; valid models: {', '.join(MODELS)} "
                           f"(with or without the {MODEL_PREFIX!r} prefix)")
    path = PROFILES_DIR / f"{g}-{m}.json"
    if not path.exists():
        fits = sorted(p.stem.split("-", 1)[0] for p in PROFILES_DIR.glob(f"*-{m}.json"))
        here = sorted(p.stem.split("-", 1)[1] for p in PROFILES_DIR.glob(f"{g}-gpt-oss-*.json") if p.stem.count("-") == 3)
        raise ProfileError(f"{m} does not fit on {g} ({GPU_FIGURES[g].name}); on {g} use {', '.join(here)}, "
                           f"or run {m} on {', '.join(sorted(set(fits)))}")
    return load_profile(str(path))


def choose_profile(name_or_path: str, gpu: str, model: str) -> Profile:
    """PROFILE when given (MODEL, if given, must be its model), else GPU's MXFP4 profile for MODEL."""
    if not name_or_path:
        return lookup_profile(gpu, model or DEFAULT_MODEL)
    profile = load_profile(name_or_path)
    if model and _short_model(model) != profile.model:
        raise ProfileError(f"MODEL={model} but PROFILE={name_or_path} plays {profile.model}; leave MODEL out or give "
                          f"a profile of {bare_model_name(model)}")
    return profile


def load_profile(name_or_path: str) -> Profile:
    """A shipped profile by name, or a profile file by path; ProfileError (one line naming the field) if it is bad."""
    text = name_or_path.strip()
    path = Path(text)
    if not (text.endswith(".json") or "/" in text):
        path = PROFILES_DIR / f"{text}.json"
        if not path.exists():
            raise ProfileError(f"PROFILE={text}: no such shipped profile; give one of {', '.join(shipped_profiles())} "
                               "or a profile file's path")
    where = f"PROFILE={text}"
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ProfileError(f"{where}: cannot be read ({e.strerror or e}); give a profile file or a shipped name") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProfileError(f"{where}: not valid JSON ({e})") from None
    return profile_from_dict(data, where, str(path))


_KIND_WORDS = {int: "a whole number", float: "a number", str: "a string", dict: "a JSON object"}


def _field(data: Any, key: str, where: str, kind: type | tuple[type, ...], prefix: str = "") -> Any:
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: {prefix.rstrip('.') or 'the file'} must be a JSON object")
    if key not in data:
        raise ProfileError(f"{where}: {prefix}{key} is missing")
    value = data[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ProfileError(f"{where}: {prefix}{key} must be {_KIND_WORDS.get(kind, 'another value')}, got {value!r}")
    return value


def _number(data: Any, key: str, where: str, prefix: str, whole: bool = False, positive: bool = True) -> Any:
    value = _field(data, key, where, int if whole else float, prefix)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ProfileError(f"{where}: {prefix}{key} must be a {'positive' if positive else 'non-negative'} "
                           f"{'whole ' if whole else ''}number, got {value!r}")
    return value


def _choice(data: Any, key: str, where: str, choices: tuple[str, ...]) -> str:
    value = _field(data, key, where, str)
    if value not in choices:
        raise ProfileError(f"{where}: {key} must be one of {', '.join(choices)}, got {value!r}")
    return value


def profile_from_dict(data: Any, where: str, path: str = "") -> Profile:
    """Validate a profile's JSON; ProfileError naming the first bad field."""
    version = _field(data, "schema_version", where, int)
    if version != PROFILE_SCHEMA_VERSION:
        raise ProfileError(f"{where}: schema_version {version} is not {PROFILE_SCHEMA_VERSION}, the one this suite reads")
    engine, step, front = (_field(data, key, where, dict) for key in ("engine", "step", "frontend"))
    block_size = (_number(engine, "block_size", where, "engine.", whole=True) if "block_size" in engine
                  else EngineLimits.block_size)  # optional: profiles before the prefix cache have none
    async_scheduling = engine.get("async_scheduling", False)  # optional: profiles before it have none (synchronous)
    if not isinstance(async_scheduling, bool):
        raise ProfileError(f"{where}: engine.async_scheduling must be true or false, got {async_scheduling!r}")
    limits = EngineLimits(*(_number(engine, k, where, "engine.", whole=True)
                            for k in ("max_num_seqs", "max_num_batched_tokens", "kv_capacity_tokens")), block_size,
                          async_scheduling)
    if limits.max_num_batched_tokens < limits.max_num_seqs:
        raise ProfileError(f"{where}: engine.max_num_batched_tokens ({limits.max_num_batched_tokens}) must be at least "
                           f"engine.max_num_seqs ({limits.max_num_seqs}), as vLLM requires")
    times = StepTimes(
        overhead_s=_number(step, "overhead_s", where, "step.", positive=False),
        expert_weights_s=_number(step, "expert_weights_s", where, "step.", positive=False),
        expert_saturation_tokens=_number(step, "expert_saturation_tokens", where, "step."),
        token_s=_number(step, "token_s", where, "step.", positive=False),
        context_token_s=_number(step, "context_token_s", where, "step.", positive=False),
        attention_pair_s=_number(step, "attention_pair_s", where, "step.", positive=False),
        experts=_number(step, "experts", where, "step.", whole=True),
        experts_per_token=_number(step, "experts_per_token", where, "step.", whole=True))
    if times.experts_per_token > times.experts:
        raise ProfileError(f"{where}: step.experts_per_token ({times.experts_per_token}) exceeds step.experts ({times.experts})")
    frontend = Frontend(_number(front, "latency_s", where, "frontend.", positive=False),
                        _number(front, "request_s", where, "frontend.", positive=False),
                        _number(front, "output_token_s", where, "frontend.", positive=False),
                        _number(front, "prompt_token_s", where, "frontend.", positive=False)
                        if "prompt_token_s" in front else 0.0)  # optional: profiles fitted before it have none
    model = _short_model(_field(data, "model", where, str))
    fit = data.get("fit", {})
    fit = fit if isinstance(fit, dict) else {}
    kind = _choice(data, "kind", where, KINDS)
    validation = data.get("validation")
    return Profile(name=_field(data, "name", where, str), gpu=_field(data, "gpu", where, str).strip().lower(), model=model,
                   weights=_choice(data, "weights", where, WEIGHTS), kind=kind,
                   source=_field(data, "source", where, str), engine=limits, step=times, frontend=frontend, path=path,
                   fit=fit, validation=validation if isinstance(validation, dict) else validation_of(kind, fit))


def profile_to_dict(p: Profile) -> dict[str, Any]:
    """A profile as its file holds it."""
    return {"schema_version": PROFILE_SCHEMA_VERSION, "name": p.name, "gpu": p.gpu, "model": p.model, "weights": p.weights,
            "kind": p.kind, "source": p.source, "validation": p.validation or validation_of(p.kind, p.fit),
            "engine": asdict(p.engine), "step": asdict(p.step), "frontend": asdict(p.frontend), "fit": p.fit}


HELD_OUT_METHOD = ("leave one operating point out: each measured operating point predicted by a fit to the others "
                   "(make calibrate's held-out column)")
WITHIN = 0.15
"""The tolerance a validation counts figures within (the issue's goal: 15%)."""


def validation_of(kind: str, fit: dict[str, Any]) -> dict[str, Any]:
    """How a profile was validated, from how it was made: a measured profile's held-out errors per figure (each cell
    of its fit predicted by a fit that held the cell's operating point out), else ``unvalidated``.

    Each figure gets n, the median and worst |relative error|, and how many were within WITHIN; predictions carry the
    worst as their model error."""
    cells = fit.get("cells") if kind == "measured" else None
    errors: dict[str, list[float]] = {}
    for row in cells or ():
        for metric, observed in (row.get("observed") or {}).items():
            held = (row.get("held_out") or {}).get(metric)
            if held is not None and observed and math.isfinite(held) and math.isfinite(observed):
                errors.setdefault(metric, []).append(abs(held - observed) / abs(observed))
    if not errors:
        refs = ", ".join(fit.get("extrapolated_from") or []) or "other profiles"
        return {"status": "unvalidated", "method": f"extrapolated from {refs} by published hardware figures; no "
                                                   "measurement of this GPU and model has checked it"}
    return {"status": "validated", "method": HELD_OUT_METHOD, "within": WITHIN,
            "errors": {metric: {"n": len(values), "median_abs": round(sorted(values)[len(values) // 2], 4),
                                "worst_abs": round(max(values), 4), "within": sum(v <= WITHIN for v in values)}
                       for metric, values in sorted(errors.items())}}


# Mean reasoning tokens per effort; gpt-oss defaults to medium when no effort is given.
REASONING_MEAN_TOKENS = {"low": 150, "medium": 450, "high": 1600}
ANSWER_MEAN_TOKENS = 350
LENGTH_SIGMA = 0.5


def normalize_effort(effort: str | None) -> str:
    """Map None/'none' to 'medium'; raise ValueError for anything not low/medium/high."""
    if effort is None or effort == "none":
        return "medium"
    if effort not in REASONING_MEAN_TOKENS:
        raise ValueError(f"reasoning_effort must be one of {', '.join(EFFORTS)}; got {effort!r}")
    return effort


def _lognormal_tokens(rng: random.Random, mean_tokens: float) -> int:
    """Draw a token count whose distribution mean is mean_tokens (mu corrected for sigma)."""
    mu = math.log(mean_tokens) - LENGTH_SIGMA * LENGTH_SIGMA / 2
    return max(1, round(rng.lognormvariate(mu, LENGTH_SIGMA)))


def sample_lengths(effort: str | None, seed: int, index: int) -> tuple[int, int]:
    """Return (reasoning_tokens, answer_tokens) for the index-th arrival, deterministic in seed."""
    rng = random.Random(seed * 1_000_003 + index)
    reasoning = _lognormal_tokens(rng, REASONING_MEAN_TOKENS[normalize_effort(effort)])
    answer = _lognormal_tokens(rng, ANSWER_MEAN_TOKENS)
    return reasoning, answer
