"""Published figures of the GPUs and models the suite plays, and the step-time model they imply before any fit.

The figures are the field notes' (vendor data sheets, OpenAI's gpt-oss model card and config.json); the
efficiencies turning peak figures into priors are round guesses the fit corrects: a measured profile's
fitted/prior ratio per term is the efficiency an extrapolated profile carries to another GPU or model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmload.sim.stepmodel import EngineLimits, Frontend, StepTimes

__all__ = ["GpuFigures", "ModelFigures", "GPU_FIGURES", "MODEL_FIGURES", "WEIGHT_BYTES", "prior_step", "PRIOR_FRONTEND",
           "vllm_default_limits", "kv_capacity_tokens", "weights_gib"]


@dataclass(frozen=True)
class GpuFigures:
    name: str
    memory_mib: int
    """As nvidia-smi reports it."""
    bandwidth_tb_s: float
    bf16_tflops: float
    """Dense BF16."""


@dataclass(frozen=True)
class ModelFigures:
    layers: int
    full_attention_layers: int
    """The others attend a 128-token sliding window."""
    experts: int
    experts_per_token: int
    expert_params: float
    """All experts' weights, every layer (gate/up 2880 -> 5760 and down 2880 -> 2880 each)."""
    dense_params: float
    """Attention, router, embeddings and unembedding: always BF16."""
    active_params: float
    query_heads: int = 64
    kv_heads: int = 8
    head_dim: int = 64


GPU_FIGURES = {
    "a100": GpuFigures("A100 SXM 80 GB", 81_920, 2.04, 312.0),
    "h100": GpuFigures("H100 SXM 80 GB", 81_559, 3.35, 989.0),
    "h200": GpuFigures("H200 141 GB", 143_771, 4.8, 989.0),
    "l4": GpuFigures("L4 24 GB", 23_034, 0.30, 121.0),
}
_EXPERT = 3 * 2880 * 2880  # parameters of one expert's MLP
MODEL_FIGURES = {
    "gpt-oss-20b": ModelFigures(24, 12, 32, 4, 24 * 32 * _EXPERT, 20.9e9 - 24 * 32 * _EXPERT, 3.6e9),
    "gpt-oss-120b": ModelFigures(36, 18, 128, 4, 36 * 128 * _EXPERT, 116.8e9 - 36 * 128 * _EXPERT, 5.1e9),
}
WEIGHT_BYTES = {"mxfp4": 4.25 / 8, "bf16": 2.0, "bf16-dummy": 2.0}
"""Bytes per expert weight; MXFP4 is 4-bit values with one 8-bit scale per 32."""

BANDWIDTH_EFFICIENCY = 0.75
MATMUL_EFFICIENCY = 0.5
ATTENTION_EFFICIENCY = 0.3
STEP_OVERHEAD_S = 1.0e-3
"""Launch and scheduling per step with CUDA graphs, before any weight is read."""
PRIOR_FRONTEND = Frontend(latency_s=5.0e-3, request_s=2.0e-3, output_token_s=40e-6)
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
