"""METRICS_PORT and monitoring/: the run's figures in Prometheus's text, the board's queries against a real
Prometheus scraping a run and the built-in target, and the endpoint's guards."""

import json
import math
import random
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import REPO, run_cli
from factories import make_record
from llmload.credentials import check_metrics_host
from llmload.loadtest.runconfig import parse_run_args
from llmload.errors import ConfigError
from llmload.results.histogram import LogHistogram
from llmload.results.records import RequestRecord
from llmload.client.faults import FAULTS
from llmload.results.metrics import RUN_METRICS
from llmload.results.run_metrics import CHUNK_LINES, COUNTERS, LATENCIES, OUTCOMES, RunMetrics, render
from llmload.results.slo import is_good, parse_slos
from llmload.results.summary import measure
from llmload.sim import start_sim, stop_sim
from llmload.sim.engine import Engine
from llmload.sim.metrics import metrics_text
from llmload.sim.profiles import lookup_profile
from real_prometheus import Scraper, board_expressions, check_board, free_port, prometheus


def _record(i: int, **fields) -> RequestRecord:
    """A successful low-effort request of 91 output tokens in 91 events, 20 ms apart."""
    values = dict(request_id=f"r{i}", e2e_s=2.0, ttft_s=0.2, ttfvt_s=0.9, tpot_s=0.02, itl_s=[0.02] * 90,
                  prompt_tokens=100, completion_tokens=91, reasoning_tokens=40, effort="low")
    return make_record(**{**values, **fields})


def _families(metrics: RunMetrics) -> dict:
    """name -> {labels tuple (sorted, le kept): value} from the text the endpoint writes."""
    text = b"".join(render(metrics.families(users=3, in_flight=2))).decode()
    out: dict = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def _promql_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """histogram_quantile as Prometheus computes it: linear within the bucket the rank falls in."""
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    raise AssertionError("no +Inf bucket")


_NEVER_IDLE = """
import gevent
from llmload.loadtest.exporter import IDLE_WAIT_MAX_S, _Body

def busy():
    while True:
        gevent.sleep(0)  # always one callback ready: the loop never goes idle

busy_loop = gevent.spawn(busy)
sent = []
with gevent.Timeout(100 * IDLE_WAIT_MAX_S + 5.0, AssertionError("the scrape waited for an idle loop")):
    body = _Body([b"line\\n"] * 20, lambda: sent.append(True))
    chunks = list(body)
    body.close()
busy_loop.kill()
assert chunks == [b"line\\n"] * 20 and sent == [True]
print("sent whole")
"""


