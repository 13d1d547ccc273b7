"""Locust's distributed mode: local worker processes, and a master and a worker on their own network addresses."""

import csv
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import asdict

import pytest

import numpy as np

from conftest import REPO, run_cli
from real_prometheus import Scraper, free_port
from prometheus_client.parser import text_string_to_metric_families
from llmload.loadtest.arrivals import Arrivals
from llmload.promptsets.catalog import load_prompt_set
from llmload.results.records import read_records
from llmload.results.server_metrics import read_samples
from llmload.results.storage import read_summary
from llmload.results.summary import summarize
from llmload.sim import start_sim, stop_sim

pytestmark = pytest.mark.integration

RUN_TAG = "LLMLOAD_TEST_RUN"
"""Set in every process a test here starts (inherited by Locust and the workers it forks): teardown finds them by it."""


def _tagged_process_groups(tag: str) -> set[int]:
    """Process groups holding a process whose environment carries ``RUN_TAG=tag`` (this process's own excluded)."""
    needle = f"{RUN_TAG}={tag}".encode()
    groups = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    groups.add(os.getpgid(int(entry)))
        except (OSError, ProcessLookupError):
            continue  # gone, or not ours to read
    return groups - {os.getpgrp()}


@pytest.fixture(autouse=True)
def kill_own_locust_processes(monkeypatch):
    """Locust forks its workers without exec and they do not die with their master: after each test, kill every
    process group a process started by the test still holds (Locust runs in its own session, apart from ours)."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(RUN_TAG, tag)
    yield
    for group in _tagged_process_groups(tag):
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _locust_count(run_dir):
    with open(run_dir / "locust_stats.csv") as f:
        return int({row["Name"]: row for row in csv.DictReader(f)}["Aggregated"]["Request Count"])


def _served(metrics_text):
    """Requests the target finished, from its Prometheus text."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines()
               if line.startswith("vllm:request_success_total"))


def _close(a, b) -> bool:
    """Equal, numbers within pytest.approx, through nested dicts and lists (the _ci95 pairs)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == pytest.approx(b) if isinstance(b, float) else a == b


def _check_merged_run(out, measured, warmups, workers, served):
    """One samples.jsonl holding every request once; the summary is the one its records give."""
    records = list(read_records(out / "samples.jsonl"))
    assert len(records) == len({r.request_id for r in records}) == measured + warmups == served
    assert sum(r.warmup for r in records) == warmups
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests_ok"] == measured == _locust_count(out)
    # the server's account comes from its scrapes around the run (the built-in target keeps vLLM's histograms)
    recomputed = asdict(summarize(records, summary["config"], generator=read_summary(out).generator,
                                  server_window=read_samples(out / "server_window.jsonl")))
    for key, value in recomputed.items():
        if key not in ("config", "generator", "predicted", "cost"):  # these follow from the target (SPEEDUP) and PRICE
            assert _close(summary[key], value), key
    names = [p["name"] for p in summary["generator"]["processes"]]
    assert names == ["master"] + [f"worker {n}" for n in range(1, workers + 1)]
    return records


def _listening_on_locusts_default_master_port():
    """A listener on 127.0.0.1:5557, Locust's default master port (None where something else holds it already)."""
    import socket
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 5557))
    except OSError:
        sock.close()
        return None
    sock.listen()
    return sock


def test_two_local_workers_send_every_record_once_to_the_master(tmp_path):
    process, url = start_sim(["--fixed-ttft-ms", "50", "--fixed-itl-ms", "10"])
    taken = _listening_on_locusts_default_master_port()  # another run's master: the local workers' own is elsewhere
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "USERS=4", "REQUESTS=20", "WARMUP_REQUESTS=4", "ORDER=sequence",
                       "MAX_TOKENS=10", "EFFORT=low", "WORKERS=2", f"OUT={out}", timeout_s=180)
        assert done.returncode == 0, done.stderr[-3000:]
        with urllib.request.urlopen(f"{url}/metrics") as response:
            served = _served(response.read().decode())
    finally:
        stop_sim(process)
        if taken is not None:
            taken.close()
    records = _check_merged_run(out, 20, 4, 2, served)
    warmups = [r for r in records if r.warmup]
    measured = [r for r in records if not r.warmup]
    # Every warm-up, on either worker, ended before the first measured request started.
    assert max(r.start_monotonic_s + r.e2e_s for r in warmups) <= min(r.start_monotonic_s for r in measured)
    # ORDER=sequence: the two workers took the set's prompts in turn, so together they used its first 24.
    ids = [p.id for p in load_prompt_set("builtin", 0)]
    assert Counter(r.prompt_id for r in records) == Counter(ids[i % len(ids)] for i in range(24))


