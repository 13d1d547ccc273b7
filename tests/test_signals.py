"""Ctrl-C, SIGTERM and kill -9 during runs whose streams take seconds; a killed run's summary rebuilt.

Each run starts as a terminal would start it: in its own process group, which gets the signal
(os.killpg). Records are counted against what the server received: the built-in target's send
log (one line per streamed request, keyed by the request id the client sent) or its /metrics.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
import requests

from conftest import REPO, run_cli
from llmload.results.records import read_records
from llmload.sim import start_sim, stop_sim
from plots.results import load_results

FILES = ("samples.jsonl", "summary.json", "config.json", "locust_stats.csv", "locust_failures.csv", "locust.html")
SLOW = ["--fixed-ttft-ms", "100", "--fixed-itl-ms", "50"]
"""30 tokens take 1.55 s; 400 take 20 s."""


class Run:
    """``python -m llmload ARGS`` in a process group of its own, output to files."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.stdout_path, self.stderr_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen([sys.executable, "-m", "llmload", *args], cwd=REPO, stdout=out, stderr=err,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def signal(self, signum: int) -> float:
        """Send ``signum`` to the whole group, as a terminal does; return the monotonic time it was sent."""
        sent_s = time.monotonic()
        os.killpg(self.process.pid, signum)
        return sent_s

    def finish(self, timeout_s: float = 90) -> tuple[int, str, str]:
        code = self.process.wait(timeout_s)
        return code, self.stdout_path.read_text(), self.stderr_path.read_text()

    def alive(self) -> bool:
        return self.process.poll() is None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def running_streams(url: str) -> int:
    """The built-in target's vllm:num_requests_running."""
    try:
        text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    except OSError:
        return 0
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines() if line.startswith("vllm:num_requests_running"))


def sent_requests(send_log: Path) -> dict[str, int]:
    """Request id -> token chunks the target sent, from its send log (complete once it is stopped)."""
    lines = [orjson.loads(line) for line in send_log.read_bytes().splitlines()]
    return {line["request_id"]: len(line["sent_s"]) for line in lines}


@pytest.fixture()
def slow_target(tmp_path):
    """A target with fixed timing that logs every stream it sends; yields (url, stop() -> sent requests)."""
    send_log = tmp_path / "send.jsonl"
    process, url = start_sim([*SLOW, "--send-log", str(send_log)])

    def stop() -> dict[str, int]:
        stop_sim(process)
        return sent_requests(send_log)

    yield url, stop
    stop_sim(process)


def assert_one_record_per_request(out: Path, sent: dict[str, int]) -> list:
    records = list(read_records(out / "samples.jsonl"))
    assert sorted(r.request_id for r in records) == sorted(sent)
    summary = json.loads((out / "summary.json").read_text())
    assert len(records) == summary["requests_ok"] + summary["requests_failed"] + summary["requests_interrupted"]
    return records


@pytest.mark.integration
def test_ctrl_c_lets_streams_finish_against_the_built_in_target(tmp_path):
    out = tmp_path / "run"
    run = Run(tmp_path, "load", "GPU=a100", "USERS=3", "DURATION=60s", "MAX_TOKENS=600", f"OUT={out}")  # ~4.6-s streams
    wait_until(lambda: (out / "config.json").exists(), 60, "the test to start")
    url = json.loads((out / "config.json").read_text())["host"]
    wait_until(lambda: running_streams(url) == 3, 30, "three streams in flight")
    signalled_s = run.signal(signal.SIGINT)
    code, stdout, stderr = run.finish()
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stdout + stderr
    for name in FILES:
        assert (out / name).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted_by"] == "SIGINT" and not summary["partial"]
    assert "Serving Benchmark Result" in stdout and "Stopped early by:" in stdout and "SIGINT" in stdout
    records = list(read_records(out / "samples.jsonl"))
    # The target was not in the terminal's group: the three streams in flight finished, none is a failure.
    in_flight = [r for r in records if r.start_monotonic_s < signalled_s < r.start_monotonic_s + r.e2e_s]
    assert len(in_flight) >= 2 and all(r.ok and r.finish_reason in ("stop", "length") for r in in_flight)
    assert summary["requests_failed"] == 0 and summary["requests_interrupted"] == 0
    assert summary["requests_ok"] == len(records)
    assert all(r.start_monotonic_s < signalled_s + 0.25 for r in records)  # no new request after the signal
    assert running_streams(url) == 0  # stopped by us once Locust was done


