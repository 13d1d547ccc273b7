"""Headless runs end to end through the CLI, Locust and the built-in target."""

import csv
import json
import socket

import pytest

from conftest import run_cli
from llmload.results.records import read_records
from llmload.sim import start_sim, stop_sim

SUMMARY_KEYS = {
    "requests_ok", "requests_failed", "duration_s", "rps", "output_throughput_tok_s", "total_throughput_tok_s",
    "answered_ratio", "response_time_ms", "ttft_ms", "ttfvt_ms", "tpot_ms", "itl_ms", "prompt_tokens",
    "output_tokens", "reasoning_tokens", "config", "schema_version",
}
CONFIG_KEYS = {"host", "gpu", "model", "effort", "users", "prompts", "max_tokens", "duration_s", "client"}


def locust_request_count(run_dir):
    with open(run_dir / "locust_stats.csv") as f:
        rows = {row["Name"]: row for row in csv.DictReader(f)}
    return int(rows["Aggregated"]["Request Count"])


@pytest.mark.integration
@pytest.mark.parametrize("client", ["raw", "openai"])
def test_medians_match_the_targets_fixed_timing(sim_fixed, tmp_path, client):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed}", "USERS=4", "DURATION=4s", "MAX_TOKENS=24", "EFFORT=low",
                   f"CLIENT={client}", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert SUMMARY_KEYS <= summary.keys() and CONFIG_KEYS <= summary["config"].keys()
    for key in ("response_time_ms", "ttft_ms", "ttfvt_ms", "tpot_ms", "itl_ms"):
        assert {"mean", "median", "p90", "p99", "min", "max"} <= summary[key].keys()
    for key in ("prompt_tokens", "output_tokens", "reasoning_tokens"):
        assert {"total", "mean", "median", "min", "max"} <= summary[key].keys()
    assert summary["config"]["client"] == client and summary["config"]["users"] == 4
    assert summary["requests_ok"] >= 12 and summary["requests_failed"] == 0
    # The openai SDK spends several ms building each request before it is sent (bench/RESULTS.md). Half an ITL
    # still catches a token timed wrong, and leaves room for a shared machine's scheduling delays.
    ttft_tolerance_ms = 10.0 if client == "raw" else 50.0
    assert 0.0 <= summary["ttft_ms"]["median"] - 100.0 <= ttft_tolerance_ms
    assert abs(summary["itl_ms"]["median"] - 20.0) <= 2.0
    assert abs(summary["tpot_ms"]["median"] - 20.0) <= 2.0
    assert summary["output_tokens"]["max"] == 24
    records = list(read_records(out / "samples.jsonl"))
    assert len(records) == summary["requests_ok"] + summary["requests_failed"] + summary["requests_interrupted"]
    # Exactly one Locust request event per completed request, and Locust saw the same requests.
    assert locust_request_count(out) == summary["requests_ok"] + summary["requests_failed"]
    assert "Serving Benchmark Result" in done.stdout and "Median TTFT (ms)" in done.stdout


def _decode_step_ms(gpu: str, model: str, sequences: int) -> float:
    """One decode step of the GPU's profile for a few hundred tokens of context each."""
    from llmload.sim import lookup_profile
    from llmload.sim.stepmodel import step_time_s

    return step_time_s(lookup_profile(gpu, model).step, sequences, 300 * sequences, 0.0) * 1000


