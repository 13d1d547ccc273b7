#!/usr/bin/env python3
"""Trace replay benchmark (issue 22's goals): how closely TRACE keeps a trace's schedule, and how fast a large trace's
prompts are built.

dispatch  a made-up Mooncake trace of --rows requests at --rate requests/s (traces/make_samples.py's generator:
          bursty gamma gaps, shared blocks), replayed by what `make load` runs against a fresh built-in target
          with fixed timing (TTFT --ttft-ms, then each row's output length at --itl-ms; max_tokens from the trace,
          capped by --max-output), on a core of its own as `make load` places its built-in target
          (processes.core_of_its_own; --shared-cores leaves both processes on every core):

              python -m llmload load HOST=<target> TRACE=<trace> OUT=<tmp>

          summary.json's arrivals block gives the dispatch lag (actual send minus scheduled) over every row.
          Goal: p99 <= 2 ms at 200 requests/s.
build     a 10,000-row trace shaped like Mooncake's (inputs up to --build-max-blocks blocks of 512 tokens, a third of
          the rows continuing an earlier one): read_trace + trace_prompts, timed; then every prompt's text is
          encoded with o200k (not timed) and its count compared with its row's input length. Goal: <= 10 s, every
          count exact.

    python bench/trace_bench.py [--rate 200] [--rows 4000] [--build-rows 10000] [--build-max-blocks 24] [--repeats 1]
                                [--shared-cores]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))  # the llmload beside bench/, installed or not
sys.path.insert(0, str(REPO / "traces"))
sys.path.insert(0, str(BENCH))

import make_samples  # noqa: E402  the sample traces' generator
from llmload.system.processes import core_of_its_own  # noqa: E402

GOAL_LAG_P99_MS = 2.0
GOAL_BUILD_S = 10.0


def _write_trace(path: Path, rows: int, rate: float, max_blocks: int, max_output: int | None = None) -> Path:
    made = make_samples.mooncake_rows(rows, rate, 0, max_blocks)
    if max_output is not None:
        for row in made:
            row["output_length"] = min(row["output_length"], max_output)
    path.write_text("".join(json.dumps(row) + "\n" for row in made))
    return path


def dispatch_run(args: argparse.Namespace, tmp: Path, repeat: int) -> dict:
    """One replay of a --rate trace through `python -m llmload load`: the arrivals block of its summary."""
    from llmload.sim import start_sim, stop_sim

    trace = _write_trace(tmp / f"trace-{repeat}.jsonl", args.rows, args.rate, args.max_blocks, args.max_output)
    out = tmp / f"run-{repeat}"
    process, base_url = start_sim(["--fixed-ttft-ms", str(args.ttft_ms), "--fixed-itl-ms", str(args.itl_ms)])
    command = [sys.executable, "-m", "llmload", "load", f"HOST={base_url}", f"TRACE={trace}", f"OUT={out}"]
    started_s = time.monotonic()
    try:
        with contextlib.nullcontext() if args.shared_cores else core_of_its_own(process.pid):
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=args.timeout_s)
    finally:
        stop_sim(process)
    if not (out / "summary.json").exists():
        raise RuntimeError(f"{shlex.join(command)} wrote no summary (exit {done.returncode}): {done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    arrivals = summary["arrivals"]
    process_figures = (summary.get("generator") or {}).get("processes") or [{}]
    return {"wall_s": time.monotonic() - started_s, "rows": args.rows, "ok": summary["requests_ok"],
            "failed": summary["requests_failed"], "scheduled_rps": arrivals["scheduled_rate_rps"],
            "send_rps": arrivals["send_rate_rps"], "lag": arrivals["dispatch_lag_ms"], "late": arrivals["late_requests"],
            "cores": process_figures[0].get("cpu_cores"), "loop_lag_p99_ms": process_figures[0].get("event_loop_lag_ms", {}).get("p99")}


def build_run(args: argparse.Namespace, tmp: Path) -> dict:
    """Build a 10,000-row trace's prompts (timed), then check every count (not timed)."""
    from llmload.promptsets.tokens import harmony_encoding, text_tokens
    from llmload.promptsets.traces import read_trace, trace_prompts
    from llmload.promptsets.wordtokens import word_tokens

    harmony_encoding(), word_tokens()  # the tokenizer and the word list load once per process, before the clock
    path = _write_trace(tmp / "build.jsonl", args.build_rows, 5.0, args.build_max_blocks)
    started_s = time.perf_counter()
    trace = read_trace(path)
    read_s = time.perf_counter() - started_s
    prompts = trace_prompts(trace, seed=0)
    built_s = time.perf_counter() - started_s
    tokens = sum(row.input_tokens for row in trace.rows)
    blocks = {h for row in trace.rows for h in row.hash_ids}
    started_s = time.perf_counter()
    wrong = sum(text_tokens(p.messages[0]["content"]) != row.input_tokens for p, row in zip(prompts, trace.rows))
    return {"rows": len(trace.rows), "tokens": tokens, "unique_blocks": len(blocks), "read_s": read_s, "build_s": built_s,
            "text_mb": sum(len(p.messages[0]["content"]) for p in prompts) / 1e6, "wrong_counts": wrong,
            "check_s": time.perf_counter() - started_s}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rate", type=float, default=200.0, help="the dispatch trace's mean requests per second")
    p.add_argument("--rows", type=int, default=4000, help="its rows (4,000 at 200/s: 20 s)")
    p.add_argument("--max-blocks", type=int, default=4, help="its longest prompt, in blocks of 512 tokens")
    p.add_argument("--max-output", type=int, default=40, help="its longest output, in tokens")
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--itl-ms", type=float, default=5.0)
    p.add_argument("--build-rows", type=int, default=10000)
    p.add_argument("--build-max-blocks", type=int, default=24, help="the build trace's longest prompt, in blocks")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=900.0)
    p.add_argument("--shared-cores", action="store_true", help="leave the target and the load on every core")
    p.add_argument("--skip-dispatch", action="store_true")
    p.add_argument("--skip-build", action="store_true")
    args = p.parse_args(argv)
    started = datetime.datetime.now().astimezone()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="trace_bench_") as tmp:
        if not args.skip_build:
            b = build_run(args, Path(tmp))
            verdict = "met" if b["build_s"] <= GOAL_BUILD_S and not b["wrong_counts"] else "MISSED"
            print(f"build: {b['rows']:,} rows, {b['tokens']:,} prompt tokens ({b['unique_blocks']:,} distinct blocks, "
                  f"{b['text_mb']:.0f} MB of text): read {b['read_s']:.2f} s, read and built {b['build_s']:.2f} s "
                  f"({verdict} <= {GOAL_BUILD_S:g} s); counts checked with o200k in {b['check_s']:.1f} s: "
                  f"{b['wrong_counts']} wrong")
        if not args.skip_dispatch:
            print("| repeat | rows | scheduled / sent (req/s) | dispatch lag p50 / p99 / max (ms) | over 10 ms late "
                  "| ok (failed) | generator cores | loop lag p99 (ms) | wall (s) |")
            print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for repeat in range(args.repeats):
                d = dispatch_run(args, Path(tmp), repeat)
                lag = d["lag"]
                verdict = "met" if lag["p99"] <= GOAL_LAG_P99_MS else "MISSED"
                print(f"| {repeat + 1} | {d['rows']} | {d['scheduled_rps']:.1f} / {d['send_rps']:.1f} "
                      f"| {lag['median']:.3f} / {lag['p99']:.3f} / {lag['max']:.2f} ({verdict} p99 <= {GOAL_LAG_P99_MS:g}) "
                      f"| {d['late']} | {d['ok']} ({d['failed']}) | {d['cores'] or 0:.2f} | {d['loop_lag_p99_ms'] or 0:.2f} "
                      f"| {d['wall_s']:.0f} |", flush=True)
    load_end = os.getloadavg()
    print(f"\n`{shlex.join(['python', *sys.argv])}` — {started:%Y-%m-%d %H:%M %Z}, nproc {os.cpu_count()}; load average "
          f"{' '.join(f'{x:.2f}' for x in load_start)} at the start, {' '.join(f'{x:.2f}' for x in load_end)} at the end.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
