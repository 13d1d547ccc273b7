#!/usr/bin/env python3
"""What METRICS_PORT's scrapes cost a busy run: a scrape's wall time while N streams run, the per-token timing error
with and without scraping, lines and CPU per scrape.

Each run is bench/product_bench.py's product path (its _product_run: a fresh built-in target with fixed timing and
its send log, every user started at once so the streams move in lockstep, samples.jsonl joined with the send log),
with an effort mix (three efforts' histograms: the endpoint's largest form) and METRICS_PORT:

    python -m llmload load HOST=<target> USERS=N SPAWN_RATE=0 REQUESTS=<k*N> EFFORT=mix:low=1,medium=1,high=1
                           MAX_TOKENS=<tokens> EXTRA_BODY='{"ignore_eos": true}' WORKERS=0 OUT=<tmp> METRICS_PORT=<port>

off       METRICS_PORT set, nobody scrapes
scraped   scraped every --scrape-s seconds by a thread of this script (monitoring/prometheus.yml: every 5 s)

The arms alternate which goes first round by round. With --trees (label=folder, e.g. a `git worktree` of an older
commit) every arm runs once per tree, interleaved, the load process importing llmload from that tree's folder; the
in-process figures are this checkout's. Per run:

scrape wall     connect to last byte, of the scrapes that began after the target's first token send and ended
                before its last (the streams running): p50 / p99 / max over every round's scrapes
per-token error client arrival stamp of each token event minus the target's send stamp (product_bench's join)
CPU per scrape  the load process's CPU (summary.json's generator block), scraped minus off paired by round, over the
                scrapes; and, in this process, taking one snapshot and rendering it for a RunMetrics of the run's size
never idle      one scrape's wall time in a process whose event loop is never idle (a greenlet always ready): the
                bound the exporter's idle wait (IDLE_WAIT_MAX_S per chunk) puts on a scrape

    python bench/metrics_bench.py [--streams 16,256] [--rounds 2] [--requests-per-stream 4] [--tokens 200]
                                  [--ttft-ms 250] [--itl-ms 20] [--scrape-s 1] [--trees before=<folder>,after=.]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # the llmload beside bench/, installed or not
sys.path.insert(0, str(BENCH))

import client_bench  # noqa: E402  _machine
import product_bench  # noqa: E402  the product path's run and its send-log join

ARMS = ("off", "scraped")
EFFORTS = ("low", "medium", "high")
GOAL_SCRAPE_WALL_MS = 200.0
GOAL_P99_MS = 1.0
RUN_LABEL = "results/2026-12-05T04-00-00-h100-gpt-oss-20b-mix-u256"
"""As long as a run's folder: every series carries it."""


