"""Server metrics: Prometheus parsing, the name mapping, summaries, and the sampler against real servers."""

import http.client
import http.server
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import orjson
import pytest

from llmload.results.server_metrics import (
    METRICS_SCHEMA_VERSION,
    Increase,
    MetricsSample,
    MetricsSummary,
    counter_increase,
    parse_prometheus,
    read_samples,
    sample_from,
    summarize_samples,
)
from llmload.sim import start_sim, stop_sim
from llmload.sweep.sampler import MetricsSampler

REPO = Path(__file__).resolve().parents[1]

# Shaped like vLLM 0.11's /metrics (prometheus_client text format): two engines, _created gauges,
# a histogram, process metrics, a label value holding quotes, braces and a comma.
VLLM_011 = r'''# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 1234.0
python_gc_objects_collected_total{generation="1"} 56.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="openai/gpt-oss-20b"} 3.0
vllm:num_requests_running{engine="1",model_name="openai/gpt-oss-20b"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="openai/gpt-oss-20b"} 1.0
vllm:num_requests_waiting{engine="1",model_name="openai/gpt-oss-20b"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="openai/gpt-oss-20b"} 0.25
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="openai/gpt-oss-20b"} 2.0
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0",model_name="openai/gpt-oss-20b"} 1.7593e+09
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="openai/gpt-oss-20b"} 2000.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="openai/gpt-oss-20b"} 1200.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="openai/gpt-oss-20b"} 1500.0
vllm:prompt_tokens_total{engine="1",model_name="openai/gpt-oss-20b"} 500.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="openai/gpt-oss-20b"} 4000.0 1759300000000
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="openai/gpt-oss-20b"} 10.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="openai/gpt-oss-20b"} 2.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="openai/gpt-oss-20b"} 0.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="openai/gpt-oss-20b"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="openai/gpt-oss-20b"} 9.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="openai/gpt-oss-20b"} 12.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="openai/gpt-oss-20b"} 12.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="openai/gpt-oss-20b"} 0.9
vllm:time_to_first_token_seconds_created{engine="0",model_name="openai/gpt-oss-20b"} 1.7593e+09
# TYPE vllm:odd gauge
vllm:odd{model_name="a \"quoted\" {brace} name, with} a comma"} 7
vllm:nan_gauge{engine="0"} NaN
vllm:nan_gauge{engine="1"} 4
vllm:spec_decode_num_drafts_total{engine="0"} +Inf
'''

# Older vLLM (v0 engine): gpu_ names, the prefix cache as a hit-rate gauge, a counter without _total.
VLLM_OLD = '''# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B"} 4.0
vllm:num_requests_waiting{model_name="meta-llama/Llama-3.1-8B"} 6.0
vllm:num_requests_swapped{model_name="meta-llama/Llama-3.1-8B"} 0.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B"} 0.875
# TYPE vllm:gpu_prefix_cache_hit_rate gauge
vllm:gpu_prefix_cache_hit_rate{model_name="meta-llama/Llama-3.1-8B"} 0.4
# TYPE vllm:num_preemptions counter
vllm:num_preemptions{model_name="meta-llama/Llama-3.1-8B"} 5.0
vllm:prompt_tokens{model_name="meta-llama/Llama-3.1-8B"} 100.0
vllm:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B"} 300.0
'''


# -- parsing and mapping ---------------------------------------------------------------------------

@pytest.mark.pure
def test_parse_vllm_011_sums_label_sets_and_keeps_histogram_sum_count():
    v = parse_prometheus(VLLM_011)
    assert v["vllm:num_requests_running"] == 5.0  # engine 0 + engine 1
    assert v["vllm:prompt_tokens_total"] == 2000.0
    assert v["vllm:generation_tokens_total"] == 4000.0  # the trailing timestamp is not the value
    assert v["vllm:request_success_total"] == 12.0  # summed over finished_reason
    assert v["python_gc_objects_collected_total"] == 1290.0
    assert v["vllm:time_to_first_token_seconds_count"] == 12.0
    assert v["vllm:time_to_first_token_seconds_sum"] == pytest.approx(0.9)
    assert not any(k.endswith(("_bucket", "_created")) for k in v)
    assert v["vllm:odd"] == 7.0  # quotes, braces and commas inside a label value
    assert v["vllm:nan_gauge"] == 4.0  # NaN samples are skipped, not summed
    assert v["vllm:spec_decode_num_drafts_total"] == float("inf")


