"""Faults through Locust with both clients: one category per fault kind, one record per request the
server received, Locust's failures table a few rows long; failure pacing and MAX_FAIL_RATIO."""

import csv
import json
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import REPO, run_cli
from llmload.client.faults import FAULTS, normalised_detail
from llmload.loadtest.pacing import JUDGED_FROM_REQUESTS, FailRatioGuard, FailureBackoff
from llmload.results.records import read_records
from llmload.sim import start_sim, stop_sim

README = (REPO / "README.md").read_text()
CLIENTS = ["raw", "openai"]
_CHAT_RECEIVED = re.compile(r'^http_requests_total\{handler="/v1/chat/completions",method="POST",status="\dxx"\} (\S+)$', re.M)


def chat_requests_received(url: str) -> int:
    """What the server itself counted (vLLM's http_requests_total), every status."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return int(sum(float(n) for n in _CHAT_RECEIVED.findall(response.read().decode())))


def locust_rows(run_dir, name):
    with open(run_dir / name) as f:
        return list(csv.DictReader(f))


# (target flags, extra settings, the category both clients must record)
FAULT_KINDS = {
    "no-done": (["--fault", "no-done"], [], "protocol"),
    "bad-json": (["--fault", "bad-json"], [], "protocol"),
    "cut-mid-stream": (["--disconnect-rate", "1"], [], "disconnected"),
    "error-object": (["--fault", "error-object"], [], "stream_error"),
    "http-400-with-ids": (["--fault", "http-400"], [], "http_400"),
    "http-500": (["--fail-rate", "1"], [], "http_500"),
    "slow-headers": (["--fault", "slow-headers", "--fixed-ttft-ms", "3000"], ["REQUEST_TIMEOUT=1"], "timeout"),
}


@pytest.mark.integration
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_fault_kind_has_one_category_in_both_clients(tmp_path, kind, client):
    flags, settings, category = FAULT_KINDS[kind]
    process, url = start_sim(["--fixed-ttft-ms", "20", "--fixed-itl-ms", "2", *flags])
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "USERS=2", "REQUESTS=4", "MAX_TOKENS=10", "FAILURE_BACKOFF=0",
                       "MAX_FAIL_RATIO=0", f"CLIENT={client}", f"OUT={out}", *settings)
        received = chat_requests_received(url)
    finally:
        stop_sim(process)
    assert done.returncode == 1, done.stderr[-2000:]  # the run worked; no request succeeded
    records = list(read_records(out / "samples.jsonl"))
    assert [r.error for r in records] == [category] * 4, [(r.error, r.error_detail) for r in records]
    assert received == 4  # one record per request the server received: no hidden retries
    assert all(r.error_detail for r in records)
    # Locust saw the same four, and its failures table groups them in one row although ids differ.
    assert int(locust_rows(out, "locust_stats.csv")[-1]["Failure Count"]) == 4
    (row,) = locust_rows(out, "locust_failures.csv")
    assert int(row["Occurrences"]) == 4 and f"{category}: " in row["Error"]
    assert not re.search(r"[0-9a-f]{12}", row["Error"])  # no request id in the grouped text


@pytest.mark.integration
@pytest.mark.parametrize("client", CLIENTS)
def test_a_server_restart_gives_a_handful_of_failures_per_user(tmp_path, client):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    first, url = start_sim(["--fixed-ttft-ms", "20", "--fixed-itl-ms", "2"], port=port)
    out = tmp_path / "run"
    load = subprocess.Popen([sys.executable, "-m", "llmload", "load", f"HOST={url}", "USERS=2", "DURATION=20s",
                             "MAX_TOKENS=5", "MAX_FAIL_RATIO=0", f"CLIENT={client}", f"OUT={out}", "STOP_TIMEOUT=5"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "samples.jsonl").exists() or not (out / "samples.jsonl").stat().st_size:
            assert time.monotonic() < deadline and load.poll() is None, "the run did not start"
            time.sleep(0.2)
        stop_sim(first)
        down_s = time.monotonic()
        time.sleep(2.0)  # the server is gone for ~2 s, plus its start
        second, _ = start_sim(["--fixed-ttft-ms", "20", "--fixed-itl-ms", "2"], port=port)
        try:
            stdout, stderr = load.communicate(timeout=120)
            received_after = chat_requests_received(url)
        finally:
            stop_sim(second)
    finally:
        if load.poll() is None:
            load.kill()
    assert load.returncode == 0, stderr[-2000:]
    records = list(read_records(out / "samples.jsonl"))
    refused = [r for r in records if r.error == "connect"]
    # Without pacing each user retried at once (16,000 failures in 3 s); with 0.1 s doubling up to 5 s, an
    # outage of 2-4 s costs each of the 2 users at most 7.
    assert 2 <= len(refused) <= 2 * 7, len(refused)
    # Every request sent after the first server went away was either refused or received by the second.
    after = [r for r in records if r.start_monotonic_s > down_s]
    assert len([r for r in after if r.error != "connect"]) == received_after
    assert any(r.ok for r in after)  # the users came back after the restart
    failures = locust_rows(out, "locust_failures.csv")
    assert sum(int(row["Occurrences"]) for row in failures if "connect: " in row["Error"]) == len(refused)
    assert len(failures) <= 3  # connect, and the streams cut by the stop


@pytest.mark.integration
def test_max_fail_ratio_stops_the_run_with_one_line(tmp_path):
    process, url = start_sim(["--fixed-ttft-ms", "5", "--fixed-itl-ms", "1", "--fail-rate", "1"])
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "USERS=2", "DURATION=60s", "MAX_TOKENS=5", "FAILURE_BACKOFF=0",
                       "MAX_FAIL_RATIO=0.5", f"OUT={out}")
    finally:
        stop_sim(process)
    assert done.returncode == 3, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: MAX_FAIL_RATIO=0.5 passed: ") and "http_500" in last, last
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["stopped_by"] == "MAX_FAIL_RATIO"
    assert JUDGED_FROM_REQUESTS <= summary["requests_failed"] < 200 and summary["duration_s"] < 30


@pytest.mark.pure
def test_backoff_doubles_to_its_cap_and_resets_on_success():
    backoff = FailureBackoff(0.1, 1.0)
    assert [backoff.after(False) for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff.after(True) == 0.0 and backoff.after(False) == 0.1
    assert FailureBackoff(0.0, 5.0).after(False) == 0.0


@pytest.mark.pure
def test_fail_ratio_is_judged_from_the_tenth_request_and_trips_once():
    lines = []
    guard = FailRatioGuard(0.5, lines.append)
    for error in ["connect"] * (JUDGED_FROM_REQUESTS - 1) + ["interrupted"]:
        guard.add(error)
    assert lines == []  # nine failures, and an interrupted stream does not count
    guard.add("connect")
    guard.add("connect")
    assert len(lines) == 1 and "10 of 10 requests failed" in lines[0] and "connect" in lines[0]
    quiet = FailRatioGuard(0.0, lines.append)
    for _ in range(50):
        quiet.add("http_500")
    assert len(lines) == 1


@pytest.mark.pure
def test_grouping_text_strips_ids_and_numbers():
    one = normalised_detail("request chatcmpl-3f9a0c1d2e refused: 68 prompt tokens, 794773 ahead")
    two = normalised_detail("request chatcmpl-77b1e0aa90 refused: 1024 prompt tokens, 3 ahead")
    assert one == two == "request <id> refused: N prompt tokens, N ahead"


@pytest.mark.pure
def test_every_fault_category_is_in_the_readme_table():
    assert [c for c in FAULTS if f"| `{c}` |" not in README] == []
