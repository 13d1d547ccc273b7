#!/usr/bin/env python3
"""Does a queued stream's armed watcher cost the reactor anything? The product path with the shipped reactor against
one whose watcher is stopped while its stream waits in the reader's queue, A/B, interleaved.

llmload/client/reactor.py keeps each response's level-triggered watcher started for the whole response; its
callback queues the stream once and returns at once while it is queued. Each time the loop polls while streams wait
in the queue (when a step's events outnumber a batch), epoll reports every waiting socket again and libev calls each
one's callback for nothing. The other arm stops the watcher in the callback and starts it again once the reader has
read the socket: no such calls, two libev calls (and, where a poll came between, two epoll_ctl) per read instead.

Each run is bench/product_bench.py's product path (its _product_run: a fresh built-in target with fixed timing and
its send log, every user started at once so the streams move in lockstep), WORKERS=0 so one process reads them all:

    python -m llmload load HOST=<target> USERS=N SPAWN_RATE=0 REQUESTS=<k*N> EFFORT=medium MAX_TOKENS=<tokens>
                           EXTRA_BODY='{"ignore_eos": true}' WORKERS=0 OUT=<tmp>

armed     the reactor as shipped
parked    Reactor replaced, in the load process only, by ParkedReactor below (this file, put in by a sitecustomize on
          PYTHONPATH when it imports llmload.client.reactor); nothing else differs
counted   once per N at the end, the shipped reactor with counters: callbacks per event read, and how many found their
          stream already queued (the armed watchers' cost, counted)

Before the runs it times, in this process, what each arm pays per event: an armed watcher's callback that finds its
stream queued, and a stop and a start of a watcher with and without a poll between.

CPU per token event and the event loop's lag p99 are the run's own self-check (summary.json's generator block),
the per-token error is product_bench's join. The arms alternate which goes first round by round.

    python bench/reactor_bench.py [--streams 256,1000] [--rounds 4] [--requests-per-stream 2] [--tokens 50]
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parent
ARM_ENV = "LLMLOAD_REACTOR_BENCH_ARM"
COUNTS_ENV = "LLMLOAD_REACTOR_BENCH_COUNTS"
TARGET = "llmload.client.reactor"


def variants(module: ModuleType) -> dict[str, type]:
    """The arms' Reactor classes, made from the module as it was imported."""
    import time

    import gevent

    base, response_class = module.Reactor, module._Response

    class _Parked(response_class):
        __slots__ = ("watcher",)

    class ParkedReactor(base):
        """The shipped reactor, but a watcher is stopped while its stream waits in the queue."""

        stops = starts = 0

        def serve(self, fileno: int, on_readable: Any, idle_timeout_s: float) -> float:
            response = _Parked(on_readable)
            watcher = response.watcher = self._loop.io(fileno, 1)
            watcher.start(self._on_ready, response)
            try:
                while True:
                    try:
                        return response.result.get(timeout=max(0.0, response.last_read_s + idle_timeout_s - time.monotonic()))
                    except gevent.Timeout:
                        if time.monotonic() - response.last_read_s >= idle_timeout_s:
                            raise module.IdleTimeout() from None
            finally:
                response.closed = True
                watcher.stop()
                watcher.close()

        def _on_ready(self, response: Any) -> None:
            if response.queued:
                return
            response.watcher.stop()  # no callback while it waits: the reader starts it again once it has read
            ParkedReactor.stops += 1
            response.queued = True
            self._queue.append(response)
            if self._asleep:
                self._asleep = False
                self._loop.run_callback(self._reader.switch)

        def _read_forever(self) -> None:
            while True:
                if not self._queue:
                    self._asleep = True
                    self._hub.switch()
                    continue
                queue, self._queue = self._queue[:module.BATCH], self._queue[module.BATCH:]
                now_s = time.monotonic()
                for response in queue:
                    response.queued = False
                    if response.closed or response.result.ready():
                        continue
                    response.last_read_s = now_s
                    try:
                        end_s = response.on_readable()
                    except Exception as e:
                        response.result.set_exception(e)
                    else:
                        if end_s is not None:
                            response.result.set(end_s)
                        else:
                            response.watcher.start(self._on_ready, response)  # level-triggered: what came meanwhile fires
                            ParkedReactor.starts += 1
                if self._queue:
                    gevent.sleep(0)

    class CountedReactor(base):
        """The shipped reactor, counting its watchers' callbacks and those that found their stream already queued."""

        calls = again = 0

        def _on_ready(self, response: Any) -> None:
            CountedReactor.calls += 1
            if response.queued:
                CountedReactor.again += 1
                return
            response.queued = True
            self._queue.append(response)
            if self._asleep:
                self._asleep = False
                self._loop.run_callback(self._reader.switch)

    return {"parked": ParkedReactor, "counted": CountedReactor}


