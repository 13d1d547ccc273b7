"""Profiles for what nobody measured: a measured profile's efficiencies carried to another GPU, model or weights.

Each step-time term of the target is its hardware prior times the measured profile's fitted/prior ratio for that
term (the share of peak bandwidth or FLOPs the server reached). Terms may come from different measured profiles:
compute and overhead from one on the same GPU family, memory-bound expert reads from one with trained weights
(dummy weights route unlike a trained model). The API server's costs are copied (they depend on the host's CPU).
The server limits are vLLM's defaults for the target GPU, its KV cache sized from memory; asynchronous scheduling as
the server the compute terms were measured on had it (its overhead was fitted that way). Labelled
``extrapolated``, with every ratio kept in the file.
"""

from __future__ import annotations

from dataclasses import asdict, fields, replace

from llmload.sim.hardware import GPU_FIGURES
from llmload.sim.profiles import Profile
from llmload.sim.stepmodel import StepTimes

from .hardware import default_limits, prior_step

__all__ = ["extrapolate", "COMPUTE_TERMS", "MEMORY_TERMS"]

COMPUTE_TERMS = ("overhead_s", "token_s", "attention_pair_s")
MEMORY_TERMS = ("expert_weights_s", "expert_saturation_tokens", "context_token_s")


def extrapolate(gpu: str, model: str, weights: str, compute_from: Profile, memory_from: Profile) -> Profile:
    """The profile of ``gpu`` x ``model`` x ``weights``, scaled from measured profiles by published hardware figures."""
    target = prior_step(gpu, model, weights)
    values = asdict(target)
    ratios = {}
    for term in COMPUTE_TERMS + MEMORY_TERMS:
        ref = compute_from if term in COMPUTE_TERMS else memory_from
        ratio = getattr(ref.step, term) / getattr(prior_step(ref.gpu, ref.model, ref.weights), term)
        if term == "expert_saturation_tokens" and ref.weights == "bf16-dummy":
            ratio = 1.0  # dummy weights' routing says nothing of a trained model's
        values[term] = getattr(target, term) * ratio
        ratios[term] = {"from": ref.name, "fitted_over_prior": round(ratio, 4)}
    refs = sorted({compute_from.name, memory_from.name})
    source = (f"EXTRAPOLATED, not measured: {GPU_FIGURES[gpu].name} x {model} ({weights}) scaled from the measured "
              f"{' and '.join(refs)} by published figures (bandwidth {GPU_FIGURES[gpu].bandwidth_tb_s} TB/s, dense BF16 "
              f"{GPU_FIGURES[gpu].bf16_tflops:g} TFLOP/s; the model's expert, dense and active parameters): each step-time "
              f"term keeps the measured profile's fitted/prior ratio (compute terms from {compute_from.name}, memory terms "
              f"from {memory_from.name}); the API server's costs are {compute_from.name}'s; server limits are vLLM's "
              "defaults for the GPU, the KV cache sized from its memory.")
    return Profile(name=f"{gpu}-{model}" + ("" if weights == "mxfp4" else f"-{weights}"), gpu=gpu, model=model,
                   weights=weights, kind="extrapolated", source=source,
                   engine=replace(default_limits(gpu, model, weights), async_scheduling=compute_from.engine.async_scheduling),
                   step=StepTimes(**{f.name: values[f.name] for f in fields(StepTimes)}), frontend=compute_from.frontend,
                   fit={"extrapolated_from": refs, "ratios": ratios})
