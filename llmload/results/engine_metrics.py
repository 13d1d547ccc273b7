"""Pure: what each engine calls the server's figures in its Prometheus text, and what it does not expose.

    vllm    ``vllm:`` names (vllm/v1/metrics/loggers.py, 0.10 to 0.32; older names second), at /metrics.
    sglang  ``sglang:`` names at /metrics with --enable-metrics (sglang 0.5.23, srt/observability/metrics_collector.py;
            earlier releases srt/metrics/collector.py, same names). Its prefix-cache hits are sglang:cached_tokens_total
            (prompt tokens found cached, incremented only when a request found some) over sglang:prompt_tokens_total
            (every prompt token, cached or not); its preemptions are retractions (sglang:num_retracted_requests_total,
            0.5.23; older releases only a gauge). Its ITL histogram counts tokens, as vLLM's does.
    trtllm  ``trtllm_`` names at /prometheus/metrics, mounted by trtllm-serve only with ``return_perf_metrics: true``
            (tensorrt_llm/serve/openai_server.py mount_metrics; tensorrt_llm/metrics/collector.py, 2026; its /metrics is
            JSON iteration stats). It has no inter-token latency histogram: trtllm_time_per_output_token_seconds takes
            one observation per request, its TPOT, so the account's ITL is the mean of per-request TPOTs. It has no
            preemption counter; trtllm_generation_tokens_total came in 2026. TensorRT-LLM 1.0 to 1.1 exposed five of
            the request metrics without the prefix (request_success_total, e2e_request_latency_seconds,
            time_to_first_token_seconds, time_per_output_token_seconds, request_queue_time_seconds).

SGLang and trtllm-serve serve their metrics through prometheus_client's multiprocess collector, which shows a labelled
family only once a value was written: a request family absent before a run and present after it started from 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

__all__ = ["EngineNames", "ENGINES", "ACCOUNT_FIGURES", "METRICS_PATHS", "detect_engine", "engine_names", "title_of",
           "not_exposed", "notes_of"]

METRICS_PATHS = ("/metrics", "/prometheus/metrics")
"""Where a server's Prometheus text may be: vLLM's and SGLang's /metrics, then trtllm-serve's."""

ACCOUNT_FIGURES = {
    "requests finished": ("e2e_count",),
    "prompt tokens": ("prompt_tokens_total",),
    "generation tokens": ("generation_tokens_total",),
    "TTFT": ("ttft_sum_s", "ttft_count"),
    "ITL": ("itl_sum_s", "itl_count"),
    "E2E": ("e2e_sum_s", "e2e_count"),
    "queue time": ("queue_sum_s", "queue_count"),
    "prefix-cache hit rate": ("prefix_cache_hits_total", "prefix_cache_queries_total"),
    "preemptions": ("preemptions_total",),
    "KV-cache usage": ("kv_cache_usage",),
}
"""Each figure the server's account gives, and the MetricsSample fields it needs."""


@dataclass(frozen=True)
class EngineNames:
    """One engine's names for MetricsSample's fields (the first name present wins; a counter also without _total)."""

    key: str
    """What a MetricsSample's ``engine`` holds: vllm, sglang, trtllm, or trtllm-1.0 (its unprefixed names)."""
    title: str
    marker: str
    """A name only its text has, that tells it is this engine's."""
    names: Mapping[str, tuple[str, ...]]
    lazy_families: bool = False
    """Its request families appear only once written (multiprocess collector): absent before a run means 0."""
    hits_zero_with: str | None = None
    """Its cached-token counter moves only when a request found cached tokens: absent while this name (of the same
    version's families) is there, it stands at 0."""
    notes: Mapping[str, str] = field(default_factory=dict)
    """What a figure is where it differs from vLLM's, by ACCOUNT_FIGURES name."""
    why_missing: Mapping[str, str] = field(default_factory=dict)
    """Why a figure it has no name for is not there, by ACCOUNT_FIGURES name."""


def _histogram(field_prefix: str, name: str) -> dict[str, tuple[str, ...]]:
    return {f"{field_prefix}_sum_s": (f"{name}_sum",), f"{field_prefix}_count": (f"{name}_count",)}


