"""The step-time model the published figures (llmload/sim/hardware.py) imply before any fit.

The efficiencies turning peak figures into priors are round guesses the fit corrects: a measured profile's
fitted/prior ratio per term is the efficiency an extrapolated profile carries to another GPU or model.
"""

from __future__ import annotations

import math

from llmload.sim.hardware import GPU_FIGURES, MODEL_FIGURES, WEIGHT_BYTES
from llmload.sim.stepmodel import EngineLimits, Frontend, StepTimes

__all__ = ["prior_step", "PRIOR_FRONTEND", "vllm_default_limits", "kv_capacity_tokens", "weights_gib", "default_limits"]

BANDWIDTH_EFFICIENCY = 0.75
MATMUL_EFFICIENCY = 0.5
ATTENTION_EFFICIENCY = 0.3
STEP_OVERHEAD_S = 1.0e-3
"""Launch and scheduling per step with CUDA graphs, before any weight is read."""
PRIOR_FRONTEND = Frontend(latency_s=5.0e-3, request_s=2.0e-3, output_token_s=40e-6, prompt_token_s=1e-6)
"""vLLM's API server: a guess the fit replaces (it depends on the host's CPU, not the GPU)."""
KV_BYTES_PER_TOKEN_LAYER = 1545.0
"""Per reported KV token and layer: vLLM 0.25 on the H200 (gpt-oss-20b's shape) held 2,187,046 tokens in 75.53 GiB."""
NON_KV_RESERVE_GIB = 4.6
"""What vLLM kept besides weights and KV there: 0.85 x 140.4 GiB - 39.15 GiB weights - 75.53 GiB KV."""


def weights_gib(model: str, weights: str) -> float:
    m = MODEL_FIGURES[model]
    return (m.expert_params * WEIGHT_BYTES[weights] + m.dense_params * 2.0) / 2**30


def prior_step(gpu: str, model: str, weights: str) -> StepTimes:
    """The step-time model from peak figures and round efficiencies: a fit's starting point and yardstick."""
    g, m = GPU_FIGURES[gpu], MODEL_FIGURES[model]
    bandwidth = g.bandwidth_tb_s * 1e12 * BANDWIDTH_EFFICIENCY
    flops = g.bf16_tflops * 1e12
    kv_bytes_per_token = m.full_attention_layers * 2 * m.kv_heads * m.head_dim * 2
    return StepTimes(
        overhead_s=STEP_OVERHEAD_S + m.dense_params * 2.0 / bandwidth,
        expert_weights_s=m.expert_params * WEIGHT_BYTES[weights] / bandwidth,
        expert_saturation_tokens=1.0 / -math.log(1.0 - m.experts_per_token / m.experts),
        token_s=2.0 * m.active_params / (flops * MATMUL_EFFICIENCY),
        context_token_s=kv_bytes_per_token / bandwidth,
        attention_pair_s=4.0 * m.query_heads * m.head_dim * m.full_attention_layers / (flops * ATTENTION_EFFICIENCY),
        experts=m.experts, experts_per_token=m.experts_per_token)


def vllm_default_limits(gpu: str) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM's API server picks: 1024/8192 on 70 GiB or more but not an A100,
    else 256/2048 (vllm/engine/arg_utils.py, get_batch_defaults)."""
    g = GPU_FIGURES[gpu]
    return (1024, 8192) if g.memory_mib >= 70 * 1024 and gpu != "a100" else (256, 2048)


def kv_capacity_tokens(gpu: str, model: str, weights: str, memory_utilization: float = 0.9) -> int:
    """KV tokens vLLM would report: its memory share less weights and reserve, at the H200's bytes per token and layer."""
    free_gib = GPU_FIGURES[gpu].memory_mib / 1024 * memory_utilization - weights_gib(model, weights) - NON_KV_RESERVE_GIB
    return max(0, int(free_gib * 2**30 / (KV_BYTES_PER_TOKEN_LAYER * MODEL_FIGURES[model].layers)))


def default_limits(gpu: str, model: str, weights: str) -> EngineLimits:
    seqs, batched = vllm_default_limits(gpu)
    return EngineLimits(seqs, batched, kv_capacity_tokens(gpu, model, weights))
