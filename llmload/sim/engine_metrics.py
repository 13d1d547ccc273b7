"""The engine state under SGLang's and trtllm-serve's metric names and shapes (sim/dialects.py says where each comes
from): their Prometheus text, and trtllm-serve's JSON iteration stats at /metrics."""

from __future__ import annotations

from typing import Any

from .engine import Engine
from .histograms import Histogram

__all__ = ["sglang_metrics_text", "trtllm_metrics_text", "trtllm_iteration_stats"]

_Row = tuple[str, str, str, str, float]  # name, type, help, labels, value


def _render(rows: list[_Row], histograms: list[tuple[str, str, str, Histogram]]) -> str:
    """Prometheus text; a family that holds nothing yet is left out, as prometheus_client's multiprocess collector
    leaves out a labelled family no value was written to (both engines serve their metrics through it)."""
    out = []
    for name, kind, help_text, labels, value in rows:
        if kind == "counter" and not value:
            continue
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n{name}{{{labels}}} {float(value)!r}\n")
    for name, help_text, labels, histogram in histograms:
        if sum(histogram.counts):
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} histogram\n")
            out.extend(histogram.lines(name, labels))
    return "".join(out)


def sglang_metrics_text(engine: Engine, model: str) -> str:
    """/metrics of SGLang 0.5.23 started with --enable-metrics (srt/observability/metrics_collector.py)."""
    e, lat = engine, engine.latency
    tokenizer = f'model_name="{model}",engine_type="unified",is_streaming="true"'
    scheduler = f'model_name="{model}",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
    queries = e.prefix_cache_queries_total
    rows: list[_Row] = [
        ("sglang:num_running_reqs", "gauge", "The number of running requests.", scheduler, e.running),
        ("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", scheduler, e.waiting),
        ("sglang:token_usage", "gauge", "The token usage.", scheduler, e.kv_usage),
        ("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", scheduler,
         e.prefix_cache_hits_total / queries if queries else 0.0),
        ("sglang:num_retracted_requests_total", "counter", "Total number of retracted requests.", scheduler,
         e.num_preemptions_total),
        ("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", tokenizer, e.prompt_tokens_total),
        ("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", tokenizer,
         e.generation_tokens_total),
        ("sglang:cached_tokens_total", "counter", "Number of cached prompt tokens by source (device/host/storage).",
         tokenizer.replace(',is_streaming="true"', ',cache_source="device"'), e.prefix_cache_hits_total),
        ("sglang:num_requests_total", "counter", "Number of requests processed.", tokenizer,
         sum(e.request_success_total.values())),
    ]
    return _render(rows, [
        ("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", tokenizer,
         lat.time_to_first_token),
        ("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
         tokenizer.replace(',is_streaming="true"', ""), lat.inter_token_latency),
        ("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", tokenizer,
         lat.e2e_request_latency),
        ("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", scheduler, lat.request_queue_time),
    ])


def trtllm_metrics_text(engine: Engine, model: str) -> str:
    """/prometheus/metrics of trtllm-serve with return_perf_metrics: true (tensorrt_llm/metrics/collector.py)."""
    e, lat = engine, engine.latency
    labels = f'model_name="{model}",engine_type="pytorch"'
    rows: list[_Row] = [
        *(("trtllm_request_success_total", "counter", "Count of successfully processed requests.",
           f'{labels},finished_reason="{reason}"', n) for reason, n in e.request_success_total.items()),
        ("trtllm_prompt_tokens_total", "counter", "Cumulative number of prompt (input) tokens processed.", labels,
         e.prompt_tokens_total),
        ("trtllm_generation_tokens_total", "counter", "Cumulative number of generation (output) tokens produced.",
         labels, e.generation_tokens_total),
        ("trtllm_prompt_cached_tokens_total", "counter", "Total prompt tokens served from KV cache.", labels,
         e.prefix_cache_hits_total),
        ("trtllm_kv_cache_utilization", "gauge", "KV cache utilization", labels, e.kv_usage),
        ("trtllm_num_requests_running", "gauge", "Number of active requests", labels, e.running),
        ("trtllm_num_requests_waiting", "gauge", "Number of queued requests", labels, e.waiting),
    ]
    return _render(rows, [
        ("trtllm_e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", labels,
         lat.e2e_request_latency),
        ("trtllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
         lat.time_to_first_token),
        ("trtllm_time_per_output_token_seconds", "Histogram of time per output token in seconds.", labels,
         lat.request_time_per_output_token),
        ("trtllm_request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", labels,
         lat.request_queue_time),
    ])


def trtllm_iteration_stats(engine: Engine) -> list[dict[str, Any]]:
    """GET /metrics of trtllm-serve: its latest iteration stats as JSON (openai_server.py get_iteration_stats), the
    fields collector.py log_iteration_stats reads."""
    block = engine.profile.engine.block_size
    return [{"numActiveRequests": engine.running, "numQueuedRequests": engine.waiting,
             "maxNumActiveRequests": engine.profile.engine.max_num_seqs,
             "kvCacheStats": {"usedNumBlocks": -(-engine.kv_used_tokens // block),
                              "maxNumBlocks": engine.profile.engine.kv_capacity_tokens // block,
                              "tokensPerBlock": block}}]
