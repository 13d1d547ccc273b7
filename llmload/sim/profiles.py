"""Performance profiles of gpt-oss on vLLM per GPU, and the output-length model."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from llmload.errors import ProfileError
from llmload.results.efforts import REASONING_EFFORTS as EFFORTS
from llmload.results.provenance import bare_model_name


@dataclass(frozen=True)
class Profile:
    """Timing and capacity of one (gpu, model) pairing; durations in seconds."""

    ttft_base_s: float  # fixed per-request overhead added after prefill
    prefill_tok_s: float  # prompt tokens per second through the single prefill server
    itl_base_s: float  # inter-token latency with an empty batch
    itl_per_seq_s: float  # extra inter-token latency per running sequence
    max_num_seqs: int  # vLLM --max-num-seqs: concurrently running sequences
    kv_capacity_tokens: int  # tokens the KV cache holds across all running sequences
    served_model: str  # the id /v1/models reports and requests must name


MODEL_PREFIX = "openai/"
GPUS = ("a100", "h100", "h200", "l4")
GPU_MEMORY_GB = {"a100": 80, "h100": 80, "h200": 141, "l4": 24}
MODELS = ("gpt-oss-20b", "gpt-oss-120b")
DEFAULT_MODEL = MODELS[0]
"""What the built-in target serves when MODEL is empty."""

# Values derived from vendor specs (memory size/bandwidth, FLOPs) scaled from a
# published A100 gpt-oss serving report; they are rehearsal estimates, not measurements.
_TABLE: dict[tuple[str, str], tuple[float, float, float, float, int, int]] = {
    ("a100", "gpt-oss-120b"): (0.040, 12000, 0.0103, 0.00031, 256, 109504),
    ("a100", "gpt-oss-20b"): (0.030, 18000, 0.0070, 0.00020, 256, 1200000),
    ("h100", "gpt-oss-120b"): (0.025, 36000, 0.0063, 0.00015, 1024, 109504),
    ("h100", "gpt-oss-20b"): (0.018, 55000, 0.0040, 0.00010, 1024, 1200000),
    ("h200", "gpt-oss-120b"): (0.022, 38000, 0.0045, 0.00013, 1024, 840000),
    ("h200", "gpt-oss-20b"): (0.016, 58000, 0.0029, 0.00009, 1024, 2400000),
    ("l4", "gpt-oss-20b"): (0.060, 7000, 0.028, 0.0015, 256, 175000),
    # l4 / gpt-oss-120b is absent on purpose: ~65 GB of MXFP4 weights do not fit in 24 GB.
}


def _short_model(model: str) -> str:
    """Strip the optional 'openai/' prefix and normalise case."""
    return bare_model_name(model.strip().lower())


def lookup_profile(gpu: str, model: str) -> Profile:
    """Return the profile for (gpu, model); raise ProfileError listing valid choices."""
    g = gpu.strip().lower()
    m = _short_model(model)
    if g not in GPUS:
        raise ProfileError(f"unknown GPU {gpu!r}; valid GPUs: {', '.join(GPUS)}")
    if m not in MODELS:
        raise ProfileError(
            f"unknown model {model!r}; valid models: {', '.join(MODELS)} "
            f"(with or without the {MODEL_PREFIX!r} prefix)"
        )
    row = _TABLE.get((g, m))
    if row is None:
        fits = sorted(k[0] for k in _TABLE if k[1] == m)
        here = sorted(k[1] for k in _TABLE if k[0] == g)
        raise ProfileError(
            f"{m} does not fit on {g} ({GPU_MEMORY_GB[g]} GB); on {g} use {', '.join(here)}, "
            f"or run {m} on {', '.join(fits)}"
        )
    ttft, prefill, itl, per_seq, seqs, kv = row
    return Profile(ttft, float(prefill), itl, per_seq, seqs, kv, MODEL_PREFIX + m)


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
