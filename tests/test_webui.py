"""The web UI's LLM view: series over time (data, not pixels), table rows, the run folder named from the form."""

import json
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from conftest import REPO
from factories import make_record
from llmload.errors import ControlCallFailed
from llmload.loadtest.live import WINDOW_S, LiveStats, TargetLabels


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def record(start, ttft, itl, tokens, reason="stop", answered=True, ttfvt=None, error=None):
    return make_record(start_unix_s=start, ttft_s=ttft, ttfvt_s=ttfvt, tpot_s=None, itl_s=itl, prompt_tokens=10,
                       completion_tokens=tokens, reasoning_tokens=2, finish_reason=reason, answered=answered, error=error)


@pytest.mark.pure
def test_series_per_window_and_rows():
    clock = Clock(1000.0)
    live = LiveStats(clock)
    live.add(record(1000.0, 0.1, [0.5, 0.5], 3, ttfvt=0.6))  # events at 0.1, 0.6, 1.1 s: window 0
    live.add(record(1004.0, 0.2, [2.0], 4, reason="length", answered=False))  # 4.2 s (window 0) and 6.2 s (window 1)
    live.add(record(1001.0, 0.1, [], 0, error="http_500"))
    clock.now = 1000.0 + WINDOW_S + 1  # window 1 still filling: left out
    points = live.series()["points"]
    assert len(points) == 1
    (p,) = points
    # Quantiles from log-spaced buckets (within 2.2%): the median of two TTFTs (100, 200 ms) is the lower one.
    assert p["t_s"] == WINDOW_S and p["ttft_n"] == 2 and p["ttft_ms_p50"] == pytest.approx(100.0, rel=0.025)
    assert p["itl_ms_p50"] == pytest.approx(500.0, rel=0.025) and p["ttfvt_ms_p50"] == pytest.approx(600.0, rel=0.025)
    assert p["output_tok_s"] == pytest.approx((3 + 2) / WINDOW_S)  # request 2's 4 tokens: 2 per event, one event here
    clock.now = 1000.0 + 2 * WINDOW_S
    assert [q["t_s"] for q in live.series()["points"]] == [WINDOW_S, 2 * WINDOW_S]
    rows = {r["metric"]: r for r in live.rows()}
    assert rows["answered share (%)"]["mean"] == 50.0
    assert rows["finish_reason stop (% of requests)"]["count"] == 1
    assert rows["finish_reason length (% of requests)"]["count"] == 1
    assert rows["error http_500 (% of requests)"]["count"] == 1
    assert rows["reasoning share of output (%)"]["mean"] == round(100 * 4 / 7, 2)  # rows are rounded to 0.01
    assert rows["output tokens/s (mean so far)"]["mean"] == round(7 / (2 * WINDOW_S), 2)


@pytest.mark.pure
def test_the_host_is_labelled_a_rehearsal_only_when_it_is_the_built_in_target():
    asked = []

    def identity_of(host, timeout_s):
        asked.append(host)
        if host == "http://down":
            raise ControlCallFailed(host, "connection refused")
        return {"served_by": "llmload.sim", "gpu_profile": "a100", "speedup": 20.0} if host == "http://sim" else None

    labels = TargetLabels(identity_of)
    assert labels.known("http://sim") == ""  # not asked yet
    assert labels("http://sim") == ("REHEARSAL (built-in target playing a100, SPEEDUP 20x), simulated timings (not a measurement); "
                                    "Locust's tables and charts: the sped-up target's times; Streaming metrics and the LLM charts: "
                                    "predicted for a100")
    assert labels("http://vllm") == "" and labels("http://down") == ""
    assert labels("http://sim") == labels.known("http://sim") and labels("http://vllm") == ""
    labels("http://down")
    assert asked == ["http://sim", "http://vllm", "http://down", "http://down"]  # an answer is kept; no answer is asked again


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, data=None):
    body = None if data is None else urllib.parse.urlencode(data).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=10) as response:
        return response.read()