@pytest.mark.integration
def test_a_scrape_ends_while_the_load_process_loop_is_never_idle():
    """A busy run's loop always has work ready; the scrape still goes out whole (it timed out for a whole run). In a
    process of its own: importing the exporter imports Locust, whose gevent patching must stay out of this one."""
    done = subprocess.run([sys.executable, "-c", _NEVER_IDLE], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "sent whole", done.stderr[-2000:]


@pytest.mark.pure
@pytest.mark.parametrize("median_s", [0.004, 0.05, 0.8, 20.0])
def test_histogram_quantile_of_the_exported_buckets_is_within_5_percent(median_s):
    rng = random.Random(7)
    values = [median_s * rng.lognormvariate(0, 0.6) for _ in range(20_000)]
    metrics = RunMetrics("run", "h100", ["low"])
    for i, value in enumerate(values):
        metrics.add(_record(i, ttft_s=value))
    series = _families(metrics)["llmload_time_to_first_token_seconds_bucket"]
    buckets = sorted((float(dict(labels)["le"]), count) for labels, count in series.items())
    for q in (0.5, 0.9, 0.99):
        exact = float(np.quantile(values, q))
        assert _promql_quantile(q, buckets) == pytest.approx(exact, rel=0.05), q


@pytest.mark.pure
def test_buckets_run_from_1_ms_to_10_min_4_4_percent_apart():
    series = _families(RunMetrics("run", "h100", ["low"]))["llmload_e2e_request_latency_seconds_bucket"]
    bounds = sorted(float(dict(labels)["le"]) for labels in series)
    assert bounds[-1] == math.inf and 0.001 <= bounds[0] < 0.00105 and 600 <= bounds[-2] < 630
    ratios = [b / a for a, b in zip(bounds, bounds[1:-1])]
    assert max(ratios) == pytest.approx(2 ** (1 / 16), rel=1e-4) and min(ratios) == pytest.approx(2 ** (1 / 16), rel=1e-4)


@pytest.mark.pure
def test_every_counter_is_a_run_metric_row_whose_rate_is_the_summarys_figure():
    """Issue 31, item 3: the exporter's counters are RUN_METRICS's rows, so a counter's increase over the run's span
    is the figure summary.json reports for it: rates (goodput with the run's SLO), shares (numerator over base), counts."""
    slos = parse_slos("ttft_p90<=300ms")
    rng = random.Random(3)
    records = []
    for i in range(60):
        kind = i % 6
        fields = dict(start_monotonic_s=i * 0.5, ttft_s=rng.uniform(0.1, 0.5), answered=True,
                      completion_tokens=rng.randint(20, 90), reasoning_tokens=rng.randint(0, 19),
                      prompt_tokens=rng.randint(50, 150), answer_json=kind == 1, answer_valid=None if kind == 2 else kind != 3)
        if kind == 4:
            fields.update(finish_reason="length", answered=False)
        if kind == 5 and i % 4 == 1:
            fields.update(error="timeout", ttft_s=None, ttfvt_s=None, tpot_s=None, itl_s=[])
        records.append(_record(i, **fields))
    metrics = RunMetrics("run", "h100", ["low"], good=lambda r: is_good(r, slos))
    for record in records:
        metrics.add(record)
    span_s = (0.0, 40.0)
    measured = measure(records, span_s, slos)
    counters = {name: next(iter(series.values())) for name, series in _families(metrics).items()}
    exported = {c.row.name for c in COUNTERS}
    assert exported == {m.name for m in RUN_METRICS if m.prometheus} and "goodput_rps" in exported
    for row in RUN_METRICS:
        if not row.prometheus:
            continue
        total = counters[f"llmload_{row.prometheus}_total"]
        figure = getattr(measured, row.name)
        if row.kind == "rate":
            assert total / 40.0 == pytest.approx(figure), row.name
        elif row.kind == "share":
            assert total / counters[f"llmload_{row.prometheus}_base_total"] == pytest.approx(figure), row.name
        else:
            assert total == figure, row.name
    assert 0 < measured.goodput_rps < measured.rps and measured.lost_to_max_tokens == 10


@pytest.mark.pure
def test_goodput_counters_are_exported_only_with_an_slo():
    names = set(_families(RunMetrics("run", "h100", ["low"])))
    assert "llmload_output_tokens_total" in names and "llmload_good_requests_total" not in names


@pytest.mark.pure
def test_counts_outcomes_tokens_and_latencies_per_effort():
    metrics = RunMetrics("results/r1", "a100", ["low", "high"], scheduled_rps=2.5)
    metrics.add(_record(0))
    metrics.add(_record(1, effort="high", itl_s=[0.01, 0.03], ttfvt_s=None))
    metrics.add(_record(2, error="timeout", ttft_s=None, ttfvt_s=None, tpot_s=None, itl_s=[]))
    metrics.add(_record(3, error="http_503", effort="high", ttft_s=None, ttfvt_s=None, tpot_s=None, itl_s=[]))
    metrics.add(_record(4, error="interrupted"))
    metrics.add(_record(5, warmup=True))  # left out, as in summary.json
    families = _families(metrics)

    def value(name, effort, **labels):
        key = tuple(sorted({"run": "results/r1", "effort": effort, "api": "chat", "gpu": "a100", **labels}.items()))
        return families[name][key]

    assert value("llmload_requests_total", "low", outcome="ok") == 1
    assert value("llmload_requests_total", "low", outcome="timeout") == 1
    assert value("llmload_requests_total", "low", outcome="interrupted") == 1
    assert value("llmload_requests_total", "high", outcome="http_503") == 1
    assert value("llmload_requests_total", "high", outcome="connect") == 0  # every category is there from the start
    assert value("llmload_output_tokens_total", "low") == 91 and value("llmload_reasoning_tokens_total", "high") == 40
    assert value("llmload_total_tokens_total", "low") == 191
    assert value("llmload_inter_token_latency_seconds_count", "low") == 90
    assert value("llmload_inter_token_latency_seconds_sum", "high") == pytest.approx(0.04)
    assert value("llmload_inter_token_latency_seconds_bucket", "high", le="+Inf") == 2
    assert value("llmload_time_to_first_visible_token_seconds_count", "high") == 0
    for name in LATENCIES:
        assert value(f"llmload_{name}_count", "low") == 1 or name == "inter_token_latency_seconds"
    gauges = {name: next(iter(families[f"llmload_{name}"].values())) for name in
              ("users", "requests_in_flight", "scheduled_requests_per_second")}
    assert gauges == {"users": 3, "requests_in_flight": 2, "scheduled_requests_per_second": 2.5}


@pytest.mark.pure
def test_the_outcomes_are_ok_and_the_clients_fault_categories():
    assert OUTCOMES == ("ok", *(category for category in FAULTS if category != "http_<code>"))


@pytest.mark.pure
def test_add_all_fills_the_same_buckets_as_add():
    rng = random.Random(3)
    values = [0.0, 1e-7, 1e-6, 2.5e-6, 1e9] + [rng.lognormvariate(-5, 3) for _ in range(3000)]
    one, many = LogHistogram(), LogHistogram()
    for value in values:
        one.add(value)
    many.add_all(values)
    assert one == many


@pytest.mark.pure
def test_rendered_in_chunks_it_is_prometheus_clients_own_text():
    """Byte for byte what prometheus_client writes, escaped label values and Go's exponents (from a million) included."""
    metrics = RunMetrics('results/a "b"\\c\nd', "h100", ["low", "medium", "high"], scheduled_rps=1234567.5)
    for i in range(50):
        metrics.add(_record(i, effort=("low", "medium", "high")[i % 3]))
    metrics.add(_record(50, itl_s=[0.02] * 1_000_000, completion_tokens=1_000_001))
    metrics.add(_record(51, effort="high", itl_s=[0.01] * 3000))  # held, not folded yet: the scrape folds a copy
    registry = CollectorRegistry()
    registry.register(type("Run", (), {"collect": lambda self: metrics.families(1, 0)})())
    chunks = list(render(metrics.families(1, 0)))
    assert len(chunks) > 3 and max(chunk.count(b"\n") for chunk in chunks) < CHUNK_LINES + 320  # whole children
    text = b"".join(chunks)
    assert text == generate_latest(registry)
    assert b'inter_token_latency_seconds_count{api="chat",effort="low",gpu="h100",run="results/a \\"b\\"\\\\c\\nd"} 1.00153e+06' in text


@pytest.mark.pure
def test_the_built_in_targets_metrics_carry_every_vllm_series_the_board_reads():
    text = metrics_text(Engine(lookup_profile("h100", "gpt-oss-20b")), "gpt-oss-20b", {})
    served = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    read = {name for expr in board_expressions() for name in _series_names(expr) if name.startswith("vllm:")}
    assert read and read <= served, read - served


def _series_names(expr: str) -> set[str]:
    import re

    return set(re.findall(r"([a-z_:]+(?:_bucket|_total|_perc|_running|_waiting))\{", expr)) | \
        set(re.findall(r"(llmload_[a-z_]+)\{", expr))


@pytest.mark.pure
def test_every_llmload_series_the_board_reads_is_exported():
    metrics = RunMetrics("run", "h100", ["low"])
    metrics.add(_record(0))
    exported = set(_families(metrics))
    read = {name for expr in board_expressions() for name in _series_names(expr) if name.startswith("llmload_")}
    assert read and read <= exported, read - exported


@pytest.mark.pure
@pytest.mark.parametrize("host, login, refused", [
    ("0.0.0.0", "", True), ("10.0.0.5", "", True), ("gpu-box", "", True), ("10.0.0.5", "me:secret", False),
    ("127.0.0.1", "", False), ("127.0.0.2", "", False), ("localhost", "", False), ("::1", "", False)])
def test_metrics_off_loopback_need_metrics_login(monkeypatch, host, login, refused):
    monkeypatch.setenv("METRICS_LOGIN", login)
    if refused:
        with pytest.raises(ConfigError, match=f"METRICS_HOST={host} .*METRICS_LOGIN"):
            parse_run_args([f"METRICS_HOST={host}", "METRICS_PORT=9400"])
    else:
        assert parse_run_args([f"METRICS_HOST={host}", "METRICS_PORT=9400"]).metrics_host == host
    check_metrics_host(host, 0)  # METRICS_PORT off: nothing is served, anywhere


@pytest.mark.integration
def test_the_boards_queries_all_get_data_from_a_run_against_the_built_in_target(tmp_path):
    """A real Prometheus scrapes the suite and the built-in target; every PromQL expression of the board gets
    data, and the client's request counters in Prometheus are summary.json's counts."""
    process, url = start_sim(["--fixed-ttft-ms", "40", "--fixed-itl-ms", "2"])
    port = free_port()
    out = tmp_path / "run"
    try:
        with prometheus(tmp_path, f"127.0.0.1:{port}", url.removeprefix("http://")) as prom:
            started_s = time.time()
            done = run_cli("load", f"HOST={url}", f"OUT={out}", f"METRICS_PORT={port}", "EFFORT=mix:low=1,high=1",
                           "USERS=3", "DURATION=12s", timeout_s=180)
            assert done.returncode == 0, done.stderr[-3000:]
            check_board(prom, out, started_s)
    finally:
        stop_sim(process)


@pytest.mark.integration
def test_the_endpoint_never_shows_the_key_asks_for_its_login_and_refuses_a_foreign_host(tmp_path, monkeypatch):
    key = "sk-llmload-test-0123456789"
    process, url = start_sim(["--fixed-ttft-ms", "20", "--fixed-itl-ms", "5", "--api-key", key])
    port = free_port()
    monkeypatch.setenv("API_KEY", key)
    monkeypatch.setenv("METRICS_LOGIN", "prom:let-me-in")
    login = {"Authorization": "Basic cHJvbTpsZXQtbWUtaW4="}  # prom:let-me-in
    try:
        with Scraper(port, headers=login) as scraper, Scraper(port) as anonymous, \
                Scraper(port, headers={**login, "Host": f"rebound.example:{port}"}) as rebound:
            done = run_cli("load", f"HOST={url}", f"OUT={tmp_path / 'run'}", f"METRICS_PORT={port}", "USERS=2",
                           "REQUESTS=30", "MAX_TOKENS=20", timeout_s=180)
            assert done.returncode == 0, done.stderr[-3000:]
    finally:
        stop_sim(process)
    assert scraper.texts and "llmload_requests_total" in scraper.texts[-1]
    assert all(key not in text for text in scraper.texts)
    assert anonymous.refusals and set(anonymous.refusals) == {401} and not anonymous.texts
    assert rebound.refusals and set(rebound.refusals) == {403} and not rebound.texts  # DNS rebinding


def _requests_by_run(text: str) -> dict[str, float]:
    runs: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "llmload_requests_total":
                runs[sample.labels["run"]] = runs.get(sample.labels["run"], 0.0) + sample.value
    return runs


@pytest.mark.integration
def test_the_web_ui_serves_every_test_under_its_own_run(sim_fixed, tmp_path):
    web, port = free_port(), free_port()
    ui = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(REPO / "locustfile.py"), "--host", sim_fixed,
                           "--web-host", "127.0.0.1", "--web-port", str(web), "--max-tokens", "10", "--metrics-port", str(port)],
                          cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{web}"
    try:
        with Scraper(port, interval_s=0.3) as scraper:
            page = _wait_for(lambda: urllib.request.urlopen(base + "/", timeout=5).read().decode(), ui)
            form = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0].rstrip().rstrip(";"))
            assert "metrics_port" not in form["extra_options"] and "metrics_host" not in form["extra_options"]
            runs = []
            for effort in ("low", "high"):
                _post(base + "/swarm", {"user_count": 2, "spawn_rate": 2, "host": sim_fixed, "effort": effort, "gpu": "h100"})
                run = _wait_for(lambda: next(r for r in _requests_by_run(scraper.texts[-1]) if r not in runs
                                             and _requests_by_run(scraper.texts[-1])[r] > 0), ui)
                runs.append(run)
                _post(base + "/stop", {})
                _wait_for(lambda: (tmp_path / run / "summary.json").read_bytes(), ui)
    finally:
        ui.terminate()
        ui.wait(30)
    assert [r.endswith(f"-h100-gpt-oss-20b-{e}-u2") for r, e in zip(runs, ("low", "high"))] == [True, True]