def _write_counts(module: ModuleType, reactor: type, path: str) -> None:
    import orjson

    from llmload.client.readstats import PROCESS_READ_STATS

    counts = {k: getattr(reactor, k) for k in ("stops", "starts", "calls", "again") if hasattr(reactor, k)}
    counts["events_read"] = PROCESS_READ_STATS.events
    Path(path).write_bytes(orjson.dumps(counts))


def watcher_costs(n: int = 1000) -> tuple[float, float, float]:
    """CPU µs, in this process, of: a callback of an armed watcher on a readable socket that returns at once (epoll's
    report of it included: what a queued stream costs per poll); a stop and a start with no poll between (no
    syscall); a stop, a poll, a start and a poll (libev's epoll_ctl DEL and ADD, and one callback)."""
    import socket
    import time

    import gevent

    loop = gevent.get_hub().loop
    pairs = [socket.socketpair() for _ in range(n)]
    for _, writer in pairs:
        writer.send(b"x")  # readable until read: nobody reads
    watchers = [loop.io(reader.fileno(), 1) for reader, _ in pairs]
    calls = [0]

    def callback() -> None:
        calls[0] += 1

    for w in watchers:
        w.start(callback)
    started_s, cpu_s = time.monotonic(), time.process_time()
    while time.monotonic() - started_s < 1.0:
        gevent.sleep(0.0005)  # each wake-up polls, and epoll reports every socket again
    per_callback_us = (time.process_time() - cpu_s) / calls[0] * 1e6
    cpu_s = time.process_time()
    for _ in range(20):
        for w in watchers:
            w.stop()
            w.start(callback)
    no_poll_us = (time.process_time() - cpu_s) / (20 * n) * 1e6
    cpu_s = time.process_time()
    for _ in range(20):
        for w in watchers:
            w.stop()
        gevent.sleep(0.0005)
        for w in watchers:
            w.start(callback)
        gevent.sleep(0.0005)
    polled_us = (time.process_time() - cpu_s) / (20 * n) * 1e6
    for w in watchers:
        w.stop()
        w.close()
    for reader, writer in pairs:
        reader.close()
        writer.close()
    return per_callback_us, no_poll_us, polled_us


def install() -> None:
    """From sitecustomize: when ``ARM_ENV`` names an arm, its Reactor replaces the shipped one as the module loads."""
    import importlib.abc
    import importlib.util

    arm = os.environ.get(ARM_ENV, "")
    if arm not in ("parked", "counted"):
        return

    class _After(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
            if name != TARGET:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            execute = spec.loader.exec_module

            def exec_module(module: ModuleType) -> None:
                execute(module)
                module.Reactor = reactor = variants(module)[arm]
                if os.environ.get(COUNTS_ENV):
                    atexit.register(_write_counts, module, reactor, os.environ[COUNTS_ENV])

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _After())


