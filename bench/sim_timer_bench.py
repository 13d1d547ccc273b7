#!/usr/bin/env python3
"""The built-in target's timers: the inter-token gaps a client sees when the target's steps take under a millisecond.

    python bench/sim_timer_bench.py [--itl-ms 0.25,0.5,1,4] [--streams 4] [--tokens 200] [--requests-per-stream 6]
                                    [--rehearsal-users 16] [--speedup 20]

A rehearsal at SPEEDUP N runs every step N times faster: an H100's 4 ms decode step is 0.2 ms at SPEEDUP 20. For
each set gap G this starts a fixed-timing target (--fixed-ttft-ms 5 --fixed-itl-ms G) twice, one after the other:

  timerfd       the product: the target's event loop wakes on a timerfd armed at each timer's instant (sim/loop.py)
  epoll ms      the loop before: epoll's timeout rounded up to a whole millisecond (the same code with
                llmload.system.timerfd.open_timerfd returning None in the target's process, as where Linux has no timerfd)

and N streams of the raw client (kernel arrival stamps) send requests of --tokens tokens. Printed per variant: the
client's inter-token gaps p10/p50/p90 in ms, and the share of gaps under half of G (tokens that came in a burst
with the one before). Exact delivery gives G at every quantile and no bursts.

Then a rehearsal as users run one, with both variants: the target playing the H100 profile at --speedup, and
`python -m llmload load` with --rehearsal-users users (8 requests each, 200 tokens, ignore_eos). Printed: the
target's CPU seconds (what exact wakes cost it) and the run's inter-token gaps (mean, median, p90) as predicted for the H100 (its
summary.json's predicted itl_ms) beside the server's own mean inter-token latency times the speedup.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from client_bench import _process_cpu_s  # noqa: E402  the same reading of /proc as client_bench's columns

MODEL = "openai/gpt-oss-20b"
_NO_TIMERFD = "import llmload.system.timerfd as timerfd\ntimerfd.open_timerfd = lambda: None\n"
"""A sitecustomize for the target's process: its loop falls back to epoll's millisecond timeout."""


def _gaps_ms(base_url: str, streams: int, tokens: int, requests_per_stream: int) -> np.ndarray:
    """Every inter-token gap the streams saw, in ms."""
    import gevent

    from llmload.client.body import ChatOptions, chat_body
    from llmload.client.measure import measure_request
    from llmload.client.raw import RawChatClient

    body = chat_body(ChatOptions(model=MODEL, effort="low", max_tokens=tokens, extra_body={"ignore_eos": True}),
                     [{"role": "user", "content": "Count."}])
    records = []

    def user() -> None:
        client = RawChatClient(base_url, timeout_s=60.0, kernel_stamps=True)
        for _ in range(requests_per_stream):
            measure_request(client, body, "bench", records.append)
        client.close()

    gevent.joinall([gevent.spawn(user) for _ in range(streams)])
    failed = [r.error for r in records if not r.ok]
    if failed:
        raise SystemExit(f"requests failed: {failed[:3]}")
    return np.concatenate([np.asarray(r.itl_s[1:], dtype=float) for r in records]) * 1e3  # past the first: steady


@contextlib.contextmanager
def _target(sim_args: list[str], timerfd: bool) -> Iterator[tuple[subprocess.Popen, str]]:
    """A built-in target whose loop wakes on a timerfd, or (``timerfd`` False) on epoll's millisecond timeout."""
    from llmload.sim import start_sim, stop_sim

    saved = os.environ.get("PYTHONPATH")
    with tempfile.TemporaryDirectory() as site:
        if not timerfd:
            Path(site, "sitecustomize.py").write_text(_NO_TIMERFD)
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (site, saved) if p)
        try:
            process, base_url = start_sim(sim_args)
        finally:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
        try:
            yield process, base_url
        finally:
            stop_sim(process)


def _rehearsal(timerfd: bool, args: argparse.Namespace) -> str:
    """`llmload load` against the H100 profile at --speedup: the target's CPU, the predicted gaps, the server's."""
    with _target(["--gpu", "h100", "--speedup", f"{args.speedup:g}"], timerfd) as (process, base_url), \
            tempfile.TemporaryDirectory() as out:
        cpu_before_s = _process_cpu_s(process.pid)
        done = subprocess.run([sys.executable, "-m", "llmload", "load", f"HOST={base_url}", f"USERS={args.rehearsal_users}",
                               "SPAWN_RATE=0", f"REQUESTS={8 * args.rehearsal_users}", "WARMUP_REQUESTS=0", "MAX_TOKENS=200",
                               "EFFORT=low", 'EXTRA_BODY={"ignore_eos": true}', f"OUT={out}/run"],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        cpu_s = _process_cpu_s(process.pid) - cpu_before_s
        if done.returncode != 0:
            raise SystemExit(done.stderr[-2000:])
        summary = json.loads(Path(out, "run", "summary.json").read_text())
    itl = summary["predicted"]["itl_ms"]
    server_itl_ms = summary["server_vs_client"]["server_mean_itl_ms"] * args.speedup
    return (f"| {'timerfd' if timerfd else 'epoll ms'} | {cpu_s:.2f} | {itl['mean']:.2f} / {itl['median']:.2f} / "
            f"{itl['p90']:.2f} | {server_itl_ms:.2f} |")


def _measure(itl_ms: float, timerfd: bool, args: argparse.Namespace) -> str:
    with _target(["--fixed-ttft-ms", "5", "--fixed-itl-ms", f"{itl_ms:g}"], timerfd) as (_, base_url):
        gaps = _gaps_ms(base_url, args.streams, args.tokens, args.requests_per_stream)
    p10, p50, p90 = np.percentile(gaps, [10, 50, 90])
    burst = float(np.mean(gaps < itl_ms / 2)) * 100
    return (f"| {itl_ms:g} | {'timerfd' if timerfd else 'epoll ms'} | {len(gaps)} | {p10:.3f} / {p50:.3f} / {p90:.3f} "
            f"| {burst:.1f}% |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--itl-ms", default="0.25,0.5,1,4")
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--requests-per-stream", type=int, default=6)
    parser.add_argument("--rehearsal-users", type=int, default=16)
    parser.add_argument("--speedup", type=float, default=20.0)
    args = parser.parse_args()
    print("| set gap (ms) | target's timers | gaps | client's gap p10 / p50 / p90 (ms) | gaps under half the set one |")
    print("|---:|---|---:|---|---:|")
    for itl_ms in (float(v) for v in args.itl_ms.split(",")):
        for timerfd in (True, False):
            print(_measure(itl_ms, timerfd, args), flush=True)
    print()
    print(f"| H100 profile, SPEEDUP {args.speedup:g}, {args.rehearsal_users} users | target CPU (s) "
          "| inter-token gap predicted for h100, mean / median / p90 (ms) | server's mean ITL x SPEEDUP (ms) |")
    print("|---|---:|---|---:|")
    for timerfd in (True, False):
        print(_rehearsal(timerfd, args), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
