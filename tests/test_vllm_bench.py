"""vllm_bench.json: readable by scripts written for ``vllm bench serve --save-result``."""

import json

import numpy as np
import pytest

from conftest import run_cli
from factories import make_record
from llmload.results.vllm_bench import vllm_bench_result

# The keys vLLM's benchmarks/serve.py (main_async's result_json, benchmark()'s result and process_one_metric)
# writes for a generation benchmark, copied from its source; percentiles as with --metric-percentiles 90,99.
VLLM_KEYS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate", "burstiness",
    "max_concurrency", "duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
    "request_goodput", "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls",
    "latencies", "start_times", "generated_texts", "errors", "max_output_tokens_per_s", "max_concurrent_requests",
    *(f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "std", "p90", "p99")),
}
PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "generated_texts", "errors")


def record(n, start_s, e2e_s, ttft_s, itl_s, prompt, output, error=None, warmup=False):
    return make_record(request_id=f"r{n}", start_monotonic_s=start_s, e2e_s=e2e_s, ttft_s=ttft_s, ttfvt_s=ttft_s, itl_s=itl_s,
                       prompt_tokens=prompt, completion_tokens=output, reasoning_tokens=0, error=error, warmup=warmup)


@pytest.mark.pure
def test_literal_records():
    records = [
        record(0, 100.0, 1.0, 0.2, [0.4, 0.4], 10, 3),
        record(1, 100.5, 1.5, 0.4, [0.5, 0.6], 20, 3),
        record(2, 101.0, 0.3, None, [], None, None, error="http_500"),
        record(3, 99.0, 0.1, 0.05, [], 5, 1, warmup=True),
    ]
    r = vllm_bench_result(records, {"model": "m", "users": 2})
    assert VLLM_KEYS <= r.keys()
    assert r["num_prompts"] == 3 and r["completed"] == 2 and r["failed"] == 1
    assert r["duration"] == pytest.approx(2.0)  # 100.0 to 102.0
    assert r["request_throughput"] == pytest.approx(1.0)
    assert r["total_input_tokens"] == 30 and r["total_output_tokens"] == 6
    assert r["output_throughput"] == pytest.approx(3.0) and r["total_token_throughput"] == pytest.approx(18.0)
    assert r["median_ttft_ms"] == pytest.approx(300.0) and r["std_ttft_ms"] == pytest.approx(100.0)  # population std
    assert r["mean_itl_ms"] == pytest.approx(475.0) and r["p99_e2el_ms"] == pytest.approx(1495.0)
    assert r["mean_tpot_ms"] == pytest.approx(((0.8 / 2) + (1.1 / 2)) / 2 * 1000)
    # Failed requests as vLLM writes them: ttft 0, no itls, latency 0, output 0, the error text.
    assert r["ttfts"] == [0.2, 0.4, 0.0] and r["itls"] == [[0.4, 0.4], [0.5, 0.6], []] and r["latencies"] == [1.0, 1.5, 0.0]
    assert r["output_lens"] == [3, 3, 0] and r["errors"][:2] == ["", ""] and r["errors"][2].startswith("http_500")
    assert r["max_concurrent_requests"] == 2 and r["max_output_tokens_per_s"] == 3.0
    assert "67 tokens" in r["llmload"]["input_tokens"]


@pytest.mark.pure
def test_no_requests_gives_zeros_not_errors():
    r = vllm_bench_result([], {})
    assert r["completed"] == 0 and r["request_throughput"] == 0.0 and r["median_ttft_ms"] == 0.0 and r["ttfts"] == []


@pytest.mark.integration
def test_a_run_writes_it_and_a_vllm_script_reads_it(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed}", "USERS=2", "DURATION=2s", "MAX_TOKENS=8", "EFFORT=low", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads((out / "vllm_bench.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert VLLM_KEYS <= data.keys()
    n = data["num_prompts"]
    assert n == summary["requests_ok"] + summary["requests_failed"] + summary["requests_interrupted"]
    assert all(len(data[k]) == n for k in PER_REQUEST)
    # What a script written for vLLM's file computes from it (arrays in seconds, statistics in ms).
    ttfts_s = [t for t, e in zip(data["ttfts"], data["errors"]) if not e]
    assert np.median(ttfts_s) * 1000 == pytest.approx(data["median_ttft_ms"])
    assert data["median_ttft_ms"] == pytest.approx(summary["ttft_ms"]["median"])
    assert data["p99_itl_ms"] == pytest.approx(summary["itl_ms"]["p99"])
    assert data["completed"] == summary["requests_ok"] and data["request_throughput"] == pytest.approx(summary["rps"])
    assert data["llmload"]["served_by"]["name"] == "llmload.sim"
