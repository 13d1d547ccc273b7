"""What a run says on the console: banner, progress line, help, Locust's table once, settings overridden."""

import io
import subprocess
import sys
import time

import pytest

from conftest import REPO, run_cli
from llmload import options as opts
from llmload.loadtest.runconfig import parse_run_args
from llmload.loadtest.console import Progress, banner_lines, progress_line
from llmload.timescale import resolve_time_scale

SIM = {"name": "llmload.sim", "rehearsal": True, "version": "0.32.0-sim", "gpu_profile": "a100", "speedup": 20.0}


def options(**given):
    return parse_run_args([f"{k}={v}" for k, v in given.items()])


@pytest.mark.pure
def test_banner_says_target_load_duration_and_where_results_go():
    lines = banner_lines(options(DURATION="2m", SPEEDUP=20, USERS=8, PROMPTS="random:512:128", MAX_TOKENS=800),
                         "http://127.0.0.1:9", "openai/gpt-oss-20b", SIM, "results/x/", {"max_tokens": "128"},
                         resolve_time_scale(20.0, SIM))
    text = "\n".join(lines)
    assert lines[0].startswith("llmload: 6s of load (DURATION 2m on the target's clock, SPEEDUP 20x), 8 users")
    assert "UNVALIDATED prediction" in text  # SIM says nothing of how its profile was validated
    assert "REHEARSAL (built-in target playing a100, SPEEDUP 20x)" in text and "openai/gpt-oss-20b" in text
    assert "results  results/x/" in text and "max_tokens 128" in text
    assert "MAX_TOKENS=800 is not sent" in text  # the setting the prompt set overrides, said so
    real = banner_lines(options(REQUESTS=100, USERS=4), "http://gpu:8000", "m", {"rehearsal": False, "version": "0.10.1"},
                        "out/", {})
    assert real[0].startswith("llmload: 100 requests, at most 4 users at once") and "reports version 0.10.1" in real[1]
    rate = banner_lines(options(RATE=5, ARRIVALS="constant", MAX_CONCURRENCY=3, DURATION="10s"), "http://gpu:8000", "m",
                        {"rehearsal": False}, "out/", {})
    assert rate[0].startswith("llmload: 10s of load, 5 requests/s, constant arrivals, at most 3 in flight (open loop)")


@pytest.mark.pure
def test_progress_line():
    assert progress_line(30, 120, 12) == "[######..................] 30s of 2m00s, 1m30s left, 12 requests done"
    assert "waiting for the streams in flight" in progress_line(121, 120, 50)
    assert progress_line(5, None, 3, 100) == "5s elapsed, 3 requests done of 100"


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.pure
def test_progress_draws_on_a_terminal_only(tmp_path):
    samples = tmp_path / "samples.jsonl"
    samples.write_text("{}\n{}\n")
    terminal = Terminal()
    progress = Progress(samples, 60.0, stream=terminal, interval_s=0.01)
    progress.start()
    deadline = time.monotonic() + 10
    while "2 requests done" not in terminal.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)
    progress.stop()
    assert "2 requests done" in terminal.getvalue() and terminal.getvalue().endswith("\r\x1b[2K")
    pipe = io.StringIO()
    quiet = Progress(samples, 60.0, stream=pipe, interval_s=0.01)
    quiet.start()
    quiet.stop()
    assert pipe.getvalue() == ""


@pytest.mark.integration
def test_make_help_lists_every_setting_of_the_table():
    done = subprocess.run(["make", "--no-print-directory", "help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for o in opts.TABLE:
        assert f"  {o.key}=" in done.stdout, o.key
    for command in opts.COMMANDS:
        assert f"Settings of make {command if command != 'vllm-cpu' else 'serve-vllm-cpu'}" in done.stdout
    for target in ("load", "ui", "sweep", "figures", "serve-sim"):
        assert f"make {target} " in done.stdout
    default = subprocess.run(["make", "--no-print-directory"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert default.stdout == done.stdout  # help is the default target


@pytest.mark.integration
def test_load_help():
    done = run_cli("load", "--help")
    assert done.returncode == 0 and all(f"  {o.key}=" in done.stdout for o in opts.OPTIONS)
    assert "sharegpt:PATH[:N]" in done.stdout and "random:IN:OUT[:N]" in done.stdout


@pytest.mark.integration
def test_a_run_prints_banner_result_once_and_keeps_locust_history(sim_fixed, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={sim_fixed}", "USERS=2", "DURATION=3s", "PROMPTS=random:16:4:10", "MAX_TOKENS=800",
                   "LOCUST_HISTORY=on", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("llmload: 3s of load, 2 users") and f"results  {out}/" in done.stdout
    assert "MAX_TOKENS=800 is not sent" in done.stdout and "max_tokens=4 (set by each prompt; MAX_TOKENS=800 not sent)" in done.stdout
    assert done.stdout.count("Serving Benchmark Result") == 1
    # Locust's table: once at the end (its request table and its percentiles), not every 2 seconds.
    assert (done.stdout + done.stderr).count("Response time percentiles") == 1
    assert (done.stdout + done.stderr).count("# reqs      # fails") == 1
    assert (out / "locust_history_stats_history.csv").exists()


@pytest.mark.integration
def test_a_missing_results_folder_names_the_make_variable():
    done = subprocess.run([sys.executable, "-m", "plots", "figures"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "RESULTS is missing" in done.stderr


@pytest.mark.integration
def test_locust_table_on_brings_the_periodic_table_back(sim_fixed, tmp_path):
    done = run_cli("load", f"HOST={sim_fixed}", "USERS=1", "DURATION=5s", "MAX_TOKENS=4", "LOCUST_TABLE=on", f"OUT={tmp_path / 'run'}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (done.stdout + done.stderr).count("# reqs      # fails") >= 2  # every 2 s, then once at the end