@pytest.mark.integration
@pytest.mark.parametrize("client", ["raw", "openai"])
def test_a_second_ctrl_c_cuts_the_streams_and_keeps_them_as_interrupted(tmp_path, slow_target, client):
    url, stop_target = slow_target
    out = tmp_path / "run"
    run = Run(tmp_path, "load", f"HOST={url}", "USERS=2", "DURATION=60s", "MAX_TOKENS=400", f"CLIENT={client}", f"OUT={out}")
    wait_until(lambda: running_streams(url) == 2, 60, "two streams in flight")
    time.sleep(1.0)  # the streams have sent tokens: what they measured so far is kept
    run.signal(signal.SIGINT)
    time.sleep(1.0)
    assert run.alive()  # the first Ctrl-C waits for 20-s streams
    run.signal(signal.SIGINT)
    code, stdout, stderr = run.finish(timeout_s=30)
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stdout + stderr
    for name in FILES:
        assert (out / name).exists(), name
    sent = stop_target()
    records = assert_one_record_per_request(out, sent)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted_by"] == "SIGINT" and summary["requests_interrupted"] == 2
    cut = [r for r in records if r.error == "interrupted"]
    assert len(cut) == 2 and all(r.ttft_s is not None and 0 < r.completion_tokens < 400 for r in cut)
    assert summary["requests_failed"] == 0