def test_the_masters_metrics_port_counts_every_workers_requests_and_their_streams(tmp_path):
    """With WORKERS the master serves METRICS_PORT: the workers' records merged, their requests in flight summed."""
    process, url = start_sim(["--fixed-ttft-ms", "50", "--fixed-itl-ms", "10"])
    port = free_port()
    out = tmp_path / "run"
    try:
        with Scraper(port, interval_s=0.3) as scraper:
            done = run_cli("load", f"HOST={url}", "USERS=4", "REQUESTS=40", "MAX_TOKENS=30", "EFFORT=low", "WORKERS=2",
                           f"METRICS_PORT={port}", f"OUT={out}", timeout_s=180)
            assert done.returncode == 0, done.stderr[-3000:]
    finally:
        stop_sim(process)
    summary = json.loads((out / "summary.json").read_text())

    def values(text, name):
        return [s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]

    requests = sum(values(scraper.texts[-1], "llmload_requests_total"))  # the scrape the master waited for at its end
    assert requests == summary["requests_ok"] == 40
    assert max(v for text in scraper.texts for v in values(text, "llmload_requests_in_flight")) >= 1
    assert max(v for text in scraper.texts for v in values(text, "llmload_users")) == 4


def test_rate_over_two_workers_sends_exactly_the_one_process_schedule(tmp_path):
    process, url = start_sim(["--fixed-ttft-ms", "20", "--fixed-itl-ms", "5"])
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "RATE=20", "REQUESTS=60", "WARMUP_REQUESTS=4", "MAX_TOKENS=10", "EFFORT=low",
                       "WORKERS=2", f"OUT={out}", timeout_s=180)
        assert done.returncode == 0, done.stderr[-3000:]
        with urllib.request.urlopen(f"{url}/metrics") as response:
            served = _served(response.read().decode())
    finally:
        stop_sim(process)
    records = _check_merged_run(out, 60, 4, 2, served)  # each request once, as many as Locust counted and the target served
    measured = [r for r in records if not r.warmup]
    # Worker i sent arrivals i, i + 2, ... of the seeded schedule from the master's instant: together, the one-process schedule.
    planned = list(itertools.islice(Arrivals(20.0, "poisson").offsets_s(0), 60))
    scheduled = sorted(r.scheduled_monotonic_s for r in measured)
    assert np.allclose(np.array(scheduled) - scheduled[0], planned, atol=1e-3)
    arrivals = json.loads((out / "summary.json").read_text())["arrivals"]
    assert arrivals["requests_scheduled"] == 60 and arrivals["scheduled_rate_rps"] == pytest.approx(59 / planned[-1], rel=1e-3)
    # How close the sends came to it is a matter of the machine's load (bench/ measures it); what holds on any
    # machine: none went before its due time, and the summary reports the merged sends as they were.
    lags_s = [r.start_monotonic_s - r.scheduled_monotonic_s for r in measured]
    assert min(lags_s) >= 0.0
    sends_s = sorted(r.start_monotonic_s for r in measured)
    assert arrivals["send_rate_rps"] == pytest.approx(59 / (sends_s[-1] - sends_s[0]), rel=1e-9)
    assert arrivals["late_requests"] == sum(lag > arrivals["late_after_ms"] / 1000.0 for lag in lags_s)


def _netns_available():
    return os.geteuid() == 0 and shutil.which("ip") is not None and sys.platform.startswith("linux")


def _sh(*args):
    subprocess.run(args, check=True, capture_output=True)