@pytest.mark.pure
def test_sample_from_vllm_011():
    s = sample_from(parse_prometheus(VLLM_011), t_s=1.5)
    assert s == MetricsSample(t_s=1.5, running=5.0, waiting=1.0, kv_cache_usage=0.25, preemptions_total=2.0,
                              prefix_cache_queries_total=2000.0, prefix_cache_hits_total=1200.0,
                              prompt_tokens_total=2000.0, generation_tokens_total=4000.0,
                              prefix_cache_hit_rate=None, ttft_sum_s=0.9, ttft_count=12.0, engine="vllm")


@pytest.mark.pure
def test_sample_from_old_names():
    s = sample_from(parse_prometheus(VLLM_OLD), t_s=0.0)
    assert (s.running, s.waiting, s.kv_cache_usage) == (4.0, 6.0, 0.875)
    assert s.preemptions_total == 5.0  # vllm:num_preemptions, no _total
    assert s.prompt_tokens_total == 100.0  # vllm:prompt_tokens, no _total
    assert s.generation_tokens_total == 300.0
    assert s.prefix_cache_hit_rate == 0.4
    assert s.prefix_cache_queries_total is None and s.prefix_cache_hits_total is None


@pytest.mark.pure
def test_sample_from_old_prefix_counters_and_missing_metrics():
    s = sample_from(parse_prometheus("vllm:gpu_prefix_cache_queries_total 80\nvllm:gpu_prefix_cache_hits 20\n"), 0.0)
    assert (s.prefix_cache_queries_total, s.prefix_cache_hits_total) == (80.0, 20.0)
    assert s.running is None and s.kv_cache_usage is None and s.generation_tokens_total is None


@pytest.mark.pure
def test_parse_not_prometheus_text():
    assert parse_prometheus("<html><body>Not Found</body></html>\n") == {}
    assert parse_prometheus("") == {}


# -- summaries ---------------------------------------------------------------------------------------

def _s(t_s, **kw):
    return MetricsSample(t_s=t_s, **kw)


@pytest.mark.pure
def test_summarize_means_maxima_deltas_hit_rate():
    series = [
        _s(0.0, running=2, waiting=0, kv_cache_usage=0.1, preemptions_total=1, prefix_cache_queries_total=100,
           prefix_cache_hits_total=10, prompt_tokens_total=1000, generation_tokens_total=0),
        _s(1.0, running=4, waiting=3, kv_cache_usage=0.5, preemptions_total=1, prefix_cache_queries_total=300,
           prefix_cache_hits_total=110, prompt_tokens_total=1500, generation_tokens_total=200),
        _s(2.0, running=6, waiting=0, kv_cache_usage=0.3, preemptions_total=4, prefix_cache_queries_total=500,
           prefix_cache_hits_total=210, prompt_tokens_total=2000, generation_tokens_total=500),
    ]
    m = summarize_samples(series)
    assert m.samples == 3
    assert (m.running_mean, m.running_max) == (4.0, 6.0)
    assert (m.waiting_mean, m.waiting_max) == (1.0, 3.0)
    assert m.kv_cache_usage_mean == pytest.approx(0.3) and m.kv_cache_usage_max == 0.5
    assert m.preemptions == 3.0
    assert m.prefix_cache_hit_rate == pytest.approx(200 / 400)
    assert (m.prompt_tokens, m.generation_tokens) == (1000.0, 500.0)
    assert m.generation_tok_s == pytest.approx(250.0)
    assert summarize_samples(list(reversed(series))) == m  # order of the input does not matter