@pytest.mark.integration
def test_sigterm_finishes_the_streams_without_tracebacks(tmp_path, slow_target):
    url, stop_target = slow_target
    out = tmp_path / "run"
    run = Run(tmp_path, "load", f"HOST={url}", "USERS=3", "DURATION=60s", "MAX_TOKENS=30", f"OUT={out}")
    wait_until(lambda: (out / "config.json").exists() and running_streams(url) == 3, 60, "three streams in flight")
    time.sleep(2.0)  # some requests done, three in flight
    signalled_s = run.signal(signal.SIGTERM)
    code, stdout, stderr = run.finish()
    assert code == 143, stderr[-3000:]
    assert "Traceback" not in stdout + stderr and "unexpected state" not in stderr
    for name in FILES:
        assert (out / name).exists(), name
    sent = stop_target()
    records = assert_one_record_per_request(out, sent)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted_by"] == "SIGTERM" and "Serving Benchmark Result" in stdout
    assert all(r.ok and r.completion_tokens == 30 for r in records)
    assert any(r.start_monotonic_s < signalled_s < r.start_monotonic_s + r.e2e_s for r in records)


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.integration
def test_kill_9_then_report_rebuilds_a_partial_summary(tmp_path, slow_target):
    url, stop_target = slow_target
    out = tmp_path / "run"
    flush_interval_s = 0.2
    run = Run(tmp_path, "load", f"HOST={url}", "USERS=3", "DURATION=60s", "MAX_TOKENS=30",
              f"FLUSH_INTERVAL={flush_interval_s}", f"OUT={out}")
    wait_until(lambda: (out / "samples.jsonl").exists() and (out / "samples.jsonl").stat().st_size > 0, 60, "records on disk")
    time.sleep(2.5)  # a second round of 1.55-s streams ends, a third is in flight
    for pid in [*_children(run.process.pid), run.process.pid]:  # Locust, then the CLI: nothing cleans up
        os.kill(pid, signal.SIGKILL)
    killed_s = time.monotonic()
    run.finish(timeout_s=10)
    time.sleep(0.5)
    sent = stop_target()
    assert not (out / "summary.json").exists() and not (out / "locust_stats.csv").exists()
    records = list(read_records(out / "samples.jsonl"))
    assert {r.request_id for r in records} <= set(sent)
    # Every stream that ended FLUSH_INTERVAL (plus a margin for a busy machine) before the kill is on disk.
    send_log = {line["request_id"]: line["sent_s"] for line in map(orjson.loads, (tmp_path / "send.jsonl").read_bytes().splitlines())}
    ended_early = {rid for rid, sent_s in send_log.items() if len(sent_s) == 30 and sent_s[-1] < killed_s - flush_interval_s - 1.0}
    assert ended_early and ended_early <= {r.request_id for r in records}

    # Figures take the folder as it is (summed up from its samples, nothing written), drawn as partial.
    drawn = load_results(out)
    assert not drawn.cells[0].complete and drawn.cells[0].summary.requests_ok == len([r for r in records if r.ok])
    assert "partial" in drawn.missing[0].reason and not (out / "summary.json").exists()

    done = run_cli("report", str(out))
    assert done.returncode == 0, done.stderr
    assert "rebuilt from samples.jsonl, marked partial" in done.stdout and "Serving Benchmark Result" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"] is True and summary["interrupted_by"] is None
    assert {"locust_stats.csv", "locust_failures.csv", "locust.html"} <= set(summary["missing"])
    assert any("end of the run" in m for m in summary["missing"])
    assert summary["requests_ok"] == len([r for r in records if r.ok]) > 0
    assert summary["config"]["host"] == url and summary["config"]["flush_interval"] == flush_interval_s

    # Reported again: the summary is read, never rewritten.
    before = (out / "summary.json").read_bytes(), (out / "summary.json").stat().st_mtime_ns
    again = run_cli("report", str(out))
    assert again.returncode == 0 and "marked partial" not in again.stdout and "PARTIAL" in again.stdout
    assert before == ((out / "summary.json").read_bytes(), (out / "summary.json").stat().st_mtime_ns)

    figures = subprocess.run([sys.executable, "-m", "plots", "figures", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert figures.returncode == 0, figures.stderr
    assert (out / "report.html").exists() and "partial" in figures.stdout


@pytest.mark.pure
def test_report_on_a_corrupt_summary_or_a_file_is_one_line(cli, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "samples.jsonl").write_text("")
    (run_dir / "summary.json").write_text('{"requests_ok": ')
    cases = {str(run_dir): "not valid JSON", str(run_dir / "samples.jsonl"): "is a file",
             str(tmp_path / "nowhere"): "no such folder"}
    for target, message in cases.items():
        done = cli("report", target)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert (run_dir / "summary.json").read_text() == '{"requests_ok": '  # left as it was
    (run_dir / "summary.json").write_text('{"requests_ok": 3}')
    done = cli("report", str(run_dir))
    assert done.returncode == 2 and "not a run summary" in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.pure
@pytest.mark.parametrize("value", ["0", "-1", "nan", "61"])
def test_a_flush_interval_out_of_range_is_one_line(cli, tmp_path, value):
    done = cli("load", f"FLUSH_INTERVAL={value}", f"OUT={tmp_path / 'run'}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "FLUSH_INTERVAL" in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


SWEEP = """
name: stoppable
server: {engine: llmload-sim, gpu: h100}
defaults: {DURATION: 8s, MAX_TOKENS: 200, PROMPTS: builtin, MODEL: gpt-oss-20b, EFFORT: low}
grid:
  USERS: [2, 1]
"""


@pytest.mark.integration
def test_a_sweep_interrupted_keeps_the_cell_and_resumes(tmp_path):
    scenario, out = tmp_path / "stoppable.yaml", tmp_path / "sweep"
    scenario.write_text(SWEEP)
    run = Run(tmp_path, "sweep", f"SCENARIO={scenario}", f"OUT={out}")
    config = lambda: [p for p in (out / "cells").glob("*/config.json")] if (out / "cells").exists() else []  # noqa: E731
    wait_until(lambda: config(), 90, "the first cell to start")
    cell = config()[0].parent
    url = json.loads((cell / "config.json").read_text())["host"]
    wait_until(lambda: running_streams(url) == 2, 30, "the cell's streams")
    run.signal(signal.SIGINT)
    code, stdout, stderr = run.finish()
    assert code == 130, stdout + stderr
    assert "Traceback" not in stdout + stderr
    assert stderr.count("\n") == 1 and stderr.startswith("interrupted by SIGINT") and cell.name in stderr
    assert not (cell / "cell.json").exists()  # not complete: it runs again
    summary = json.loads((cell / "summary.json").read_text())
    assert summary["interrupted_by"] == "SIGINT" and summary["requests_failed"] == 0 and summary["requests_ok"] >= 2

    done = run_cli("sweep", f"SCENARIO={scenario}", f"OUT={out}", timeout_s=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 already finished, 2 to run" in done.stdout and f"as {cell.name}.partial-1" in done.stdout
    assert (out / "cells" / f"{cell.name}.partial-1" / "summary.json").exists()  # the interrupted run is kept
    assert (cell / "cell.json").exists() and "2 of 2 cells finished" in done.stdout


@pytest.mark.integration
def test_ctrl_c_in_locusts_web_ui_stops_the_test_and_the_ui(tmp_path, slow_target):
    url, stop_target = slow_target
    out, port = tmp_path / "run", free_port()
    with (tmp_path / "locust.txt").open("wb") as log:
        locust = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(REPO / "locustfile.py"), "--host", url,
                                   "--web-host", "127.0.0.1", "--web-port", str(port), "--autostart", "-u", "2", "-r", "2",
                                   "-t", "60s", "-s", "30", "--max-tokens", "40", "--out", str(out)],
                                  cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: running_streams(url) == 2, 60, "two streams in flight")
        os.killpg(locust.pid, signal.SIGINT)
        assert locust.wait(60) == 130
    finally:
        if locust.poll() is None:
            locust.kill()
    output = (tmp_path / "locust.txt").read_text()
    assert "Traceback" not in output
    sent = stop_target()
    assert_one_record_per_request(out, sent)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted_by"] == "SIGINT" and summary["requests_ok"] == len(sent) >= 2


@pytest.mark.integration
def test_ctrl_c_ends_make_ui_after_its_streams_finish(tmp_path, slow_target):
    url, stop_target = slow_target
    out, port = tmp_path / "run", free_port()
    origin = f"http://127.0.0.1:{port}"
    run = Run(tmp_path, "ui", f"HOST={url}", f"WEB_PORT={port}", "MAX_TOKENS=40", f"OUT={out}")
    http = requests.Session()
    http.trust_env = False

    def answers() -> bool:
        assert run.alive(), run.stderr_path.read_text()
        try:
            return http.get(origin + "/", timeout=2).ok
        except requests.ConnectionError:
            return False

    wait_until(answers, 60, "the web UI")
    started = http.post(origin + "/swarm", data={"user_count": "2", "spawn_rate": "2", "host": url}, headers={"Origin": origin}, timeout=10)
    assert started.json()["success"] is True
    wait_until(lambda: running_streams(url) == 2, 60, "two streams in flight")
    signalled_s = run.signal(signal.SIGINT)
    code, stdout, stderr = run.finish()
    assert code == 0, stderr[-3000:]  # Ctrl-C is how the web UI is meant to end
    assert "Traceback" not in stdout + stderr
    sent = stop_target()
    records = assert_one_record_per_request(out, sent)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted_by"] == "SIGINT" and summary["requests_ok"] == len(records) >= 2
    assert any(r.start_monotonic_s < signalled_s < r.start_monotonic_s + r.e2e_s for r in records)
