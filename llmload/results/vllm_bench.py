"""vllm_bench.json: a run's records in the form ``vllm bench serve --save-result`` writes.

Same keys and units as vLLM's bench (benchmarks/serve.py): throughputs per second, ``*_ms``
statistics (``mean_``, ``median_``, ``std_`` (population), ``p90_``, ``p99_``) of the metrics it
reports (ttft, tpot, itl and e2el: results/metrics.py's VLLM_METRICS), and per-request arrays in
seconds; a failed request has ttft 0, no itls, latency 0 and output length 0, as there. Where the suite counts differently, the ``llmload`` block says how.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import orjson

from llmload.system.files import write_atomic
from llmload.results.metrics import VLLM_METRICS
from llmload.results.records import RequestRecord, run_span_s

__all__ = ["VLLM_BENCH_FILE", "PERCENTILES", "vllm_bench_result", "write_vllm_bench"]

VLLM_BENCH_FILE = "vllm_bench.json"
PERCENTILES = (90, 99)
INPUT_TOKENS_CONVENTION = (
    "input_lens and total_input_tokens are the server's usage.prompt_tokens: the whole prompt as rendered for the "
    "model (for gpt-oss the harmony frame, about 67 tokens, plus the user message), as vLLM bench 0.32 takes them "
    "for chat requests whenever the server sends usage; a server without usage leaves our input_lens 0, where "
    "vLLM bench falls back to the dataset prompt's own length")


def _stats(name: str, values_s: Sequence[float]) -> dict[str, float]:
    """vLLM's statistics of one metric in ms; an empty sample gives 0, as ``np.mean(values or 0)`` does there."""
    a = np.asarray(values_s if len(values_s) else [0.0], dtype=float) * 1000.0
    out = {f"mean_{name}_ms": float(a.mean()), f"median_{name}_ms": float(np.median(a)), f"std_{name}_ms": float(a.std())}
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = float(np.percentile(a, p))
    return out


def _peak_output_tokens_per_s(ok: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's max_output_tokens_per_s (token events per whole second) and max_concurrent_requests."""
    if not ok:
        return 0.0, 0
    first = min(r.start_monotonic_s for r in ok)
    buckets: dict[int, int] = {}
    events: list[tuple[float, int]] = []
    for r in ok:
        events += [(r.start_monotonic_s, 1), (r.start_monotonic_s + r.e2e_s, -1)]
        if r.ttft_s is None:
            continue
        t = r.start_monotonic_s + r.ttft_s
        for gap in (0.0, *r.itl_s):
            t += gap
            buckets[int(t - first)] = buckets.get(int(t - first), 0) + 1
    running = peak = 0
    for _, delta in sorted(events):
        running += delta
        peak = max(peak, running)
    return float(max(buckets.values(), default=0)), peak


def vllm_bench_result(records: Iterable[RequestRecord], config: dict[str, Any]) -> dict[str, Any]:
    """The dict ``vllm bench serve --save-result`` would write for these records (warm-ups left out)."""
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    start_s, end_s = run_span_s(measured)
    duration_s = end_s - start_s
    output_lens = [(r.completion_tokens or 0) if r.ok else 0 for r in measured]
    total_input = sum(r.prompt_tokens or 0 for r in ok)
    total_output = sum(output_lens)
    per_s = (lambda n: n / duration_s) if duration_s > 0 else (lambda n: 0.0)
    peak_tok_s, peak_running = _peak_output_tokens_per_s(ok)
    users = config.get("users")
    result: dict[str, Any] = {
        "date": time.strftime("%Y%m%d-%H%M%S"), "endpoint_type": "openai-chat", "backend": "openai-chat", "label": "llmload",
        "model_id": config.get("model"), "tokenizer_id": None, "num_prompts": len(measured),
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": users,
        "duration": duration_s, "completed": len(ok), "failed": len(measured) - len(ok),
        "total_input_tokens": total_input, "total_output_tokens": total_output,
        "request_throughput": per_s(len(ok)), "request_goodput": None,
        "output_throughput": per_s(total_output), "total_token_throughput": per_s(total_input + total_output),
        "input_lens": [r.prompt_tokens or 0 for r in measured],
        "output_lens": output_lens,
        "ttfts": [(r.ttft_s or 0.0) if r.ok else 0.0 for r in measured],
        "itls": [list(r.itl_s) if r.ok else [] for r in measured],
        "latencies": [r.e2e_s if r.ok else 0.0 for r in measured],
        "start_times": [r.start_monotonic_s for r in measured],
        "generated_texts": ["" for _ in measured],
        "errors": ["" if r.ok else f"{r.error}: {r.error_detail or ''}".rstrip(": ") for r in measured],
        "max_output_tokens_per_s": peak_tok_s, "max_concurrent_requests": peak_running,
    }
    for metric in VLLM_METRICS:
        result.update(_stats(metric.vllm or "", metric.sample_s(ok)))
    result["llmload"] = {
        "schema_version": 1,
        "input_tokens": INPUT_TOKENS_CONVENTION,
        "latency": "send to the end of the stream ([DONE]); vLLM bench ends it at the last chunk with choices",
        "duration": "first request's start to the last request's end (vLLM bench: its whole wall time)",
        "failed": "every request that did not succeed, including streams cut off at the end of the run (interrupted)",
        "generated_texts": "not kept by the suite: empty strings",
        "start_times": "time.monotonic() seconds",
        "percentiles": list(PERCENTILES),
        "served_by": config.get("served_by"),
    }
    return result


def write_vllm_bench(run_dir: Path, records: Iterable[RequestRecord], config: dict[str, Any]) -> Path:
    return write_atomic(run_dir / VLLM_BENCH_FILE, orjson.dumps(vllm_bench_result(records, config), option=orjson.OPT_INDENT_2) + b"\n")
