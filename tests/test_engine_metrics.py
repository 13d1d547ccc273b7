"""results/engine_metrics.py and server_metrics.sample_from: each engine's metric text read under its own names, and
what it does not expose said, never taken as 0. The texts are the engines' own: SGLang's documented example, and
expositions whose names and HELP lines are copied from each engine's collector (values made up)."""

import pytest

from llmload.errors import ControlCallFailed
from llmload.results.reconcile import server_account
from llmload.results.server_metrics import MetricsSample, parse_prometheus, prefix_cache_hit_rate, sample_from

pytestmark = pytest.mark.pure

# sgl-project/sglang docs/references/production_metrics.md (@40ef116f): its `curl http://localhost:30000/metrics`
# example, as printed there (most bucket lines left out; the suite reads none).
SGLANG_DOCS = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.28
# HELP sglang:cache_hit_rate The cache hit rate
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.007507552643049313
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.3518979474117756e+06
sglang:time_to_first_token_seconds_bucket{le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 11008.0
sglang:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 11008.0
# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.116093850019932e+06
sglang:e2e_request_latency_seconds_bucket{le="0.3",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 11228.0
sglang:e2e_request_latency_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 11228.0
# HELP sglang:time_per_output_token_seconds Histogram of time per output token in seconds.
# TYPE sglang:time_per_output_token_seconds histogram
sglang:time_per_output_token_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 866964.5791549598
sglang:time_per_output_token_seconds_bucket{le="0.005",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
sglang:time_per_output_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.400757e+06
sglang:time_per_output_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.400757e+06
# HELP sglang:func_latency_seconds Function latency in seconds
# TYPE sglang:func_latency_seconds histogram
sglang:func_latency_seconds_sum{name="generate_request"} 4.514771912145079
sglang:func_latency_seconds_count{name="generate_request"} 14007.0
# HELP sglang:num_running_reqs The number of running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 162.0
# HELP sglang:num_used_tokens The number of used tokens
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{model_name="meta-llama/Llama-3.1-8B-Instruct"} 123859.0
# HELP sglang:gen_throughput The generate throughput (token/s)
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="meta-llama/Llama-3.1-8B-Instruct"} 86.50814177726902
# HELP sglang:num_queue_reqs The number of requests in the waiting queue
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2826.0
"""

_T = 'model_name="openai/gpt-oss-120b",engine_type="unified",is_streaming="true"'
_S = 'model_name="openai/gpt-oss-120b",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
# SGLang 0.5.23 (srt/observability/metrics_collector.py): its names, labels and HELP strings, after requests finished.
SGLANG_0523 = f"""\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{{_S}}} 3.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{{_S}}} 1.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{{_S}}} 0.12
# HELP sglang:queue_time_seconds Histogram of queueing time in seconds.
# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_sum{{{_S}}} 0.5
sglang:queue_time_seconds_count{{{_S}}} 10.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{{_T}}} 1000.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{{_T}}} 2000.0
# HELP sglang:cached_tokens_total Number of cached prompt tokens by source (device/host/storage).
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{{{_T.replace('is_streaming="true"', 'cache_source="device"')}}} 300.0
sglang:cached_tokens_total{{{_T.replace('is_streaming="true"', 'cache_source="host"')}}} 100.0
# HELP sglang:num_requests_total Number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{{{_T}}} 10.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{{{_T}}} 2.0
sglang:time_to_first_token_seconds_count{{{_T}}} 10.0
# HELP sglang:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE sglang:inter_token_latency_seconds histogram
sglang:inter_token_latency_seconds_sum{{model_name="openai/gpt-oss-120b",engine_type="unified"}} 19.9
sglang:inter_token_latency_seconds_count{{model_name="openai/gpt-oss-120b",engine_type="unified"}} 1990.0
# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_sum{{{_T}}} 22.0
sglang:e2e_request_latency_seconds_count{{{_T}}} 10.0
"""

_L = 'model_name="openai/gpt-oss-120b",engine_type="pytorch"'
# trtllm-serve's /prometheus/metrics (tensorrt_llm/metrics/collector.py, 2026, metric_prefix "trtllm_"): its names and
# HELP strings.
TRTLLM = f"""\
# HELP trtllm_request_success_total Count of successfully processed requests.
# TYPE trtllm_request_success_total counter
trtllm_request_success_total{{{_L},finished_reason="stop"}} 8.0
trtllm_request_success_total{{{_L},finished_reason="length"}} 2.0
# HELP trtllm_e2e_request_latency_seconds Histogram of end to end request latency in seconds.
# TYPE trtllm_e2e_request_latency_seconds histogram
trtllm_e2e_request_latency_seconds_sum{{{_L}}} 22.0
trtllm_e2e_request_latency_seconds_count{{{_L}}} 10.0
# HELP trtllm_time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE trtllm_time_to_first_token_seconds histogram
trtllm_time_to_first_token_seconds_sum{{{_L}}} 2.0
trtllm_time_to_first_token_seconds_count{{{_L}}} 10.0
# HELP trtllm_time_per_output_token_seconds Histogram of time per output token in seconds.
# TYPE trtllm_time_per_output_token_seconds histogram
trtllm_time_per_output_token_seconds_sum{{{_L}}} 0.1
trtllm_time_per_output_token_seconds_count{{{_L}}} 10.0
# HELP trtllm_request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE trtllm_request_queue_time_seconds histogram
trtllm_request_queue_time_seconds_sum{{{_L}}} 0.5
trtllm_request_queue_time_seconds_count{{{_L}}} 10.0
# HELP trtllm_prompt_tokens_total Cumulative number of prompt (input) tokens processed.
# TYPE trtllm_prompt_tokens_total counter
trtllm_prompt_tokens_total{{{_L}}} 1000.0
# HELP trtllm_generation_tokens_total Cumulative number of generation (output) tokens produced.
# TYPE trtllm_generation_tokens_total counter
trtllm_generation_tokens_total{{{_L}}} 2000.0
# HELP trtllm_kv_cache_utilization KV cache utilization
# TYPE trtllm_kv_cache_utilization gauge
trtllm_kv_cache_utilization{{{_L}}} 0.2
# HELP trtllm_num_requests_running Number of active requests
# TYPE trtllm_num_requests_running gauge
trtllm_num_requests_running{{{_L}}} 3.0
# HELP trtllm_num_requests_waiting Number of queued requests
# TYPE trtllm_num_requests_waiting gauge
trtllm_num_requests_waiting{{{_L}}} 0.0
"""

# TensorRT-LLM 1.0 to 1.1 (tensorrt_llm/metrics/collector.py @89fd9b74): five unprefixed names; labels as trtllm-serve
# set them then ("undefined").
TRTLLM_10 = """\
# HELP request_success_total Count of successfully processed requests.
# TYPE request_success_total counter
request_success_total{model_name="undefined",engine_type="undefined",finished_reason="stop"} 10.0
# HELP e2e_request_latency_seconds Histogram of end to end request latency in seconds.
# TYPE e2e_request_latency_seconds histogram
e2e_request_latency_seconds_sum{model_name="undefined",engine_type="undefined"} 22.0
e2e_request_latency_seconds_count{model_name="undefined",engine_type="undefined"} 10.0
# HELP time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE time_to_first_token_seconds histogram
time_to_first_token_seconds_sum{model_name="undefined",engine_type="undefined"} 2.0
time_to_first_token_seconds_count{model_name="undefined",engine_type="undefined"} 10.0
# HELP time_per_output_token_seconds Histogram of time per output token in seconds.
# TYPE time_per_output_token_seconds histogram
time_per_output_token_seconds_sum{model_name="undefined",engine_type="undefined"} 0.1
time_per_output_token_seconds_count{model_name="undefined",engine_type="undefined"} 10.0
# HELP request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE request_queue_time_seconds histogram
request_queue_time_seconds_sum{model_name="undefined",engine_type="undefined"} 0.5
request_queue_time_seconds_count{model_name="undefined",engine_type="undefined"} 10.0
"""


def _sample(text: str, t_s: float = 1.0) -> MetricsSample:
    return sample_from(parse_prometheus(text), t_s)


def test_sglangs_documented_example_reads_under_its_names():
    s = _sample(SGLANG_DOCS)
    assert s == MetricsSample(t_s=1.0, running=162.0, waiting=2826.0, kv_cache_usage=0.28,
                              prefix_cache_queries_total=8128902.0, prompt_tokens_total=8128902.0,
                              generation_tokens_total=7557572.0, prefix_cache_hit_rate=0.007507552643049313,
                              ttft_sum_s=2351897.9474117756, ttft_count=11008.0, itl_sum_s=866964.5791549598,
                              itl_count=7400757.0, e2e_sum_s=3116093.850019932, e2e_count=11228.0, engine="sglang")
    # That SGLang had no cached-token counter (nor sglang:num_requests_total, which came with it): no hit count, not 0.
    assert s.prefix_cache_hits_total is None and s.queue_sum_s is None and s.preemptions_total is None


def test_sglang_0_5_23_sums_its_label_sets_and_counts_cached_tokens_as_hits():
    s = _sample(SGLANG_0523)
    assert (s.engine, s.running, s.waiting, s.kv_cache_usage) == ("sglang", 3.0, 1.0, 0.12)
    assert (s.prompt_tokens_total, s.generation_tokens_total, s.e2e_count) == (1000.0, 2000.0, 10.0)
    assert (s.prefix_cache_queries_total, s.prefix_cache_hits_total) == (1000.0, 400.0)  # device + host
    assert (s.itl_sum_s, s.itl_count, s.queue_sum_s, s.queue_count) == (19.9, 1990.0, 0.5, 10.0)


def test_trtllm_reads_under_its_prefix():
    s = _sample(TRTLLM)
    assert s == MetricsSample(t_s=1.0, running=3.0, waiting=0.0, kv_cache_usage=0.2, prefix_cache_queries_total=1000.0,
                              prefix_cache_hits_total=0.0, prompt_tokens_total=1000.0, generation_tokens_total=2000.0,
                              ttft_sum_s=2.0, ttft_count=10.0, itl_sum_s=0.1, itl_count=10.0, e2e_sum_s=22.0,
                              e2e_count=10.0, queue_sum_s=0.5, queue_count=10.0, engine="trtllm")
    # its cached-token counter moves only when a request found some: absent beside its prompt counter, it is 0


def test_trtllm_1_0s_unprefixed_names():
    s = _sample(TRTLLM_10)
    assert (s.engine, s.e2e_count, s.ttft_sum_s, s.itl_count, s.queue_sum_s) == ("trtllm-1.0", 10.0, 2.0, 10.0, 0.5)
    assert s.prompt_tokens_total is None and s.generation_tokens_total is None and s.prefix_cache_hits_total is None


def test_trtllm_serves_json_at_metrics_which_holds_no_engine():
    assert _sample('[{"numActiveRequests": 1, "kvCacheStats": {"usedNumBlocks": 3}}]') == MetricsSample(t_s=1.0)


def _before(engine: str) -> MetricsSample:
    """A scrape before any request of an engine whose request families appear once written: gauges only."""
    return MetricsSample(t_s=0.0, running=0.0, waiting=0.0, kv_cache_usage=0.0, engine=engine)


def test_sglangs_account_from_a_scrape_before_its_request_families_existed():
    account = server_account(_before("sglang"), _sample(SGLANG_0523))
    assert account is not None and account.engine == "sglang"
    assert (account.requests, account.prompt_tokens, account.generation_tokens) == (10, 1000, 2000)
    assert (account.mean_ttft_ms, account.mean_e2e_ms, account.mean_queue_ms) == (200.0, 2200.0, 50.0)
    assert account.mean_itl_ms == pytest.approx(10.0) and account.prefix_cache_hit_rate == 0.4
    assert account.not_exposed == ("preemptions: not in SGLang's metrics after the run (a version without it, or "
                                   "nothing counted)",)
    assert any(note.startswith("preemptions: SGLang's retractions") for note in account.notes)


def test_trtllms_itl_is_said_to_be_per_request_tpot_and_preemptions_not_exposed():
    account = server_account(_before("trtllm"), _sample(TRTLLM))
    assert account is not None and (account.requests, account.generation_tokens, account.mean_itl_ms) == (10, 2000, 10.0)
    assert account.prefix_cache_hit_rate == 0.0
    assert account.not_exposed == ("preemptions: not exposed by trtllm-serve (it has no preemption counter)",)
    assert any("mean of per-request TPOTs" in note for note in account.notes)


def test_what_trtllm_1_0_lacks_is_said_not_zero():
    account = server_account(MetricsSample(t_s=0.0), _sample(TRTLLM_10))
    assert account is not None and account.requests == 10  # every family appeared after the first scrape
    assert (account.prompt_tokens, account.generation_tokens, account.prefix_cache_hit_rate) == (None, None, None)
    why = "TensorRT-LLM 1.0 to 1.1 expose five request metrics (unprefixed), no token or cache counters"
    assert account.not_exposed == tuple(f"{figure}: not exposed by trtllm-serve ({why})" for figure in (
        "prompt tokens", "generation tokens", "prefix-cache hit rate", "preemptions", "KV-cache usage"))


def test_vllm_exposes_every_figure():
    before = MetricsSample(t_s=0.0, **{name: 0.0 for name in (
        "running", "waiting", "kv_cache_usage", "preemptions_total", "prefix_cache_queries_total",
        "prefix_cache_hits_total", "prompt_tokens_total", "generation_tokens_total", "ttft_sum_s", "ttft_count",
        "itl_sum_s", "itl_count", "e2e_sum_s", "e2e_count", "queue_sum_s", "queue_count")}, engine="vllm")
    after = MetricsSample(**{**before.__dict__, "t_s": 1.0, "e2e_count": 2.0, "e2e_sum_s": 1.0})
    account = server_account(before, after)
    assert account is not None and account.not_exposed == () and account.notes == ()


def test_a_family_absent_before_and_present_after_started_at_zero_only_for_such_engines():
    after = MetricsSample(t_s=1.0, prefix_cache_hits_total=30.0, prefix_cache_queries_total=100.0, engine="sglang")
    assert prefix_cache_hit_rate(MetricsSample(t_s=0.0, engine="sglang"), after) == 0.3
    vllm_after = MetricsSample(**{**after.__dict__, "engine": "vllm"})  # vLLM shows its families from the start
    assert prefix_cache_hit_rate(MetricsSample(t_s=0.0, engine="vllm"), vllm_after) is None


def test_a_trtllm_without_prometheus_metrics_is_said_in_the_run(monkeypatch, tmp_path):
    import llmload.loadtest.server_window as server_window
    from llmload.results.report import _server_account

    def answer(url: str, api_key: str = "", timeout_s: float = 10.0, json_body: object = None) -> bytes:
        if url.endswith("/prometheus/metrics"):
            raise ControlCallFailed(url, "HTTP 404 Not Found", 404)
        return b'[{"numActiveRequests": 0, "numQueuedRequests": 0}]'

    monkeypatch.setattr(server_window, "request", answer)
    window = server_window.ServerWindow("http://127.0.0.1:8000", "")
    assert window.close(3, tmp_path / "server_window.jsonl") == () and window.describe()["path"] is None
    missing = window.describe()["missing"]
    assert "GET /metrics is JSON, not Prometheus text (trtllm-serve's iteration stats)" in missing
    assert "GET /prometheus/metrics answered HTTP 404 Not Found" in missing and "return_perf_metrics: true" in missing
    title, said = _server_account(None, missing=missing)
    assert "Server's own account" in title and said == f"None: {missing}"