@pytest.mark.pure
def test_summarize_counter_reset_counts_from_zero():
    series = [_s(0.0, generation_tokens_total=900), _s(1.0, generation_tokens_total=1000),
              _s(2.0, generation_tokens_total=50), _s(3.0, generation_tokens_total=150),
              _s(4.0, generation_tokens_total=None)]  # a sample where the metric was missing
    m = summarize_samples(series)
    assert m.generation_tokens == 100 + 50 + 100
    assert m.generation_tok_s == pytest.approx(250 / 3.0)  # over the span where the counter was seen
    assert m.running_mean is None and m.preemptions is None and m.prefix_cache_hit_rate is None


@pytest.mark.pure
def test_counter_increase_says_when_the_server_restarted():
    steady = [_s(0.0, e2e_count=3), _s(2.0, e2e_count=7)]
    assert counter_increase(steady, "e2e_count") == Increase(4.0, 2.0, False)
    assert counter_increase([_s(0.0, e2e_count=9), _s(1.0, e2e_count=2)], "e2e_count") == Increase(2.0, 1.0, True)
    assert counter_increase([_s(0.0, e2e_count=9), _s(1.0)], "e2e_count") is None  # one scrape has it: no increase


@pytest.mark.pure
def test_a_sample_reads_back_from_its_json_line(tmp_path):
    sample = _s(1.5, running=2.0, e2e_count=7.0, ttft_sum_s=0.25)
    path = tmp_path / "m.jsonl"
    path.write_bytes(sample.to_json_line() * 2)
    assert read_samples(path) == [sample, sample]
    assert orjson.loads(sample.to_json_line())["schema_version"] == METRICS_SCHEMA_VERSION


@pytest.mark.pure
def test_summarize_hit_rate_none_without_queries_and_old_gauge():
    idle = [_s(0.0, prefix_cache_queries_total=40, prefix_cache_hits_total=4),
            _s(1.0, prefix_cache_queries_total=40, prefix_cache_hits_total=4)]
    assert summarize_samples(idle).prefix_cache_hit_rate is None
    old = [_s(0.0, prefix_cache_hit_rate=0.2), _s(1.0, prefix_cache_hit_rate=0.4)]
    assert summarize_samples(old).prefix_cache_hit_rate == pytest.approx(0.3)


@pytest.mark.pure
def test_summarize_empty_and_single():
    assert summarize_samples([]) == MetricsSummary(samples=0)
    one = summarize_samples([_s(0.0, running=1, generation_tokens_total=10)])
    assert (one.samples, one.running_max, one.generation_tokens, one.generation_tok_s) == (1, 1.0, None, None)


@pytest.mark.pure
def test_read_samples_tolerates_torn_last_line(tmp_path):
    path = tmp_path / "server_metrics.jsonl"
    good = orjson.dumps({"schema_version": 1, "t_s": 0.5, "running": 2.0, "a_future_field": 1}) + b"\n"
    path.write_bytes(good + b'{"schema_version": 1, "t_s": 1.')
    assert read_samples(path) == [MetricsSample(t_s=0.5, running=2.0, engine="vllm")]  # version 1 read only vLLM's names


# -- the sampler against real servers --------------------------------------------------------------

@pytest.fixture(scope="module")
def sim_url():
    process, url = start_sim(["--fixed-ttft-ms", "5", "--fixed-itl-ms", "2"])
    yield url
    stop_sim(process)


def _stream_chats(base_url: str, until: threading.Event, done: list[int]) -> None:
    """Stream chat completions one after another until ``until`` is set; count the completed ones."""
    u = urllib.parse.urlsplit(base_url)
    body = orjson.dumps({"model": "openai/gpt-oss-20b", "messages": [{"role": "user", "content": "hi"}],
                         "stream": True, "max_tokens": 200})
    while not until.is_set():
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status == 200 and b"[DONE]" in data:
                done.append(1)
        finally:
            conn.close()