@dataclass
class Scrapes:
    """What a scraping thread saw: (start, end) monotonic seconds, bytes and lines of each scrape sent whole."""

    spans_s: list[tuple[float, float]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape_forever(port: int, interval_s: float, stop: threading.Event, seen: Scrapes) -> None:
    while not stop.wait(interval_s):
        started_s = time.monotonic()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                body = response.read()
        except OSError:
            continue  # before the run listens, after it ends
        seen.spans_s.append((started_s, time.monotonic()))
        seen.sizes.append(len(body))
        seen.lines.append(body.count(b"\n"))


def _send_window_s(folder: Path) -> tuple[float, float]:
    """The first and last token send of the run's target (its send log, CLOCK_MONOTONIC as this process's)."""
    (send_log,) = folder.glob("send-*.jsonl")
    first_s, last_s = float("inf"), float("-inf")
    for line in send_log.read_bytes().splitlines():
        sent_s = orjson.loads(line)["sent_s"]
        if sent_s:
            first_s, last_s = min(first_s, sent_s[0]), max(last_s, sent_s[-1])
    return first_s, last_s


@dataclass
class Run:
    arm: str
    """The tree's label, then off or scraped."""
    streams: int
    row: product_bench.Row
    scrape_wall_ms: list[float]
    lines: list[int]
    kib: list[float]
    cpu_s: float


def _run(tree: Path, arm: str, streams: int, args: argparse.Namespace, folder: Path) -> Run:
    port = _free_port()
    product_bench.BENCH = tree / "bench"  # _product_run runs the load process in BENCH.parent: llmload from there
    settings = ("EFFORT=mix:" + ",".join(f"{e}=1" for e in EFFORTS), f"METRICS_PORT={port}")
    stop, seen = threading.Event(), Scrapes()
    scraper = threading.Thread(target=_scrape_forever, args=(port, args.scrape_s, stop, seen), daemon=True)
    if arm.endswith("scraped"):
        scraper.start()
    try:
        row = product_bench._product_run(streams, 0, args, folder, settings, f"make load, {arm.split()[-1]}")
    finally:
        stop.set()
    first_s, last_s = _send_window_s(folder)
    running = [i for i, (a, b) in enumerate(seen.spans_s) if a >= first_s and b <= last_s]
    events = row.token_err_ms.size
    return Run(arm, streams, row, [(seen.spans_s[i][1] - seen.spans_s[i][0]) * 1e3 for i in running],
               [seen.lines[i] for i in running], [seen.sizes[i] / 1024 for i in running],
               (row.cpu_per_event_us or 0.0) * events / 1e6)


def _records(requests: int, tokens: int) -> list:
    """``requests`` successful records of ``tokens`` events each, the efforts in turn."""
    from llmload.results.records import RequestRecord

    rng = np.random.default_rng(1)
    records = []
    for i in range(requests):
        gaps = (0.02 * rng.lognormal(0, 0.3, tokens - 1)).tolist()
        records.append(RequestRecord(request_id=str(i), prompt_id="p", start_unix_s=0.0, start_monotonic_s=0.0,
                                     e2e_s=0.25 + sum(gaps), ttft_s=0.25 * rng.lognormal(0, 0.3), ttfvt_s=1.0,
                                     tpot_s=0.02, itl_s=gaps, prompt_tokens=100, completion_tokens=tokens,
                                     reasoning_tokens=tokens // 2, effort=EFFORTS[i % 3]))
    return records


def filled_metrics(requests: int, tokens: int):
    """A RunMetrics of three efforts holding ``requests`` records of ``tokens`` events (a run's endpoint)."""
    from llmload.results.run_metrics import RunMetrics

    metrics = RunMetrics(RUN_LABEL, "h100", EFFORTS)
    for record in _records(requests, tokens):
        metrics.add(record)
    return metrics


def _add_us(tokens: int) -> float:
    """RunMetrics.add's CPU per record of ``tokens`` events in a warm loop (µs): the median of 5 passes of 3,000."""
    from llmload.results.run_metrics import RunMetrics

    records, passes = _records(3000, tokens), []
    for _ in range(5):
        metrics = RunMetrics(RUN_LABEL, "h100", EFFORTS)
        started_s = time.thread_time()
        for record in records:
            metrics.add(record)
        passes.append((time.thread_time() - started_s) / len(records) * 1e6)
    return statistics.median(passes)


def _in_process_scrape(tokens: int) -> tuple[float, float, int, int]:
    """CPU of taking one scrape's snapshot (ms, on the loop at once) and of rendering all of it (ms), its chunks
    and lines, in this process."""
    from llmload.results.run_metrics import render

    metrics = filled_metrics(3000, tokens)
    snapshot_s = render_s = 0.0
    for _ in range(20):
        started_s = time.thread_time()
        families = metrics.families(32, 32)
        chunks = iter(render(families))
        first = next(chunks)  # the snapshot is taken by now, whichever call takes it
        snapshot_s += time.thread_time() - started_s
        rest = list(chunks)
        render_s += time.thread_time() - started_s
    text = first + b"".join(rest)
    return snapshot_s / 20 * 1e3, render_s / 20 * 1e3, 1 + len(rest), text.count(b"\n")


_NEVER_IDLE = """
import sys, time
import gevent
sys.path.insert(0, {bench!r})
from metrics_bench import filled_metrics
from llmload.loadtest.exporter import _Body
from llmload.results.run_metrics import render

def busy():
    while True:
        gevent.sleep(0)

metrics = filled_metrics(3000, {tokens})
busy_loop = gevent.spawn(busy)
walls = []
for _ in range(5):
    started_s = time.perf_counter()
    b"".join(_Body(render(metrics.families(32, 32)), lambda: None))
    walls.append(time.perf_counter() - started_s)
print(min(walls) * 1e3, max(walls) * 1e3)
"""


def _never_idle_ms(tokens: int) -> tuple[float, float]:
    """A scrape's wall time (min, max of 5) where the loop always has a greenlet ready, in a process of its own
    (the exporter imports Locust, which patches this process's threads)."""
    done = subprocess.run([sys.executable, "-c", _NEVER_IDLE.format(bench=str(BENCH), tokens=tokens)], cwd=BENCH.parent,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    low, high = done.stdout.split()
    return float(low), float(high)


def _q(values: list[float]) -> str:
    if not values:
        return "-"
    p50, p99 = np.percentile(values, [50, 99])
    return f"{p50:.1f} / {p99:.1f} / {max(values):.1f}"


def format_table(runs: list[Run], streams: list[int], arms: list[str]) -> list[str]:
    out = ["| streams | arm | runs | scrapes while streaming | scrape wall p50 / p99 / max (ms) | lines, KiB per scrape "
           "| per-token error p50 / p99 / max (ms) | tokens over 1 ms | loop lag p99 (ms) | read lag p99 (ms) "
           "| CPU per token event (µs) | failed |",
           "|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for n in streams:
        for arm in arms:
            mine = [r for r in runs if r.streams == n and r.arm == arm]
            if not mine:
                continue
            errors = np.concatenate([r.row.token_err_ms for r in mine])
            walls = [w for r in mine for w in r.scrape_wall_ms]
            lines = [x for r in mine for x in r.lines]
            kib = [x for r in mine for x in r.kib]
            size = f"{statistics.mean(lines):,.0f}, {statistics.mean(kib):,.0f}" if lines else "-"
            avg = lambda values: statistics.mean(values) if values else float("nan")  # noqa: E731
            failed = sorted({f"{k}={v}" for r in mine for k, v in r.row.failed.items()})
            out.append(f"| {n} | {arm} | {len(mine)} | {len(walls)} | {_q(walls)} | {size} | "
                       f"{product_bench._quantiles(errors)} | {int(np.count_nonzero(errors > 1.0))} of {errors.size} | "
                       f"{avg([r.row.loop_lag_p99_ms for r in mine if r.row.loop_lag_p99_ms is not None]):.2f} | "
                       f"{avg([r.row.read_lag_p99_ms for r in mine if r.row.read_lag_p99_ms is not None]):.2f} | "
                       f"{avg([r.row.cpu_per_event_us for r in mine if r.row.cpu_per_event_us]):.1f} | "
                       f"{', '.join(failed) or 'none'} |")
    return out


def goal_lines(runs: list[Run], streams: list[int], trees: list[str]) -> list[str]:
    lines = []
    for tree, n in ((t, n) for t in trees for n in streams):
        scraped = [r for r in runs if r.streams == n and r.arm == f"{tree} scraped".strip()]
        off = [r for r in runs if r.streams == n and r.arm == f"{tree} off".strip()]
        walls = [w for r in scraped for w in r.scrape_wall_ms]
        if not scraped or not off or not walls:
            continue
        p99 = {arm: float(np.percentile(np.concatenate([r.row.token_err_ms for r in group]), 99))
               for arm, group in (("off", off), ("scraped", scraped))}
        wall_max = max(walls)
        per_scrape = [(s.cpu_s - o.cpu_s) / len(s.scrape_wall_ms) * 1e3 for s, o in zip(scraped, off) if s.scrape_wall_ms]
        lines.append(f"{tree + ', ' if tree else ''}{n} streams: scrape wall max {wall_max:.1f} ms ({'met' if wall_max < GOAL_SCRAPE_WALL_MS else 'MISSED'}"
                     f" < {GOAL_SCRAPE_WALL_MS:g}); per-token error p99 scraped {p99['scraped']:.3f} ms, off {p99['off']:.3f} ms "
                     f"({'met' if p99['scraped'] < GOAL_P99_MS else 'MISSED'} < {GOAL_P99_MS:g}); load process CPU scraped - off, "
                     f"paired by round, per scrape: {', '.join(f'{x:+.1f}' for x in per_scrape)} ms")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--streams", type=product_bench._csv_ints, default=[16, 256])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--requests-per-stream", type=int, default=4)
    p.add_argument("--ttft-ms", type=float, default=250.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--scrape-s", type=float, default=1.0)
    p.add_argument("--timeout-s", type=float, default=900.0)
    p.add_argument("--trees", type=lambda t: dict(x.split("=", 1) for x in t.split(",")), default={"": str(BENCH.parent)},
                   help="label=folder,...: the code each arm's load process runs (default: this checkout)")
    args = p.parse_args(argv)
    trees = {label: Path(folder).resolve() for label, folder in args.trees.items()}
    arms = [f"{label} {arm}".strip() for label in trees for arm in ARMS]
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = os.getloadavg()
    snapshot_ms, render_ms, chunks, lines = _in_process_scrape(args.tokens)
    never_idle = _never_idle_ms(args.tokens)
    print(f"in process: RunMetrics.add {_add_us(args.tokens):.1f} µs per record of {args.tokens} events (warm); one scrape "
          f"of three efforts, {lines:,} lines in {chunks} chunks: {snapshot_ms:.2f} ms of CPU up to its first chunk, "
          f"{render_ms:.1f} ms all told; with a never-idle loop its wall time {never_idle[0]:.0f}-{never_idle[1]:.0f} ms",
          flush=True)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="metrics_bench_") as tmp:
        for round_ in range(args.rounds):
            for streams in args.streams:
                for arm in arms if round_ % 2 == 0 else arms[::-1]:
                    folder = Path(tmp) / f"{streams}-{arm.replace(' ', '-')}-{round_}"
                    folder.mkdir()
                    run = _run(trees[arm.rsplit(" ", 1)[0] if " " in arm else ""], arm, streams, args, folder)
                    runs.append(run)
                    print(f"round {round_ + 1}, {streams} streams, {arm}: scrape wall {_q(run.scrape_wall_ms)} ms "
                          f"({len(run.scrape_wall_ms)}); per-token {product_bench._quantiles(run.row.token_err_ms)} ms; "
                          f"loop lag p99 {run.row.loop_lag_p99_ms} ms", file=sys.stderr, flush=True)
    print("\n".join(format_table(runs, args.streams, arms)))
    print()
    print("\n".join(goal_lines(runs, args.streams, list(trees))))
    load_end = os.getloadavg()
    print(f"\n`{shlex.join(['python', *sys.argv])}`: {started:%Y-%m-%d %H:%M} UTC, {client_bench._machine()}; target TTFT "
          f"{args.ttft_ms:g} ms, {args.tokens} tokens {args.itl_ms:g} ms apart, {args.requests_per_stream} requests per "
          f"stream, scraped every {args.scrape_s:g} s; load average {' '.join(f'{x:.2f}' for x in load_start)} at the "
          f"start, {' '.join(f'{x:.2f}' for x in load_end)} at the end.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
