"""Published figures of the GPUs and models the suite plays: the labels GPU= and MODEL= take, and what calibrate's
priors and extrapolations are computed from.

The figures are the field notes' (vendor data sheets, OpenAI's gpt-oss model card and config.json).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GpuFigures", "ModelFigures", "GPU_FIGURES", "MODEL_FIGURES", "WEIGHT_BYTES"]


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
"""Bytes per expert weight of each kind of weights a profile names: the released MXFP4 experts (4-bit values with one
8-bit scale per 32), BF16, and BF16 of random values (vLLM --load-format dummy: routing unlike a trained model's)."""
