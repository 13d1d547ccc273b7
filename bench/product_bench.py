#!/usr/bin/env python3
"""Product-path benchmark: `make load` (Locust, headless, a user's defaults) against the built-in target's send log.

For each number of streams N and of WORKERS W it starts a fresh built-in target with fixed timing (TTFT
--ttft-ms, then --tokens tokens --itl-ms apart) and its send log, and runs what `make load` runs:

    python -m llmload load HOST=<target> USERS=N SPAWN_RATE=0 REQUESTS=<k*N> EFFORT=medium MAX_TOKENS=<tokens>
                           EXTRA_BODY='{"ignore_eos": true}' WORKERS=W OUT=<tmp>

Every user starts at once (SPAWN_RATE=0) and every request takes the same time, so the streams move in
lockstep: each engine step's N events land together, as vLLM emits one token for every running sequence
per step. The records of samples.jsonl are joined with the send log by request id:

per-token error   client arrival of each token event minus the moment the target wrote it
TTFT error        the same for the first token
loop lag          the run's own self-check (summary.json's generator block): the event loop's oversleep
CPU per event     the generator processes' CPU seconds over the token events they read (µs)

With --apis chat,responses each (N, W) runs once per API, one after the other in the same round (API=responses:
POST /v1/responses, the same target, timing and send log), and the Responses API's figures are also given as ratios
to chat's (issue 23's goal: per-token timing as exact over the Responses API as over chat).

With --bare the same N streams also run through the bare client (bench/client_bench.py's worker: greenlets
looping measure_request, no Locust), started together like the product path, against a fresh target of the
same timing, so both rows come from the same run of this script.

    python bench/product_bench.py [--streams 16,256,1000] [--workers 0,1,2] [--requests-per-stream 4]
                                  [--ttft-ms 250] [--itl-ms 20] [--tokens 50] [--bare] [--repeats 1] [--apis chat]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # the llmload beside bench/, installed or not
sys.path.insert(0, str(BENCH))

import client_bench  # noqa: E402  the bare client's worker and the send-log join

GOAL_P99_MS = 1.0
GOAL_LOOP_LAG_P99_MS = 5.0
GOAL_CPU_RATIO = 1.25
RESPONSES = "API=responses"


@dataclass(frozen=True)
class Row:
    """One (path, streams, workers) run: timing errors in ms against the send log, and the generator's figures."""

    path: str
    streams: int
    workers: int
    token_err_ms: np.ndarray
    ttft_err_ms: np.ndarray
    joined: int
    unjoined: int
    loop_lag_p99_ms: float | None
    read_lag_p99_ms: float | None
    events_per_read: float | None
    cpu_per_event_us: float | None
    cores: float | None
    verdict: str
    wall_s: float
    failed: dict[str, int]


def _quantiles(values_ms: np.ndarray) -> str:
    if values_ms.size == 0:
        return "-"
    p50, p99 = np.percentile(values_ms, [50, 99])
    return f"{p50:.3f} / {p99:.3f} / {values_ms.max():.2f}"


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _token_events(samples: Path) -> int:
    events = 0
    for line in samples.read_bytes().splitlines():
        r = orjson.loads(line)
        if r.get("ttft_s") is not None:
            events += 1 + len(r["itl_s"])
    return events


