"""The engines the built-in target can speak as (DIALECT=vllm|sglang|trtllm): routes, stream fields, usage, /metrics.

Each is taken from the engine's own source, read at the version named; what a dialect does not play is listed under it.

vllm (0.32; the default, unchanged): /health, /version, /v1/models (``owned_by: vllm``, ``max_model_len``), /metrics
    (Prometheus, ``vllm:`` names), /tokenize, POST /reset_prefix_cache; chat deltas carry ``reasoning``; the usage chunk
    (with ``stream_options.include_usage``) has ``completion_tokens_details.reasoning_tokens``.

sglang (0.5.23, read from the PyPI wheel sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl):
    sglang/srt/entrypoints/http_server.py: GET /health and /health_generate (one handler: 503 while the server is
        Starting, i.e. until its warm-up request is served; 200 after), GET /ready, /model_info and /get_model_info,
        /server_info and /get_server_info (the server args and ``"version"``), /v1/models (ModelCard ``owned_by:
        sglang``, ``max_model_len`` = the context length), /flush_cache (GET or POST: 200, or 400 while requests run);
        no /version route. /metrics only with --enable-metrics (srt/utils/common.py add_prometheus_middleware).
    sglang/srt/utils/auth.py decide_request_auth: /health*, /ready* and /metrics* need no API key.
    sglang/srt/entrypoints/openai/protocol.py DeltaMessage: the reasoning parser's text goes in ``reasoning_content``
        (gpt-oss gets parser "gpt-oss" by srt/parser/template_detection.py's rule _is_gpt_oss, or --reasoning-parser).
    openai/usage_processor.py calculate_token_usage, protocol.py UsageInfo: the usage chunk (include_usage) has
        ``reasoning_tokens`` at its top level, ``completion_tokens_details: {"reasoning_tokens": n}`` only when n > 0,
        and ``prompt_tokens_details`` null unless --enable-cache-report; openai/utils.py should_include_usage:
        ``continuous_usage_stats`` puts usage on every chunk. srt/arg_groups/fields/serving.py: enable_cache_report and
        stream_response_default_include_usage default False; observability.py: enable_metrics defaults False.
    srt/observability/metrics_collector.py: ``sglang:`` families. Tokenizer side (labels model_name, engine_type,
        is_streaming): prompt_tokens_total, generation_tokens_total, num_requests_total, cached_tokens_total (label
        cache_source; incremented only when a request found cached tokens), time_to_first_token_seconds,
        inter_token_latency_seconds (its count is tokens: observe_inter_token_latency adds num_new_tokens),
        e2e_request_latency_seconds. Scheduler side (labels model_name, engine_type, tp_rank, pp_rank, moe_ep_rank):
        num_running_reqs, num_queue_reqs, token_usage, cache_hit_rate, num_retracted_requests_total,
        queue_time_seconds. Served through prometheus_client's multiprocess collector, so a labelled family appears
        only once a value was written: the request families are absent until a request finished.
    srt/entrypoints/engine.py logs ``server_args=ServerArgs(...)``; http_server.py ``The server is fired up and ready
        to roll!``.

trtllm (trtllm-serve of NVIDIA/TensorRT-LLM main, 2026, read from the stored index):
    tensorrt_llm/serve/openai_server.py register_routes: /health, /health_generate, /version (``{"version": ...}``),
        /v1/models (ModelCard in serve/openai_protocol.py: ``owned_by: tensorrt_llm``, no max_model_len), /metrics =
        get_iteration_stats (a JSON list of iteration stats, not Prometheus), /perf_metrics; /prometheus/metrics is
        mounted only when ``return_perf_metrics: true`` is in its LLM API options (mount_metrics). gpt-oss's chat
        goes through chat_harmony.
    tensorrt_llm/serve/harmony_adapter.py: the analysis channel streams as ``delta.reasoning``; handle_streaming_response
        ends every stream with a usage chunk (prompt_tokens, completion_tokens, total_tokens: no reasoning_tokens, no
        prompt_tokens_details), asked for or not; stream_options (continuous usage) is not read on this path.
    tensorrt_llm/metrics/collector.py MetricsCollector (metric_prefix ``trtllm_``; examples/serve/prometheus_metrics.py
        reads them at /prometheus/metrics): request_success_total (label finished_reason), e2e_request_latency_seconds,
        time_to_first_token_seconds, time_per_output_token_seconds (one observation per request: its TPOT),
        request_queue_time_seconds, prompt_tokens_total, generation_tokens_total, prompt_cached_tokens_total (only
        incremented when a request found cached tokens), kv_cache_utilization, kv_cache_hit_rate,
        num_requests_running, num_requests_waiting; labels model_name and engine_type. No inter-token latency
        histogram and no preemption counter. Multiprocess collector too: the request families appear once written.
        TensorRT-LLM 1.0 to 1.1 exposed five of these without the prefix (Dynamo's TensorRT-LLM metrics page).

Played as started for measurement: SGLang with --enable-metrics, trtllm-serve with ``return_perf_metrics: true``
(without them neither has Prometheus text, and the suite says so). Not played, in any dialect: bucket bounds (the target keeps vLLM's; the suite reads only _sum and _count), a role
chunk's exact fields, trtllm's separate finish chunk (its finish_reason rides on the last token's chunk here), SGLang's
flag names (the target takes vLLM's: --max-num-seqs, not --max-running-requests).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Dialect", "DIALECTS", "dialect_of"]


@dataclass(frozen=True)
class Dialect:
    """What one engine's server looks like from outside."""

    name: str
    version: str
    """What it reports as its version (on /version, or SGLang's /server_info)."""
    owned_by: str
    """/v1/models' ``owned_by``, which names the engine."""
    reasoning_key: str
    """The chat delta field the reasoning tokens travel in."""
    usage: str
    """The usage chunk's shape: vllm, sglang, or trtllm (sent whether asked for or not)."""
    metrics_path: str
    """Where its Prometheus text is."""
    continuous_usage: bool
    """Honours stream_options.continuous_usage_stats."""
    models_max_len: bool
    """/v1/models gives each model's max_model_len."""
    starting_s: float = 0.0
    """How long after it starts /health answers 503 (SGLang's Starting status, until its warm-up request is served)."""


DIALECTS = {
    "vllm": Dialect("vllm", "0.32.0-sim", "vllm", "reasoning", "vllm", metrics_path="/metrics", continuous_usage=True,
                    models_max_len=True),
    "sglang": Dialect("sglang", "0.5.23-sim", "sglang", "reasoning_content", "sglang", metrics_path="/metrics",
                      continuous_usage=True, models_max_len=True, starting_s=0.5),
    "trtllm": Dialect("trtllm", "main-sim", "tensorrt_llm", "reasoning", "trtllm", metrics_path="/prometheus/metrics",
                      continuous_usage=False, models_max_len=False),
}


def dialect_of(name: str) -> Dialect:
    """The dialect named ``name`` (one of DIALECTS); ValueError names the choices."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"--dialect must be one of {', '.join(DIALECTS)}; got {name!r}") from None