@pytest.mark.integration
def test_a_rehearsal_reports_its_figures_predicted_for_the_profiles_gpu(tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", "PROFILE=h200-gpt-oss-20b-bf16", "SPEEDUP=20", "USERS=4", "REQUESTS=16", "PROMPTS=random:256:64",
                   "EFFORT=none", "PRICE=3.5", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["gpu"] == "h200"  # no GPU given: the profile's
    predicted = summary["predicted"]
    label = "predicted for h200 (profile h200-gpt-oss-20b-bf16, measured; SPEEDUP 20x scaled back)"
    assert predicted["label"] == label and predicted["scaled_by"] == 20.0
    assert predicted["rps"] == pytest.approx(summary["rps"] / 20)  # the raw sped-up figures stay beside them
    assert predicted["tpot_ms"]["median"] == pytest.approx(summary["tpot_ms"]["median"] * 20)
    # the measured profile's own error on operating points it was not fitted to rides beside each figure
    assert predicted["validated"] and predicted["model_error"]["rps"] > 0.15 and "VALIDATED" in predicted["validation"]
    assert "model ±" in done.stdout
    assert summary["cost"]["basis"] == label and summary["cost"]["usd_per_gpu_hour"] == 3.5
    assert f"timings  {label}" in done.stdout and "Predicted for h200" in done.stdout and f"Figures {label}" in done.stdout


@pytest.mark.integration
def test_without_host_the_built_in_target_plays_the_gpu(tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", "GPU=a100", "MODEL=gpt-oss-120b", "USERS=2", "DURATION=2s", "MAX_TOKENS=40", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["model"] == "openai/gpt-oss-120b" and summary["config"]["gpu"] == "a100"
    assert summary["requests_ok"] >= 2
    # The A100 profile's ITL at two running sequences: one decode step of two (about 10.4 ms).
    step_ms = _decode_step_ms("a100", "gpt-oss-120b", 2)
    assert 0.85 * step_ms < summary["itl_ms"]["median"] < 1.35 * step_ms


@pytest.mark.integration
def test_streams_cut_off_at_the_end_are_kept_as_interrupted(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed}", "USERS=3", "DURATION=1s", "MAX_TOKENS=500", "STOP_TIMEOUT=0", f"OUT={out}")
    assert done.returncode == 1, done.stderr[-2000:]  # nothing completed in 1 s of 10 s streams
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests_interrupted"] == 3 and summary["requests_ok"] == 0
    records = list(read_records(out / "samples.jsonl"))
    assert [r.error for r in records] == ["interrupted"] * 3 and all(r.ttft_s is not None for r in records)


@pytest.mark.integration
def test_max_tokens_inside_reasoning_counts_lost_answers(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed}", "USERS=2", "DURATION=1s", "MAX_TOKENS=5", "EFFORT=high", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answered_ratio"] == 0.0
    assert summary["lost_to_max_tokens"] == summary["requests_ok"] > 0
    assert summary["finish_reasons"] == {"length": summary["requests_ok"]}


@pytest.mark.integration
def test_failures_are_counted_not_hidden(tmp_path):
    process, url = start_sim(["--fixed-ttft-ms", "5", "--fixed-itl-ms", "1", "--fail-rate", "0.5"])
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "USERS=2", "DURATION=2s", "MAX_TOKENS=10", "MAX_FAIL_RATIO=0", f"OUT={out}")
    finally:
        stop_sim(process)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests_failed"] > 0 and summary["requests_ok"] > 0
    # A stream still open when DURATION ends is kept as interrupted (a starved machine can leave one): not a fault.
    assert set(summary["errors"]) - {"interrupted"} == {"http_500"}
    assert locust_request_count(out) == summary["requests_ok"] + summary["requests_failed"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.pure
@pytest.mark.parametrize("settings,message", [
    (["EFFORT=ultra"], "EFFORT"),
    (["USERS=0"], "USERS"),
    (["GPU_COUNT=8"], "unknown setting GPU_COUNT"),
    (["DURATION=soon"], "DURATION"),
    (["EXTRA_BODY={oops"], "EXTRA_BODY"),
    (["PROMPTS=/nonexistent.jsonl"], "PROMPTS"),
    (["GPU=l4", "MODEL=gpt-oss-120b"], "l4"),
])
def test_bad_input_is_one_line_and_no_load(cli, tmp_path, settings, message):
    out = tmp_path / "run"
    done = cli("load", *settings, f"OUT={out}", "DURATION=1s" if "DURATION" not in settings[0] else "USERS=1")
    _assert_one_line_and_no_load(done, message, out)


@pytest.mark.integration
def test_a_host_that_does_not_answer_is_one_line_and_no_load(tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST=http://127.0.0.1:{free_port()}", f"OUT={out}", "DURATION=1s")
    _assert_one_line_and_no_load(done, "does not answer", out)


def _assert_one_line_and_no_load(done, message, out):
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (out / "samples.jsonl").exists()


@pytest.mark.integration
def test_a_model_the_server_does_not_serve(sim_fixed, tmp_path):
    done = run_cli("load", f"HOST={sim_fixed}", "MODEL=llama-9000", f"OUT={tmp_path / 'run'}")
    assert done.returncode == 2 and done.stderr.startswith("error: MODEL=llama-9000 is not served")
    assert "openai/gpt-oss-20b" in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.integration
def test_a_run_folder_is_never_overwritten(sim_fixed, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "samples.jsonl").write_text("kept\n")
    done = run_cli("load", f"HOST={sim_fixed}", f"OUT={out}")
    assert done.returncode == 2 and "already holds a run" in done.stderr
    assert (out / "samples.jsonl").read_text() == "kept\n"


@pytest.mark.integration
def test_a_fixed_request_count_with_warmups(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed}", "USERS=3", "REQUESTS=7", "WARMUP_REQUESTS=2", "MAX_TOKENS=5",
                   "ORDER=sequence", "PROMPTS=builtin", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    records = list(read_records(out / "samples.jsonl"))
    assert summary["requests_ok"] == 7 and summary["config"]["requests"] == 7
    assert [r.warmup for r in records].count(True) == 2 and len(records) == 9
    # Warm-ups finish before any measured request starts.
    last_warmup_end = max(r.start_monotonic_s + r.e2e_s for r in records if r.warmup)
    assert all(r.start_monotonic_s >= last_warmup_end for r in records if not r.warmup)
    assert locust_request_count(out) == 7
    # ORDER=sequence walks the set in order, shared by the users.
    assert [r.prompt_id for r in sorted(records, key=lambda r: r.start_monotonic_s)][:3] == ["builtin-support-0", "builtin-support-1", "builtin-support-2"]


@pytest.mark.integration
def test_speedup_runs_the_built_in_target_faster(tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", "GPU=l4", "USERS=2", "DURATION=20s", "SPEEDUP=10", "MAX_TOKENS=40", "EFFORT=low", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["duration_s"] < 6  # 20 s of load, 10 times faster, plus the streams' drain
    step_ms = _decode_step_ms("l4", "gpt-oss-20b", 2)  # L4's decode step of two (about 46 ms), divided by 10
    assert 0.85 * step_ms / 10 < summary["itl_ms"]["median"] < 1.35 * step_ms / 10
    assert summary["config"]["speedup"] == 10.0


@pytest.mark.integration
def test_a_run_against_a_sped_up_host_takes_the_targets_time_scale(tmp_path):
    """The 2026-12-06 finding: `make serve-sim SPEEDUP=20` then `make load HOST=<it> RATE=2 DURATION=60s` sent 2
    requests per wall second for 60 wall seconds and reported a predicted 0.1 requests/s. The run now takes the
    target's SPEEDUP (and says so): 40 requests/s to the 20x target for 3 s, predicted 2 requests/s for the GPU."""
    process, url = start_sim(["--speedup", "20", "--gpu", "h100"])
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "RATE=2", "DURATION=60s", "MAX_TOKENS=20", "EFFORT=low", f"OUT={out}")
        refused = run_cli("load", f"HOST={url}", "SPEEDUP=4", "DURATION=6s", f"OUT={tmp_path / 'other'}")
    finally:
        stop_sim(process)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["time_scale"] == {"speedup": 20.0, "adopted_from_target": True}
    assert "the target runs at SPEEDUP 20 (it was started so): this run takes it" in done.stdout
    assert summary["arrivals"]["scheduled_rate_rps"] == pytest.approx(40.0, rel=0.25)  # on the target's clock
    assert summary["predicted"]["rps"] == pytest.approx(2.0, rel=0.3) and summary["duration_s"] < 6.5
    assert refused.returncode == 2 and "SPEEDUP=4: the built-in target at" in refused.stderr