_VLLM = EngineNames("vllm", "vLLM", "vllm:", {
    "running": ("vllm:num_requests_running",), "waiting": ("vllm:num_requests_waiting",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "preemptions_total": ("vllm:num_preemptions_total",),
    "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prompt_tokens_total": ("vllm:prompt_tokens_total",), "generation_tokens_total": ("vllm:generation_tokens_total",),
    "prefix_cache_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
    **_histogram("ttft", "vllm:time_to_first_token_seconds"),
    "itl_sum_s": ("vllm:inter_token_latency_seconds_sum", "vllm:time_per_output_token_seconds_sum"),
    "itl_count": ("vllm:inter_token_latency_seconds_count", "vllm:time_per_output_token_seconds_count"),
    **_histogram("e2e", "vllm:e2e_request_latency_seconds"), **_histogram("queue", "vllm:request_queue_time_seconds"),
})
_SGLANG = EngineNames("sglang", "SGLang", "sglang:", {
    "running": ("sglang:num_running_reqs",), "waiting": ("sglang:num_queue_reqs",), "kv_cache_usage": ("sglang:token_usage",),
    "preemptions_total": ("sglang:num_retracted_requests_total",),
    "prefix_cache_queries_total": ("sglang:prompt_tokens_total",), "prefix_cache_hits_total": ("sglang:cached_tokens_total",),
    "prompt_tokens_total": ("sglang:prompt_tokens_total",), "generation_tokens_total": ("sglang:generation_tokens_total",),
    "prefix_cache_hit_rate": ("sglang:cache_hit_rate",),
    **_histogram("ttft", "sglang:time_to_first_token_seconds"),
    "itl_sum_s": ("sglang:inter_token_latency_seconds_sum", "sglang:time_per_output_token_seconds_sum"),
    "itl_count": ("sglang:inter_token_latency_seconds_count", "sglang:time_per_output_token_seconds_count"),
    **_histogram("e2e", "sglang:e2e_request_latency_seconds"), **_histogram("queue", "sglang:queue_time_seconds"),
}, lazy_families=True, hits_zero_with="sglang:num_requests_total", notes={
    "ITL": "sglang:inter_token_latency_seconds, counted per token; an SGLang with only sglang:time_per_output_token_seconds "
           "(2024-25) observes each request's running TPOT instead",
    "prefix-cache hit rate": "sglang:cached_tokens_total over sglang:prompt_tokens_total, in tokens",
    "preemptions": "SGLang's retractions (sglang:num_retracted_requests_total), its word for preemptions",
})
_TRTLLM_TPOT = ("trtllm-serve has no inter-token latency histogram: its ITL here is the mean of per-request TPOTs "
                "(time_per_output_token_seconds), which weighs a short answer as much as a long one")
_TRTLLM = EngineNames("trtllm", "trtllm-serve", "trtllm_", {
    "running": ("trtllm_num_requests_running", "trtllm_num_active_requests"),
    "waiting": ("trtllm_num_requests_waiting", "trtllm_server_queue_length"),
    "kv_cache_usage": ("trtllm_kv_cache_utilization",),
    "prefix_cache_queries_total": ("trtllm_prompt_tokens_total",),
    "prefix_cache_hits_total": ("trtllm_prompt_cached_tokens_total",),
    "prompt_tokens_total": ("trtllm_prompt_tokens_total",), "generation_tokens_total": ("trtllm_generation_tokens_total",),
    "prefix_cache_hit_rate": ("trtllm_kv_cache_hit_rate",),
    **_histogram("ttft", "trtllm_time_to_first_token_seconds"), **_histogram("itl", "trtllm_time_per_output_token_seconds"),
    **_histogram("e2e", "trtllm_e2e_request_latency_seconds"), **_histogram("queue", "trtllm_request_queue_time_seconds"),
}, lazy_families=True, hits_zero_with="trtllm_prompt_tokens_total", notes={
    "ITL": _TRTLLM_TPOT, "prefix-cache hit rate": "trtllm_prompt_cached_tokens_total over trtllm_prompt_tokens_total"},
    why_missing={"preemptions": "it has no preemption counter",
                 "generation tokens": "trtllm_generation_tokens_total came in 2026; an older trtllm-serve has none"})
_TRTLLM_1_0 = EngineNames("trtllm-1.0", "trtllm-serve", "request_success_total", {
    **_histogram("ttft", "time_to_first_token_seconds"), **_histogram("itl", "time_per_output_token_seconds"),
    **_histogram("e2e", "e2e_request_latency_seconds"), **_histogram("queue", "request_queue_time_seconds"),
}, lazy_families=True, notes={"ITL": _TRTLLM_TPOT}, why_missing=dict.fromkeys(
    ("prompt tokens", "generation tokens", "prefix-cache hit rate", "preemptions", "KV-cache usage"),
    "TensorRT-LLM 1.0 to 1.1 expose five request metrics (unprefixed), no token or cache counters"))
ENGINES = (_VLLM, _SGLANG, _TRTLLM, _TRTLLM_1_0)
"""In the order they are tried: a text is the first one's whose marker starts one of its names."""


def detect_engine(values: Mapping[str, float]) -> EngineNames | None:
    """The engine whose names ``values`` (parse_prometheus's) hold; None when none of them."""
    for names in ENGINES:
        if any(key.startswith(names.marker) for key in values):
            return names
    return None


def engine_names(key: str | None) -> EngineNames | None:
    """The names a MetricsSample's ``engine`` (an EngineNames key) stands for; None for an unknown one."""
    return next((names for names in ENGINES if names.key == key), None)


def title_of(key: str | None) -> str:
    """How an engine is named in words (vLLM, SGLang, trtllm-serve), or "the server"."""
    names = engine_names(key)
    return names.title if names is not None else "the server"


def not_exposed(key: str | None, present: Callable[[str], bool], figures: Iterable[str] = ACCOUNT_FIGURES) -> tuple[str, ...]:
    """One sentence per figure of ``figures`` that a scrape of the engine ``key`` lacks (``present`` says whether it
    has a MetricsSample field): not exposed by the engine at all (and why, where known), or not in its text."""
    names, title, said = engine_names(key), title_of(key), []
    for figure in figures:
        fields = ACCOUNT_FIGURES[figure]
        if all(present(name) for name in fields):
            continue
        if names is not None and any(not names.names.get(name) for name in fields):
            why = names.why_missing.get(figure)
            said.append(f"{figure}: not exposed by {title}" + (f" ({why})" if why else ""))
        else:
            said.append(f"{figure}: not in {title}'s metrics after the run (a version without it, or nothing counted)")
    return tuple(said)


def notes_of(key: str | None, figures: Iterable[str] = ACCOUNT_FIGURES) -> tuple[str, ...]:
    """What the engine's figures are where they differ from vLLM's, one sentence each."""
    names = engine_names(key)
    return () if names is None else tuple(f"{figure}: {names.notes[figure]}" for figure in figures if figure in names.notes)
