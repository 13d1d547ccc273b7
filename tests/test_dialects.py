"""The built-in target speaking as each engine (DIALECT, llmload/sim/dialects.py), measured by a run and started by a
tune as the real engine would be: its reasoning and answer tokens, its usage, its own metrics under its own names, what
it lacks said."""

import json
import sys

import pytest

from conftest import REPO, run_cli
from llmload.results.records import read_records
from llmload.sim import start_sim, stop_sim
from llmload.system.listening import free_loopback_port
from llmload.tune.keeper import group_members
from llmload.tune.server import ManagedServer, fill_port

pytestmark = pytest.mark.integration

ENGINE_TITLE = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "trtllm-serve"}


@pytest.mark.parametrize("dialect", ["vllm", "sglang", "trtllm"])
def test_a_run_measures_each_engine_under_its_own_names(dialect, tmp_path):
    process, url = start_sim(["--dialect", dialect, "--fixed-ttft-ms", "30", "--fixed-itl-ms", "2"])
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "USERS=2", "REQUESTS=6", "EFFORT=low", f"OUT={out}")
    finally:
        stop_sim(process)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    config = summary["config"]
    assert summary["requests_ok"] == 6 and config["served_by"]["engine"] == dialect
    assert config["continuous_usage"] is (dialect != "trtllm")  # trtllm-serve's gpt-oss path reads no stream_options

    records = [r for r in read_records(out / "samples.jsonl") if r.ok]
    assert len(records) == 6
    for r in records:  # TTFT on the first reasoning token, TTFVT on the first answer token
        assert r.reasoning_tokens and r.answered and r.ttft_s < r.ttfvt_s < r.e2e_s
        assert r.token_source == "server" and r.completion_tokens > r.reasoning_tokens
        # vLLM and SGLang count reasoning tokens in their usage; trtllm-serve's usage has none: the stream's events count
        assert r.reasoning_source == ("stream" if dialect == "trtllm" else "server")
    if dialect == "sglang":  # no cached_tokens in its usage without --enable-cache-report
        assert all(r.cached_tokens is None for r in records)

    account = summary["server_vs_client"]
    assert account["engine"] == dialect and account["server_requests"] == 6 and not account["suspect"], account
    assert account["server_prompt_tokens"] == account["client_prompt_tokens"] > 0
    assert account["server_generation_tokens"] == account["client_generation_tokens"] > 0
    assert account["server_mean_ttft_ms"] > 0 and account["server_mean_itl_ms"] > 0 and account["server_mean_queue_ms"] is not None
    lacks = {"vllm": [], "sglang": ["preemptions: not in SGLang's metrics after the run (a version without it, or nothing "
                                    "counted)"],
             "trtllm": ["preemptions: not exposed by trtllm-serve (it has no preemption counter)"]}[dialect]
    assert account["not_exposed"] == lacks
    assert config["server_metrics"] == {"path": "/prometheus/metrics" if dialect == "trtllm" else "/metrics",
                                        "engine": dialect, "missing": None}
    assert summary["server_prefix_cache_hit_rate"] is not None
    assert f"Server's own account ({ENGINE_TITLE[dialect]}'s metrics)" in done.stdout
    assert all(f"Not exposed: {line}" in done.stdout for line in lacks)
    if dialect == "trtllm":
        assert any("mean of per-request TPOTs" in note for note in account["notes"]) and "Note: ITL:" in done.stdout


SIM = (sys.executable, "-m", "llmload.sim", "--port", "{port}", "--fixed-ttft-ms", "20", "--fixed-itl-ms", "5")


@pytest.mark.parametrize("dialect", ["sglang", "trtllm"])
def test_a_tune_starts_and_stops_each_engines_server(dialect, tmp_path):
    launch = fill_port(dialect, (*SIM, "--dialect", dialect), free_loopback_port(), {"PYTHONPATH": str(REPO)})
    with ManagedServer(launch, tmp_path, timeout_s=60, progress=lambda _: None, poll_s=0.1, grace_s=2) as server:
        ready = server.start()
        pgid = server.pgid
    assert not group_members(pgid)
    assert ready.models == ("openai/gpt-oss-20b",) and ready.engine == dialect
    startup = json.loads((tmp_path / "startup.json").read_text())
    assert startup["engine"] == dialect
    if dialect == "sglang":  # no /version: its /server_info says it; /health said 503 while it was Starting
        assert ready.version == "0.5.23-sim" and ready.startup_s >= 0.5
        assert json.loads((tmp_path / "version.json").read_text()) == {"version": "0.5.23-sim", "from": "/server_info"}
        assert ready.effective["server"] == "sglang"
        assert ready.effective["server_args"]["reasoning_parser"] == "gpt-oss"
        assert "sglang:num_running_reqs" in (tmp_path / "metrics_before.txt").read_text()
    else:  # its /metrics is JSON: the Prometheus text saved is /prometheus/metrics'
        assert ready.version == "main-sim"
        assert "trtllm_num_requests_running" in (tmp_path / "metrics_after.txt").read_text()
