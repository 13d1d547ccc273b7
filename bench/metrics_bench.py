#!/usr/bin/env python3
"""What METRICS_PORT costs the load process: CPU per request with the exporter off, on, and on while scraped.

Each arm runs what `make load` runs against one built-in target with fixed timing (every request the same
--tokens tokens, --itl-ms apart, an effort mix so the endpoint holds three efforts' histograms):

    python -m llmload load HOST=<target> USERS=N DURATION=<s> EFFORT=mix:low=1,medium=1,high=1 MAX_TOKENS=<tokens>
                           EXTRA_BODY='{"ignore_eos": true}' OUT=<tmp> [METRICS_PORT=<free port>]

off       METRICS_PORT=0 (the default)
on        METRICS_PORT set, nobody scrapes: the records' observation only
scraped   METRICS_PORT set and scraped every --scrape-s seconds (monitoring/prometheus.yml scrapes every 5 s)

The arms are interleaved (off, on, scraped, then the next round in turn), so drift of the shared machine falls on
every arm alike. CPU per request is the load process's CPU over its measured window (summary.json's generator
block) over the requests it finished; the event loop's lag p99 and the arrival-to-read lag p99 come from the same
block. Before the runs it times RunMetrics.add per record and one scrape's rendering, in this process.

    python bench/metrics_bench.py [--rounds 4] [--users 32] [--duration-s 20] [--tokens 200] [--itl-ms 10]
                                  [--scrape-s 1]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # the llmload beside bench/, installed or not

ARMS = ("off", "on", "scraped")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape_forever(port: int, interval_s: float, stop: threading.Event, sizes: list[int]) -> None:
    while not stop.wait(interval_s):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                sizes.append(len(response.read()))
        except OSError:
            pass  # before the run listens, after it ends


def _run(arm: str, url: str, out: Path, args: argparse.Namespace) -> dict[str, float]:
    port = _free_port()
    command = [sys.executable, "-m", "llmload", "load", f"HOST={url}", f"USERS={args.users}", "SPAWN_RATE=0",
               f"DURATION={args.duration_s}s", "EFFORT=mix:low=1,medium=1,high=1", f"MAX_TOKENS={args.tokens}",
               'EXTRA_BODY={"ignore_eos": true}', f"OUT={out}"] + ([] if arm == "off" else [f"METRICS_PORT={port}"])
    stop, sizes = threading.Event(), []
    scraper = threading.Thread(target=_scrape_forever, args=(port, args.scrape_s, stop, sizes), daemon=True)
    if arm == "scraped":
        scraper.start()
    try:
        done = subprocess.run(command, cwd=BENCH.parent, capture_output=True, text=True, timeout=args.duration_s + 300)
    finally:
        stop.set()
    if done.returncode != 0:
        raise RuntimeError(f"{arm}: exit {done.returncode}: {done.stderr[-2000:]}")
    summary = orjson.loads((out / "summary.json").read_bytes())
    (process,) = summary["generator"]["processes"]
    return {"cpu_per_request_ms": process["cpu_s"] / summary["requests_ok"] * 1e3, "requests": summary["requests_ok"],
            "cpu_per_event_us": process["cpu_per_event_us"], "loop_lag_p99_ms": process["event_loop_lag_ms"]["p99"],
            "read_lag_p99_ms": process["arrival_to_read_lag_ms"]["p99"], "scrapes": len(sizes),
            "scrape_kb": statistics.mean(sizes) / 1024 if sizes else 0.0}


def _in_process_costs(tokens: int) -> tuple[float, float]:
    """RunMetrics.add per record of ``tokens`` events (µs), and rendering one scrape of three efforts (ms), CPU time."""
    from llmload.results.records import RequestRecord
    from llmload.results.run_metrics import RunMetrics, render

    metrics = RunMetrics("run", "h100", ["low", "medium", "high"])
    records = [RequestRecord(request_id=str(i), prompt_id="p", start_unix_s=0.0, start_monotonic_s=0.0, e2e_s=2.1,
                             ttft_s=0.1, ttfvt_s=1.0, tpot_s=0.01, itl_s=[0.01] * (tokens - 1), prompt_tokens=100,
                             completion_tokens=tokens, reasoning_tokens=tokens // 2, effort=("low", "medium", "high")[i % 3])
               for i in range(3000)]
    started_s = time.thread_time()
    for record in records:
        metrics.add(record)
    add_us = (time.thread_time() - started_s) / len(records) * 1e6
    started_s = time.thread_time()
    for _ in range(20):
        b"".join(render(metrics.families(32, 32)))
    return add_us, (time.thread_time() - started_s) / 20 * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--users", type=int, default=32)
    p.add_argument("--duration-s", type=int, default=20)
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--scrape-s", type=float, default=1.0)
    p.add_argument("--arms", default=",".join(ARMS), help="which of off,on,scraped to run, in this order in round 1")
    args = p.parse_args(argv)
    arms = tuple(args.arms.split(","))
    from llmload.sim import start_sim, stop_sim

    add_us, render_ms = _in_process_costs(args.tokens)
    print(f"in process: RunMetrics.add {add_us:.1f} µs per record of {args.tokens} events; "
          f"one scrape (three efforts) {render_ms:.1f} ms CPU, rendered in chunks of 100 lines", flush=True)
    process, url = start_sim(["--fixed-ttft-ms", "50", "--fixed-itl-ms", f"{args.itl_ms:g}"])
    rows: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    try:
        with tempfile.TemporaryDirectory(prefix="llmload-metrics-bench-") as tmp:
            for round_ in range(args.rounds):
                for arm in arms[round_ % len(arms):] + arms[:round_ % len(arms)]:
                    row = _run(arm, url, Path(tmp) / f"{arm}-{round_}", args)
                    rows[arm].append(row)
                    print(f"round {round_ + 1} {arm:8s} " + " ".join(f"{k}={v:.3g}" for k, v in row.items()), flush=True)
    finally:
        stop_sim(process)
    print(f"\n| arm | runs | CPU per request, ms: mean (min-max) | CPU per event, µs | loop lag p99, ms | read lag p99, ms | scrapes, size |")
    print("|---|---:|---|---:|---:|---:|---|")
    for arm in arms:
        cpu = [r["cpu_per_request_ms"] for r in rows[arm]]
        avg = lambda key: statistics.mean(r[key] for r in rows[arm] if r[key] is not None)  # noqa: E731
        scrapes = f"{avg('scrapes'):.0f} of {avg('scrape_kb'):.0f} KiB" if arm == "scraped" else "-"
        print(f"| {arm} | {len(cpu)} | {statistics.mean(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f}) | "
              f"{avg('cpu_per_event_us'):.1f} | {avg('loop_lag_p99_ms'):.2f} | {avg('read_lag_p99_ms'):.2f} | {scrapes} |")
    for arm in arms[1:]:
        differences = [r["cpu_per_request_ms"] - o["cpu_per_request_ms"] for r, o in zip(rows[arm], rows[arms[0]])]
        mean, half = statistics.mean(differences), _t95(len(differences)) * statistics.stdev(differences) / len(differences) ** 0.5
        print(f"{arm} - {arms[0]}, paired by round: {mean:+.3f} ms per request, 95% interval [{mean - half:+.3f}, {mean + half:+.3f}]"
              f" ({100 * mean / statistics.mean(r['cpu_per_request_ms'] for r in rows[arms[0]]):+.1f}%)")
    return 0


def _t95(n: int) -> float:
    """Student's t for a two-sided 95% interval of the mean of ``n`` values (n - 1 degrees of freedom)."""
    table = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26, 11: 2.23, 12: 2.20,
             13: 2.18, 14: 2.16, 15: 2.14, 16: 2.13, 17: 2.12, 18: 2.11, 19: 2.10, 20: 2.09}
    return table.get(n, 2.0)


if __name__ == "__main__":
    sys.exit(main())