def _product_run(streams: int, workers: int, args: argparse.Namespace, tmp: Path, settings: tuple[str, ...] = (),
                 path: str = "make load") -> Row:
    """One `python -m llmload load` run (with more ``settings``) against a fresh target with a send log."""
    from llmload.sim import start_sim, stop_sim

    name = f"{streams}-{workers}-{len(list(tmp.iterdir()))}"
    send_log = tmp / f"send-{name}.jsonl"
    out = tmp / f"run-{name}"
    process, base_url = start_sim(["--fixed-ttft-ms", str(args.ttft_ms), "--fixed-itl-ms", str(args.itl_ms),
                                   "--send-log", str(send_log)])
    command = [sys.executable, "-m", "llmload", "load", f"HOST={base_url}", f"USERS={streams}", "SPAWN_RATE=0",
               f"REQUESTS={args.requests_per_stream * streams}", "EFFORT=medium", f"MAX_TOKENS={args.tokens}",
               'EXTRA_BODY={"ignore_eos": true}', f"WORKERS={workers}", f"OUT={out}", *settings]
    started_s = time.monotonic()
    try:
        done = subprocess.run(command, cwd=BENCH.parent, capture_output=True, text=True, timeout=args.timeout_s)
    finally:
        stop_sim(process)  # flushes the send log
    wall_s = time.monotonic() - started_s
    if not (out / "summary.json").exists():
        raise RuntimeError(f"{shlex.join(command)} wrote no summary (exit {done.returncode}): {done.stderr[-2000:]}")
    ttft_err_s, _, token_err_s, joined, unjoined = client_bench._join([out / "samples.jsonl"], send_log)
    summary = orjson.loads((out / "summary.json").read_bytes())
    generator = summary.get("generator") or {}
    processes = generator.get("processes") or []
    readers = [p for p in processes if p.get("events_per_read") is not None] or processes
    cpu_s = sum(p.get("cpu_s") or 0.0 for p in processes)
    events = _token_events(out / "samples.jsonl")
    loop = [p["event_loop_lag_ms"]["p99"] for p in processes if p["event_loop_lag_ms"]["p99"] is not None]
    read = [p["arrival_to_read_lag_ms"]["p99"] for p in processes if p["arrival_to_read_lag_ms"]["p99"] is not None]
    per_read = [p["events_per_read"] for p in readers if p.get("events_per_read") is not None]
    verdict = (generator.get("advice") or ("limited" if generator.get("generator_limited") else "kept up"))
    return Row(path, streams, workers, np.abs(np.asarray(token_err_s)) * 1e3,
               np.abs(np.asarray(ttft_err_s)) * 1e3, joined, unjoined, max(loop) if loop else None,
               max(read) if read else None, float(np.mean(per_read)) if per_read else None,
               cpu_s / events * 1e6 if cpu_s and events else None,
               sum(p["cpu_cores"] for p in processes) if processes else None, verdict, wall_s,
               {k: v for k, v in summary.get("errors", {}).items() if k != "interrupted"})


def _bare_run(streams: int, args: argparse.Namespace) -> Row:
    """The bare client at the same streams, started together (no ramp), one process."""
    bare_args = argparse.Namespace(window_s=args.bare_window_s, warmup_s=0.0, pin=False)
    variant = client_bench.Variant("raw", "kernel", 1)
    client_bench.TIMING_TTFT_MS, client_bench.TIMING_ITL_MS = args.ttft_ms, args.itl_ms
    client_bench.TIMING_MAX_TOKENS = args.tokens
    started_s = time.monotonic()
    timing = client_bench.measure_timing(variant, streams, bare_args)
    return Row("bare client", streams, 0, timing.token_abs_err_ms, timing.ttft_abs_err_ms, timing.joined_requests,
               timing.unjoined_requests, None, timing.reads.lag_p99_ms, timing.reads.events_per_wakeup,
               timing.cpu_per_event_us, timing.load.client, "-", time.monotonic() - started_s, timing.errors)