@pytest.mark.integration
def test_the_web_ui_serves_the_series_and_names_the_run_from_the_form(sim_fixed, tmp_path):
    port = _free_port()
    ui = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(REPO / "locustfile.py"), "--host", sim_fixed,
                           "--web-host", "127.0.0.1", "--web-port", str(port), "--max-tokens", "10"],
                          cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # results/ lands in tmp_path
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                page = _get(base + "/").decode()
                break
            except OSError:
                assert time.monotonic() < deadline and ui.poll() is None, "the web UI did not start"
                time.sleep(0.3)
        assert "llmload-charts" in page and "Mean output tokens" in page  # the injected script
        form = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0].rstrip().rstrip(";"))
        names = list(form["extra_options"])
        assert names.index("gpu") < names.index("model") < names.index("effort") < names.index("prompts") and names[-1] == "api_key"
        assert "random:IN:OUT" in form["extra_options"]["prompts"]["help_text"]
        assert b"<svg" in _get(base + "/llmload/charts")
        _get(base + "/swarm", {"user_count": 3, "spawn_rate": 3, "host": sim_fixed, "effort": "high", "gpu": "h100"})
        deadline = time.monotonic() + 60
        while not (series := json.loads(_get(base + "/llmload/series")))["points"]:
            assert time.monotonic() < deadline, "no point in the series"
            time.sleep(0.5)
        point = series["points"][0]
        assert {"t_s", "ttft_ms_p50", "ttft_ms_p90", "ttfvt_ms_p50", "itl_ms_p50", "itl_ms_p90", "output_tok_s"} <= point.keys()
        # the target's fixed 100 ms TTFT, within the live histogram's bucket (2.2%)
        assert point["ttft_ms_p50"] >= 100.0 * 0.975 and point["output_tok_s"] > 0
        assert series["run_dir"].endswith("-h100-gpt-oss-20b-high-u3")  # named from the form, not from the start
        rows = json.loads(_get(base + "/stats/requests"))["extended_stats"][0]["data"]
        assert rows[0]["metric"] == f"results folder: {series['run_dir']}"
        assert json.loads(_get(base + "/llmload/target"))["rehearsal"].startswith("REHEARSAL (built-in target playing h100")
        rows = json.loads(_get(base + "/stats/requests"))["extended_stats"][0]["data"]  # the table says it once known
        assert rows[1]["metric"] == f"target: {sim_fixed}: REHEARSAL (built-in target playing h100), simulated timings (not a measurement)"
        _get(base + "/stop", {})
        deadline = time.monotonic() + 60
        while not (tmp_path / series["run_dir"] / "summary.json").exists():
            assert time.monotonic() < deadline, "no summary.json in the folder the UI showed"
            time.sleep(0.3)
    finally:
        ui.terminate()
        ui.wait(30)


@pytest.mark.integration
def test_make_ui_against_the_built_in_target_does_not_offer_what_it_cannot_change(tmp_path):
    port = _free_port()
    ui = subprocess.Popen([sys.executable, "-m", "llmload", "ui", f"WEB_PORT={port}", "USERS=2"], cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                page = _get(f"http://127.0.0.1:{port}/").decode()
                break
            except OSError:
                assert time.monotonic() < deadline and ui.poll() is None, "the web UI did not start"
                time.sleep(0.3)
        form = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0].rstrip().rstrip(";"))
        assert "gpu" not in form["extra_options"] and "speedup" not in form["extra_options"]
        assert "effort" in form["extra_options"] and "max_tokens" in form["extra_options"]
        # Beside the host, the page says what the console banner says (its script asks /llmload/target).
        target = json.loads(_get(f"http://127.0.0.1:{port}/llmload/target"))
        assert target["host"] == form["host"] and target["host"].startswith("http://127.0.0.1:")
        assert target["rehearsal"] == ("REHEARSAL (built-in target playing h100, UNVALIDATED profile), simulated timings "
                                       "(not a measurement)")
        assert "/llmload/target" in page and "llmload-rehearsal" in page
        assert "/llmload/target" in _get(f"http://127.0.0.1:{port}/llmload/charts").decode()
    finally:
        ui.terminate()
        banner, _ = ui.communicate(timeout=30)
    assert "REHEARSAL (built-in target playing h100, UNVALIDATED profile)" in banner and "named when the test starts" in banner
    assert "UNVALIDATED prediction: extrapolated from" in banner
    assert f"{target['host']}: {target['rehearsal']}" in banner
