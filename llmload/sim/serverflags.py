"""vLLM's serving flags the built-in target plays, so a tune can be rehearsed before a GPU is rented.

Each flag keeps vLLM's own name (a tune's GRID names the same flags for the real server and the rehearsal):

    --max-num-seqs N              the scheduler's limit on running sequences
    --max-num-batched-tokens N    the tokens one step takes (prefill chunks and decodes)
    --gpu-memory-utilization F    the share of the GPU's memory vLLM takes: what is left after the weights is KV cache
    --max-model-len N             the longest prompt plus answer a request may have (400 beyond, as vLLM answers)
    --tensor-parallel-size N      the model split over N GPUs: weight reads and compute split N ways, N GPUs' memory
    --stream-interval N           tokens per event after the first (vLLM's API server buffers that many)

What the step model cannot say (``--async-scheduling``: overlapping the scheduler with the step; attention backends;
kernels) is not played: a tune says so per configuration, and such a configuration predicts its baseline. The memory
and tensor-parallel figures scale the profile's own KV capacity by published figures (calibrate/hardware.py): a
rehearsal's guess, labelled as the profile's validation says.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from llmload.calibrate.hardware import NON_KV_RESERVE_GIB, weights_gib
from llmload.sim.hardware import GPU_FIGURES, MODEL_FIGURES

from .profiles import Profile

__all__ = ["ServerFlags", "MODELLED_FLAGS", "DEFAULT_MEMORY_UTILIZATION", "with_flags"]

MODELLED_FLAGS = ("max-num-seqs", "max-num-batched-tokens", "gpu-memory-utilization", "max-model-len",
                  "tensor-parallel-size", "stream-interval")
"""vLLM's flags (without --) the built-in target plays; a tune's rehearsal says the others are not modelled."""
DEFAULT_MEMORY_UTILIZATION = 0.9
"""vLLM's default --gpu-memory-utilization, which the profiles' KV capacities assume unless measured otherwise."""


@dataclass(frozen=True)
class ServerFlags:
    """The flags given to the built-in target; None: the profile's own (vLLM's default for the GPU)."""

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    stream_interval: int = 1


def _kv_gib(profile: Profile, utilization: float, tensor_parallel: int) -> float:
    """GiB of KV cache over ``tensor_parallel`` GPUs at ``utilization``: each GPU's share less its part of the
    weights and vLLM's reserve."""
    memory_gib = GPU_FIGURES[profile.gpu].memory_mib / 1024
    per_gpu = memory_gib * utilization - weights_gib(profile.model, profile.weights) / tensor_parallel - NON_KV_RESERVE_GIB
    return max(0.0, per_gpu * tensor_parallel)


def with_flags(profile: Profile, flags: ServerFlags) -> Profile:
    """The profile as the flags change it: the scheduler's limits, the KV capacity (memory share, GPUs), and with
    tensor parallelism the step's weight reads and compute split over the GPUs (its launch overhead is not)."""
    engine, step = profile.engine, profile.step
    if flags.max_num_seqs is not None:
        engine = replace(engine, max_num_seqs=flags.max_num_seqs)
    if flags.max_num_batched_tokens is not None:
        engine = replace(engine, max_num_batched_tokens=flags.max_num_batched_tokens)
    known = profile.gpu in GPU_FIGURES and profile.model in MODEL_FIGURES
    if known and (flags.gpu_memory_utilization is not None or flags.tensor_parallel_size != 1):
        base = _kv_gib(profile, DEFAULT_MEMORY_UTILIZATION, 1)
        wanted = _kv_gib(profile, flags.gpu_memory_utilization or DEFAULT_MEMORY_UTILIZATION, flags.tensor_parallel_size)
        if base > 0:
            engine = replace(engine, kv_capacity_tokens=int(engine.kv_capacity_tokens * wanted / base))
    if flags.tensor_parallel_size != 1:
        n = flags.tensor_parallel_size
        step = replace(step, expert_weights_s=step.expert_weights_s / n, token_s=step.token_s / n,
                       context_token_s=step.context_token_s / n, attention_pair_s=step.attention_pair_s / n)
    return replace(profile, engine=engine, step=step)