def format_table(rows: list[Row]) -> str:
    out = ["| path | streams | WORKERS | per-token error p50 / p99 / max (ms) | TTFT error p50 / p99 / max (ms) "
           "| tokens over 1 ms | loop lag p99 (ms) | read lag p99 (ms) | events per read | CPU per token event (µs) "
           "| generator cores | self-check | joined (unjoined) | failed |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
    for r in rows:
        late = int(np.count_nonzero(r.token_err_ms > 1.0))
        out.append(f"| {r.path} | {r.streams} | {r.workers if r.path != 'bare client' else '-'} "
                   f"| {_quantiles(r.token_err_ms)} | {_quantiles(r.ttft_err_ms)} | {late} of {r.token_err_ms.size} "
                   f"| {_fmt(r.loop_lag_p99_ms)} | {_fmt(r.read_lag_p99_ms)} | {_fmt(r.events_per_read)} "
                   f"| {_fmt(r.cpu_per_event_us, '.1f')} | {_fmt(r.cores)} | {r.verdict} | {r.joined} ({r.unjoined}) "
                   f"| {', '.join(f'{k}={v}' for k, v in sorted(r.failed.items())) or 'none'} |")
    return "\n".join(out)


def goal_lines(rows: list[Row]) -> list[str]:
    lines = []
    bare = {r.streams: r for r in rows if r.path == "bare client"}
    for r in rows:
        if not r.path.startswith("make load") or r.token_err_ms.size == 0:
            continue
        p99 = float(np.percentile(r.token_err_ms, 99))
        parts = [f"per-token p99 {p99:.3f} ms ({'met' if p99 <= GOAL_P99_MS else 'MISSED'} <= {GOAL_P99_MS:g})"]
        if r.loop_lag_p99_ms is not None:
            met = r.loop_lag_p99_ms <= GOAL_LOOP_LAG_P99_MS
            parts.append(f"loop lag p99 {r.loop_lag_p99_ms:.2f} ms ({'met' if met else 'MISSED'} <= {GOAL_LOOP_LAG_P99_MS:g})")
        b = bare.get(r.streams)
        if b is not None and b.cpu_per_event_us and r.cpu_per_event_us:
            ratio = r.cpu_per_event_us / b.cpu_per_event_us
            parts.append(f"CPU per event {ratio:.2f}x the bare client's ({'met' if ratio <= GOAL_CPU_RATIO else 'MISSED'} "
                         f"<= {GOAL_CPU_RATIO:g}x)")
        lines.append(f"{r.path}, {r.streams} streams, WORKERS={r.workers}: " + "; ".join(parts))
    return lines


def api_ratio_lines(rows: list[Row]) -> list[str]:
    """Per (streams, WORKERS): the Responses API's timing errors and CPU per event over chat's, from runs of one round
    (each Responses run against the chat run just before it)."""
    lines = []
    chat: Row | None = None
    for r in rows:
        if r.path == "make load":
            chat = r
        elif r.path == f"make load {RESPONSES}" and chat is not None and (chat.streams, chat.workers) == (r.streams, r.workers):
            if r.token_err_ms.size == 0 or chat.token_err_ms.size == 0:
                continue
            ratios = []
            pairs = (("per-token", r.token_err_ms, chat.token_err_ms), ("TTFT", r.ttft_err_ms, chat.ttft_err_ms))
            for name, ours, theirs in pairs:
                for q in (50, 99):
                    a, b = float(np.percentile(ours, q)), float(np.percentile(theirs, q))
                    shown = f"{name} p{q} {a:.3f} / {b:.3f} ms"
                    ratios.append(f"{shown} = {a / b:.2f}x" if b > 0 else shown)
            if r.cpu_per_event_us and chat.cpu_per_event_us:
                ratios.append(f"CPU per token event {r.cpu_per_event_us:.1f} / {chat.cpu_per_event_us:.1f} us = "
                              f"{r.cpu_per_event_us / chat.cpu_per_event_us:.2f}x")
            lines.append(f"Responses / chat, {r.streams} streams, WORKERS={r.workers}: " + "; ".join(ratios))
    return lines


def _csv_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--streams", type=_csv_ints, default=[16, 256, 1000])
    p.add_argument("--workers", type=_csv_ints, default=[0, 1, 2])
    p.add_argument("--requests-per-stream", type=int, default=4)
    p.add_argument("--ttft-ms", type=float, default=250.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--tokens", type=int, default=50)
    p.add_argument("--bare", action="store_true", help="also the bare client at each number of streams")
    p.add_argument("--bare-window-s", type=float, default=6.0)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=900.0)
    p.add_argument("--apis", type=lambda t: [a for a in t.split(",") if a], default=["chat"],
                   help="chat, responses or both (run one after the other at each streams and WORKERS)")
    args = p.parse_args(argv)
    started = datetime.datetime.now().astimezone()
    load_start = os.getloadavg()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="product_bench_") as tmp:
        for _ in range(args.repeats):
            for streams in args.streams:
                if args.bare:
                    rows.append(_bare_run(streams, args))
                for workers in args.workers:
                    for api in args.apis:
                        settings = () if api == "chat" else (f"API={api}",)
                        path = " ".join(("make load", *settings))
                        rows.append(_product_run(streams, workers, args, Path(tmp), settings, path))
                        print(format_table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(format_table(rows))
    print()
    for line in goal_lines(rows) + api_ratio_lines(rows):
        print(line)
    load_end = os.getloadavg()
    print(f"\n`{shlex.join(['python', *sys.argv])}` — {started:%Y-%m-%d %H:%M %Z}, {client_bench._machine()}; "
          f"target TTFT {args.ttft_ms:g} ms, {args.tokens} tokens {args.itl_ms:g} ms apart, "
          f"{args.requests_per_stream} requests per stream; load average "
          f"{' '.join(f'{x:.2f}' for x in load_start)} at the start, {' '.join(f'{x:.2f}' for x in load_end)} at the end.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