PROXY = """
import asyncio, sys
listen_host, listen_port, target_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
async def serve(reader, writer):
    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
async def main():
    server = await asyncio.start_server(serve, listen_host, listen_port)
    print("READY", flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


@pytest.fixture
def two_hosts():
    """Namespaces A (10.213.N.1) and B (10.213.N.2) joined by a veth pair: two hosts on one machine."""
    if not _netns_available():
        pytest.skip("network namespaces need root and iproute2")
    tag = uuid.uuid4().hex[:6]
    a, b = f"llmA{tag}", f"llmB{tag}"
    subnet = f"10.213.{int(tag[:2], 16)}"
    _sh("ip", "netns", "add", a)
    _sh("ip", "netns", "add", b)
    try:
        _sh("ip", "link", "add", f"va{tag}", "netns", a, "type", "veth", "peer", "name", f"vb{tag}", "netns", b)
        for ns, dev, address in ((a, f"va{tag}", f"{subnet}.1"), (b, f"vb{tag}", f"{subnet}.2")):
            _sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield a, b, f"{subnet}.1"
    finally:
        subprocess.run(["ip", "netns", "del", a], capture_output=True)
        subprocess.run(["ip", "netns", "del", b], capture_output=True)


def _in(ns, *command, **kwargs):
    return subprocess.Popen(["ip", "netns", "exec", ns, *command], cwd=REPO, **kwargs)


def _ready(process):
    line = process.stdout.readline()
    assert line.startswith("READY"), line


def test_a_master_and_a_worker_on_their_own_addresses(two_hosts, tmp_path):
    host_a, host_b, address_a = two_hosts
    python = sys.executable
    # The built-in target listens on loopback only; in A a relay offers it on A's address to B.
    sim = _in(host_a, python, "-m", "llmload.sim", "--fixed-ttft-ms", "50", "--fixed-itl-ms", "10", "--port", "8000",
              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    relay = _in(host_a, python, "-c", PROXY, address_a, "8100", "8000", stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        _ready(sim)
        _ready(relay)
        out = tmp_path / "run"
        master = _in(host_a, python, "-m", "llmload", "load", f"HOST=http://{address_a}:8100", "USERS=3",
                     "REQUESTS=9", "WARMUP_REQUESTS=2", "MAX_TOKENS=8", "EFFORT=low", "EXPECT_WORKERS=1",
                     f"MASTER_BIND={address_a}:5557", f"OUT={out}", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True)
        worker = _in(host_b, python, "-m", "llmload", "worker", f"MASTER={address_a}:5557",
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stdout, stderr = master.communicate(timeout=180)
        assert master.returncode == 0, stderr[-3000:]
        metrics = subprocess.run(["ip", "netns", "exec", host_a, python, "-c",
                                  "import urllib.request; print(urllib.request.urlopen("
                                  "'http://127.0.0.1:8000/metrics').read().decode())"],
                                 capture_output=True, text=True, check=True).stdout
        worker.wait(timeout=60)  # the master tells its workers to quit
    finally:
        for process in (worker, relay, sim):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    records = _check_merged_run(out, 9, 2, 1, _served(metrics))
    # Stamped by the kernel as they came off the veth into B (a first read may precede stamping: "mixed").
    assert {r.arrival_stamps for r in records} <= {"kernel", "mixed"} and any(r.arrival_stamps == "kernel" for r in records)


def test_the_web_uis_streaming_table_holds_every_workers_records(tmp_path):
    from test_webui_guard import WebUI, wait_until

    process, url = start_sim(["--fixed-ttft-ms", "20", "--fixed-itl-ms", "5"])
    ui = WebUI(tmp_path, [f"HOST={url}", "WORKERS=2", "MAX_TOKENS=8", "EFFORT=low"], {})
    try:
        wait_until(lambda: len(ui.http.get(ui.origin + "/stats/requests", timeout=10).json()["workers"]) == 2,
                   "both workers to connect")
        assert ui.swarm(url, user_count="4", spawn_rate="4").json()["success"] is True

        def streaming():
            stats = ui.http.get(ui.origin + "/stats/requests", timeout=10).json()
            return {row["metric"]: row for row in stats["extended_stats"][0]["data"]}

        wait_until(lambda: streaming()["TTFT (ms)"]["count"] >= 8, "records in the streaming table")
        ui.stop_test()
        summary_path = tmp_path / "run" / "summary.json"
        wait_until(summary_path.exists, "the summary")
        time.sleep(2.5)  # outlive Locust's 2 s cache of /stats/requests
        summary = json.loads(summary_path.read_text())
        assert streaming()["TTFT (ms)"]["count"] == summary["requests_ok"] == _locust_count(tmp_path / "run")
        assert [p["name"] for p in summary["generator"]["processes"]] == ["master", "worker 1", "worker 2"]
    finally:
        ui.close()
        stop_sim(process)


def test_max_fail_ratio_passed_on_a_worker_ends_the_whole_run(tmp_path):
    process, url = start_sim(["--fail-rate", "1"])
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", "USERS=4", "REQUESTS=200", "MAX_TOKENS=8", "EFFORT=low", "WORKERS=2",
                       "FAILURE_BACKOFF=0", f"OUT={out}", timeout_s=180)
    finally:
        stop_sim(process)
    assert done.returncode == 3, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["stopped_by"] == "MAX_FAIL_RATIO"
    assert 10 <= summary["requests_failed"] < 200 and summary["requests_failed"] == _locust_count(out)