def _post(url: str, data: dict) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, data=urllib.parse.urlencode(data).encode()), timeout=10) as r:
        return r.read()


def _wait_for(get, process, timeout_s: float = 60.0):
    """``get()``'s first answer that raises nothing."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return get()
        except (OSError, StopIteration, IndexError, KeyError):
            assert time.monotonic() < deadline and process.poll() is None, "timed out"
            time.sleep(0.3)


TWO_CELLS = """
name: two
server: {engine: llmload-sim, gpu: h100}
defaults: {DURATION: 2s, MAX_TOKENS: 20, PROMPTS: builtin, MODEL: gpt-oss-20b, USERS: 1}
grid:
  EFFORT: [low, high]
"""


@pytest.mark.integration
def test_sweep_cells_and_capacity_steps_serve_metrics_port_each_under_its_folder(tmp_path):
    scenario, sweep, capacity = tmp_path / "two.yaml", tmp_path / "sweep", tmp_path / "capacity"
    scenario.write_text(TWO_CELLS)
    port = free_port()
    with Scraper(port, interval_s=0.3) as scraper:
        done = run_cli("sweep", f"SCENARIO={scenario}", f"OUT={sweep}", "SPEEDUP=4", f"METRICS_PORT={port}", timeout_s=300)
        assert done.returncode == 0, done.stdout + done.stderr[-2000:]
        done = run_cli("capacity", "SLO=ttft_p90<=10s", "CAPACITY_START=1", "CAPACITY_MAX=2", "DURATION=2s", "MAX_TOKENS=10",
                       "EFFORT=low", "SPEEDUP=4", f"OUT={capacity}", f"METRICS_PORT={port}", timeout_s=300)
        assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    seen: dict[str, float] = {}
    for text in scraper.texts:
        seen.update(_requests_by_run(text))  # the last scrape of each run holds its final counts
    cells = sorted((sweep / "cells").iterdir()) + sorted((capacity / "cells").iterdir())
    assert len(cells) == 4 and sorted(seen) == sorted(map(str, cells))
    for cell in cells:
        summary = json.loads((cell / "summary.json").read_text())
        assert seen[str(cell)] == summary["requests_ok"] + summary["requests_failed"] > 0
        assert summary["config"]["metrics_port"] == port  # a runner setting: no part of the cell's settings or key
        assert "METRICS_PORT" not in json.loads((cell / "cell.json").read_text())["settings"]