def main(argv: list[str] | None = None) -> int:
    import argparse
    import datetime
    import shlex
    import statistics
    import tempfile

    import numpy as np
    import orjson

    sys.path.insert(0, str(BENCH.parent))
    sys.path.insert(0, str(BENCH))
    import client_bench
    import product_bench

    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--streams", type=product_bench._csv_ints, default=[256, 1000])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--requests-per-stream", type=int, default=2)
    p.add_argument("--ttft-ms", type=float, default=250.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--tokens", type=int, default=50)
    p.add_argument("--timeout-s", type=float, default=900.0)
    args = p.parse_args(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = os.getloadavg()
    callback_us, no_poll_us, polled_us = watcher_costs()
    print(f"in process: an armed watcher's callback on a queued (readable) socket {callback_us:.3f} µs per poll, epoll's "
          f"report included; a stop and a start {no_poll_us:.3f} µs with no poll between, {polled_us:.2f} µs with a poll "
          "between (epoll_ctl DEL and ADD, and one callback)", flush=True)
    rows: dict[tuple[int, str], list[Any]] = {}
    counts: dict[tuple[int, str], list[dict[str, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="reactor_bench_") as tmp:
        hook = Path(tmp) / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(  # this file, by its path: bench/ stays off every process's sys.path
            "import importlib.util\n"
            f"spec = importlib.util.spec_from_file_location('reactor_bench', {str(Path(__file__).resolve())!r})\n"
            "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\nmodule.install()\n")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(hook), os.environ.get("PYTHONPATH"))))

        def run(streams: int, arm: str, name: str) -> None:
            folder = Path(tmp) / name
            folder.mkdir()
            os.environ[ARM_ENV] = "" if arm == "armed" else arm
            os.environ[COUNTS_ENV] = str(folder / "counts.json") if arm != "armed" else ""
            row = product_bench._product_run(streams, 0, args, folder, (), arm)
            rows.setdefault((streams, arm), []).append(row)
            if arm != "armed":
                counts.setdefault((streams, arm), []).append(orjson.loads((folder / "counts.json").read_bytes()))
            print(f"{name}: CPU per event {row.cpu_per_event_us:.1f} µs, loop lag p99 {row.loop_lag_p99_ms:.2f} ms, "
                  f"per-token {product_bench._quantiles(row.token_err_ms)} ms", file=sys.stderr, flush=True)

        for round_ in range(args.rounds):
            for streams in args.streams:
                for arm in ("armed", "parked") if round_ % 2 == 0 else ("parked", "armed"):
                    run(streams, arm, f"{streams}-{arm}-{round_}")
        for streams in args.streams:
            run(streams, "counted", f"{streams}-counted")
    print("| streams | arm | runs | CPU per token event, µs: mean (min-max) | loop lag p99, ms: mean (min-max) "
          "| read lag p99, ms | per-token error p50 / p99 / max (ms) | callbacks per event read | failed |")
    print("|---:|---|---:|---|---|---:|---:|---|---|")
    for (streams, arm), group in rows.items():
        cpu = [r.cpu_per_event_us for r in group]
        lag = [r.loop_lag_p99_ms for r in group]
        errors = np.concatenate([r.token_err_ms for r in group])
        c = counts.get((streams, arm))
        per_event = "-"
        if c and arm == "counted":
            per_event = f"{sum(x['calls'] for x in c) / sum(x['events_read'] for x in c):.2f} ({sum(x['again'] for x in c) / sum(x['events_read'] for x in c):.2f} found it queued)"
        elif c:
            per_event = f"{sum(x['stops'] for x in c) / sum(x['events_read'] for x in c):.2f} (a stop and a start each)"
        failed = sorted({f"{k}={v}" for r in group for k, v in r.failed.items()})
        print(f"| {streams} | {arm} | {len(group)} | {statistics.mean(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f}) | "
              f"{statistics.mean(lag):.2f} ({min(lag):.2f}-{max(lag):.2f}) | "
              f"{statistics.mean(r.read_lag_p99_ms for r in group):.2f} | {product_bench._quantiles(errors)} | {per_event} | "
              f"{', '.join(failed) or 'none'} |")
    print()
    for streams in args.streams:
        pairs = list(zip(rows[(streams, "parked")], rows[(streams, "armed")]))
        for key, unit in (("cpu_per_event_us", "µs per event"), ("loop_lag_p99_ms", "ms of loop lag p99")):
            d = [getattr(a, key) - getattr(b, key) for a, b in pairs]
            half = (2.0 if len(d) > 20 else {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36}.get(len(d), 2.3)) \
                * (statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan"))
            base = statistics.mean(getattr(b, key) for _, b in pairs)
            print(f"{streams} streams, parked - armed, paired by round: {statistics.mean(d):+.2f} {unit}, 95% interval "
                  f"[{statistics.mean(d) - half:+.2f}, {statistics.mean(d) + half:+.2f}] ({100 * statistics.mean(d) / base:+.1f}%)")
    load_end = os.getloadavg()
    print(f"\n`{shlex.join(['python', *sys.argv])}`: {started:%Y-%m-%d %H:%M} UTC, {client_bench._machine()}; target TTFT "
          f"{args.ttft_ms:g} ms, {args.tokens} tokens {args.itl_ms:g} ms apart, {args.requests_per_stream} requests per "
          f"stream, WORKERS=0; load average {' '.join(f'{x:.2f}' for x in load_start)} at the start, "
          f"{' '.join(f'{x:.2f}' for x in load_end)} at the end.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
