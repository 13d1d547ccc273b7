#!/usr/bin/env python3
"""Conversations' cost on the request path (issue 22's goal): client CPU per token event with TURNS within 5% of
single turns.

product  what `make load` runs (bench/product_bench.py's run: a fresh built-in target with fixed timing and a send
         log, --streams users started together, MAX_TOKENS tokens with ignore_eos), once with single requests and once
         with TURNS=--turns (no think time), alternating, --repeats times each:

             python -m llmload load HOST=<target> USERS=N SPAWN_RATE=0 REQUESTS=<k*N> MAX_TOKENS=T ... [TURNS=4]

         CPU per token event is the generator's CPU seconds (summary.json's self-check) over the token events read.
         A conversation keeps each answer's text (client/accumulator.py's AnswerAccumulator) and sends a growing
         history: per request, more bytes to encode and send; per token event, the answer's text appended.
events   the accumulator alone, in this process: a recorded stream of the built-in target's chunks (reasoning, then
         answer) fed to StreamAccumulator and to AnswerAccumulator, timed per event (the per-event part, apart from the
         machine's noise).

    python bench/conversation_bench.py [--streams 64] [--turns 4] [--tokens 50] [--requests-per-stream 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import product_bench  # noqa: E402  the product path's run and table

GOAL_RATIO = 1.05


def _chunks(tokens: int, reasoning: int) -> list[dict]:
    """A stream as the built-in target sends it (continuous usage on every chunk), decoded."""
    from llmload.sim.chunks import StreamEncoder

    encoder = StreamEncoder("chatcmpl-x", 0, "openai/gpt-oss-20b", 120, True)
    raw = encoder.role() + b"".join(encoder.token(g, reasoning, "length" if g == tokens else None) for g in range(1, tokens + 1))
    raw += encoder.usage(tokens, reasoning, 0)
    events = [line[6:] for line in raw.split(b"\r\n") if line.startswith(b"data: ")]
    return [orjson.loads(e.split(b"\n\n")[0]) for e in events]


def event_cost_us(tokens: int, rounds: int) -> tuple[float, float]:
    """(µs per event single, µs per event keeping the answer): the fastest of ``rounds`` timings of 200 whole streams
    (the least disturbed by the machine's other work)."""
    from llmload.client.accumulator import AnswerAccumulator, StreamAccumulator

    chunks = _chunks(tokens, tokens // 2)

    def single() -> None:
        acc = StreamAccumulator("r", "p", 0.0, 0.0)
        for c in chunks:
            acc.on_chunk(1.0, c)

    def keeping() -> None:
        acc = AnswerAccumulator("r", "p", 0.0, 0.0)
        acc.answer = []  # as client/measure.py sets it
        for c in chunks:
            acc.on_chunk(1.0, c)

    times: dict[str, list[float]] = {"single": [], "keeping": []}
    for _ in range(rounds):
        for name, feed in (("single", single), ("keeping", keeping)):
            started = time.perf_counter()
            for _ in range(200):
                feed()
            times[name].append((time.perf_counter() - started) / (200 * len(chunks)) * 1e6)
    return min(times["single"]), min(times["keeping"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--streams", type=int, default=64)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--requests-per-stream", type=int, default=8)
    p.add_argument("--ttft-ms", type=float, default=100.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--tokens", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--event-rounds", type=int, default=30)
    p.add_argument("--timeout-s", type=float, default=900.0)
    args = p.parse_args(argv)
    started = datetime.datetime.now().astimezone()
    load_start = os.getloadavg()
    single_us, keeping_us = event_cost_us(args.tokens, args.event_rounds)
    rows = []
    with tempfile.TemporaryDirectory(prefix="conversation_bench_") as tmp:
        for _ in range(args.repeats):
            for label, settings in (("single requests", ()), (f"TURNS={args.turns}", (f"TURNS={args.turns}",))):
                rows.append(product_bench._product_run(args.streams, 0, args, Path(tmp), settings, label))
                print(product_bench.format_table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(product_bench.format_table(rows))
    per = {label: [r.cpu_per_event_us for r in rows if r.path == label and r.cpu_per_event_us]
           for label in ("single requests", f"TURNS={args.turns}")}
    single, turns = (statistics.median(v) for v in per.values())
    ratio = turns / single
    print(f"\nCPU per token event, median of {args.repeats}: single requests {single:.1f} µs, TURNS={args.turns} "
          f"{turns:.1f} µs: {ratio:.3f}x ({'met' if ratio <= GOAL_RATIO else 'MISSED'} <= {GOAL_RATIO:g}x); each run: "
          + "; ".join(f"{label} " + ", ".join(f"{v:.1f}" for v in values) for label, values in per.items()))
    print(f"The accumulator alone, per event of a {args.tokens}-token stream: {single_us:.3f} µs, keeping the answer "
          f"{keeping_us:.3f} µs (+{keeping_us - single_us:.3f} µs)")
    load_end = os.getloadavg()
    print(f"\n`{shlex.join(['python', *sys.argv])}` — {started:%Y-%m-%d %H:%M %Z}, nproc {os.cpu_count()}; target TTFT "
          f"{args.ttft_ms:g} ms, {args.tokens} tokens {args.itl_ms:g} ms apart, {args.requests_per_stream} requests per "
          f"stream; load average {' '.join(f'{x:.2f}' for x in load_start)} at the start, "
          f"{' '.join(f'{x:.2f}' for x in load_end)} at the end.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
