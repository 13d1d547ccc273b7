"""Prometheus text exposition of engine state under vLLM's metric names, with vLLM's request histograms."""

from __future__ import annotations

from typing import Mapping

from .engine import Engine

def metrics_text(engine: Engine, model: str, http_requests: Mapping[tuple[str, str, str], int]) -> str:
    """Render gauges and counters with # HELP/# TYPE lines and a model_name label, then vLLM's HTTP counter."""
    e, label = engine, f'model_name="{model}"'
    rows = [
        ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
         [("", e.running)]),
        ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
         [("", e.waiting)]),
        ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
         [("", e.kv_usage)]),
        ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
         [("", e.prompt_tokens_total)]),
        ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
         [("", e.generation_tokens_total)]),
        ("vllm:request_success_total", "counter", "Count of successfully processed requests.",
         [(f'finished_reason="{r}",', n) for r, n in e.request_success_total.items()]),
        ("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.",
         [("", e.num_preemptions_total)]),
        ("vllm:prefix_cache_queries_total", "counter",
         "Prefix cache queries, in terms of number of queried tokens.",
         [("", e.prefix_cache_queries_total)]),
        ("vllm:prefix_cache_hits_total", "counter",
         "Prefix cache hits, in terms of number of cached tokens.",
         [("", e.prefix_cache_hits_total)]),
        ("llmload_sim:stream_pauses_total", "counter",
         "Streams held back because their reader fell behind (the built-in target's own, not vLLM's).",
         [("", e.stream_pauses_total)]),
    ]
    out = []
    for name, kind, help_text, samples in rows:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        for extra, value in samples:
            out.append(f"{name}{{{extra}{label}}} {float(value)!r}\n")
    for name, help_text, histogram in e.latency.rows():
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} histogram\n")
        out.extend(histogram.lines(name, label))
    out.append("# HELP http_requests_total Total number of requests by method, status and handler.\n"
               "# TYPE http_requests_total counter\n")
    for (handler, method, status), n in sorted(http_requests.items()):
        out.append(f'http_requests_total{{handler="{handler}",method="{method}",status="{status}"}} {float(n)!r}\n')
    return "".join(out)