@pytest.mark.integration
def test_sampler_against_builtin_target(sim_url, tmp_path):
    path = tmp_path / "cell" / "server_metrics.jsonl"
    sampler = MetricsSampler(sim_url, path, interval_s=0.1)
    until, done = threading.Event(), []
    users = [threading.Thread(target=_stream_chats, args=(sim_url, until, done), daemon=True) for _ in range(3)]
    sampler.start()
    for u in users:
        u.start()
    time.sleep(1.5)
    until.set()
    for u in users:
        u.join(30)
    sampler.stop()
    samples = read_samples(path)
    assert sampler.failures == 0 and sampler.first_error is None, sampler.first_error
    assert len(samples) >= 10 and sampler.written == len(samples)
    assert done, "no chat completion finished"
    lines = path.read_bytes().splitlines()
    assert all(orjson.loads(line)["schema_version"] == METRICS_SCHEMA_VERSION for line in lines)
    ts = [s.t_s for s in samples]
    assert ts == sorted(ts) and ts[0] < 0.1
    grid_error_s = sorted(abs(t - round(t / 0.1) * 0.1) for t in ts)[len(ts) // 2]
    assert grid_error_s < 0.03  # on the fixed grid, not drifting
    m = summarize_samples(samples)
    assert m.samples == len(samples)
    assert m.running_max is not None and m.running_max >= 1
    assert m.generation_tokens is not None and m.generation_tokens > 0
    assert m.generation_tok_s is not None and m.generation_tok_s > 0
    assert m.kv_cache_usage_max is not None and 0 <= m.kv_cache_usage_max <= 1
    assert m.prompt_tokens is not None and m.prompt_tokens > 0


@pytest.mark.integration
def test_sampler_under_gevent(sim_url, tmp_path):
    """Under Locust, gevent patches threading and sockets: the sampler must run as a greenlet."""
    path = tmp_path / "m.jsonl"
    code = (
        "from gevent import monkey; monkey.patch_all()\n"
        "import sys, time, threading\n"
        "from pathlib import Path\n"
        "from llmload.results.server_metrics import read_samples\n"
        "from llmload.sweep.sampler import MetricsSampler\n"
        "assert threading.Thread.__module__.startswith('gevent'), threading.Thread.__module__\n"
        "s = MetricsSampler(sys.argv[1], Path(sys.argv[2]), interval_s=0.1)\n"
        "s.start(); time.sleep(0.55); s.stop()\n"
        "print(len(read_samples(Path(sys.argv[2]))), s.failures, s.first_error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, sim_url, str(path)], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    n, failures, _ = out.stdout.split(maxsplit=2)
    assert int(n) >= 4 and int(failures) == 0, out.stdout


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_error(404)

    def log_message(self, *args):
        pass


class _Html(_NotFound):
    def do_GET(self):  # noqa: N802
        body = b"<html><body>\n<h1>Welcome</h1>\n</body></html>\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(params=[_NotFound, _Html], ids=["404", "html"])
def no_metrics_url(request):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def refused_url():
    with socket.socket() as s:  # a port that was just free, now closed: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _run_without_metrics(base_url: str, path: Path) -> MetricsSampler:
    sampler = MetricsSampler(base_url, path, interval_s=0.05, timeout_s=1.0)
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    return sampler


def _assert_empty(sampler: MetricsSampler, path: Path, expect: str) -> None:
    assert sampler.failures > 1 and sampler.written == 0
    assert sampler.first_error is not None and "\n" not in sampler.first_error and expect in sampler.first_error
    samples = read_samples(path)
    assert samples == []
    assert summarize_samples(samples) == MetricsSummary(samples=0)


@pytest.mark.integration
def test_sampler_server_without_metrics(no_metrics_url, tmp_path):
    path = tmp_path / "m.jsonl"
    sampler = _run_without_metrics(no_metrics_url, path)
    _assert_empty(sampler, path, "/metrics")


@pytest.mark.integration
def test_sampler_refused_port(refused_url, tmp_path):
    path = tmp_path / "m.jsonl"
    sampler = _run_without_metrics(refused_url, path)
    _assert_empty(sampler, path, "refused")


@pytest.mark.pure
def test_sampler_unwritable_path_does_not_raise(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    sampler = MetricsSampler("http://127.0.0.1:9", blocker / "sub" / "m.jsonl", interval_s=0.05)
    sampler.start()
    sampler.stop()
    assert sampler.failures == 1 and "cannot open" in sampler.first_error
