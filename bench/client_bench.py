#!/usr/bin/env python3
"""Client benchmark: parsing capacity and timing error of the streaming clients against the built-in target.

For each client (raw with kernel or user-space arrival stamps, openai), each number of client
processes P and each concurrency N it runs two measurements, each with a fresh simulator and the
N streams split over P worker processes (gevent, socket monkey-patched, as under Locust):

capacity  sim at TTFT 0 / ITL 0 (tokens as fast as it can), max_tokens 2000, ignore_eos. N greenlets
          loop measure_request. Token events whose client arrival time falls inside the measured
          window are counted, and divided by the worker's CPU seconds over the same window
          (process_time; one thread under gevent, so this is events per second per core) and by the
          window's wall time (summed over the P processes). Streams still running at the window's end count too, through the
          "interrupted" record that measure_request keeps when the greenlet is killed: at 1,000
          streams a 2,000-token request outlasts the window, so counting only completed requests
          would count nothing.
timing    sim at TTFT 50 ms / ITL 20 ms with --send-log, max_tokens 100. Ok records that started
          and ended inside the window are joined by request_id with the send log: TTFT error =
          client arrival of the first token event - sent_s[0]; ITL error = client gap - server gap,
          per gap. The table gives p50 / p99 / max of the absolute errors.

replay   capacity again, against a target that costs little CPU per event: a recorded response of the
          built-in target (500 tokens at ITL 0) written whole, in one call, for every request. On 2
          cores the built-in target's per-token writes compete with the clients for the same cores;
          the replay shows what the client processes take when they have the cores to themselves.

Greenlets are started evenly over the warm-up (a ramp, like Locust's spawn rate), so streams do not
move in lockstep; the window starts when the warm-up ends. Each row also says how busy the client,
the sim and the rest of the machine were (other processes, kernel work, hypervisor steal), since on
a small machine a busy neighbour shows up as client timing error. --pin puts the sim and the client
on separate cores; on the 2-vCPU VM this was written on that made wake-up latency worse, so it is off.

Each row also gives the raw client's own read figures in the timing run: events found per wake-up,
the share of events whose kernel stamp was merged into a later segment's, and arrival-to-read lag.

    python bench/client_bench.py [--clients raw,openai] [--stamps kernel,user] [--processes 1,2]
                                 [--streams 16,256,1000,2000] [--window-s 8] [--capacity-targets sim,replay]
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and "--worker" in sys.argv[1:]:
    from gevent import monkey  # first thing in the worker: patch sockets before anything imports them

    monkey.patch_all()

import argparse
import asyncio
import datetime
import os
import platform
import re
import shlex
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the llmload beside bench/, installed or not

from llmload.system.processes import raise_fd_limit  # noqa: E402
from llmload.results.records import RequestRecord  # noqa: E402

MODEL = "openai/gpt-oss-20b"
EFFORT = "low"
PROMPT_ID = "bench"
MESSAGES = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
CAPACITY_MAX_TOKENS = 2000
REPLAY_MAX_TOKENS = 500  # the replay target's response: 155 KB, so 2,000 streams buffer at most ~310 MB
TIMING_MAX_TOKENS = 100
TIMING_TTFT_MS = 50
TIMING_ITL_MS = 20
SIM_CORE = 0
CLIENT_CORE = 1
GOAL_EVENTS_PER_CORE_S = 50_000
GOAL_P99_ERROR_MS = 1.0
GOAL_STREAMS = 1000
GOAL_SCALING = 1.8


# ---- worker (runs in its own process, under gevent) --------------------------------------------


def _machine_busy_s() -> tuple[float, float, float]:
    """CPU seconds busy, stolen by the hypervisor, and in interrupts (loopback TCP's receive work is softirq),
    over all cores since boot; 0s off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0, 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) * tick_s, steal * tick_s, (irq + softirq) * tick_s


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process; 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _event_times_s(record: RequestRecord) -> np.ndarray:
    """Client monotonic arrival time of each token-bearing event of a record."""
    if record.ttft_s is None:
        return np.empty(0)
    gaps_s = np.asarray(record.itl_s, dtype=float)
    first_s = record.start_monotonic_s + record.ttft_s
    return np.concatenate(([first_s], first_s + np.cumsum(gaps_s)))


def bench_body(max_tokens: int) -> dict[str, Any]:
    """The chat request every stream sends: MAX_TOKENS tokens, ignore_eos, usage on every chunk."""
    from llmload.client.body import ChatOptions, chat_body

    return chat_body(ChatOptions(model=MODEL, effort=EFFORT, max_tokens=max_tokens, continuous_usage=True,
                                 extra_body={"ignore_eos": True}), MESSAGES)


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    """Ramp up N looping greenlets, measure one window, stop them; the result as a dict."""
    import gevent

    from llmload.client.measure import make_client, measure_request
    from llmload.client.raw import RawChatClient
    from llmload.client.readstats import PROCESS_READ_STATS

    raise_fd_limit()
    if args.pin_core is not None:
        os.sched_setaffinity(0, {args.pin_core})
    body = bench_body(args.max_tokens)
    records: list[RequestRecord] = []
    setup_start_s = time.monotonic()
    if args.client == "raw":
        clients = [RawChatClient(args.base_url, timeout_s=120.0, kernel_stamps=args.stamps == "kernel")
                   for _ in range(args.streams)]
    else:
        clients = [make_client(args.client, args.base_url, timeout_s=120.0) for _ in range(args.streams)]
    setup_s = time.monotonic() - setup_start_s

    def user(client: Any) -> None:
        """A closed-loop user: one request after another."""
        while True:
            measure_request(client, body, PROMPT_ID, records.append)

    # Timers, not a sleep-and-spawn loop: a saturated hub would delay each of N wake-ups.
    ramp_start_s = time.monotonic()
    greenlets = [gevent.spawn_later(args.warmup_s * i / args.streams, user, client)
                 for i, client in enumerate(clients)]
    gevent.sleep(max(0.0, ramp_start_s + args.warmup_s - time.monotonic()))

    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    machine_start_s, steal_start_s, irq_start_s = _machine_busy_s()
    sim_start_s = _process_cpu_s(args.sim_pid)
    PROCESS_READ_STATS.reset()
    window_start_s, cpu_start_s = time.monotonic(), time.process_time()
    gevent.sleep(args.window_s)
    cpu_end_s, window_end_s = time.process_time(), time.monotonic()
    reads = PROCESS_READ_STATS
    sim_cpu_s = _process_cpu_s(args.sim_pid) - sim_start_s
    machine_end_s, steal_end_s, irq_end_s = _machine_busy_s()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)

    teardown_start_s = time.monotonic()
    gevent.killall(greenlets, block=True, timeout=60)
    for client in clients:
        client.close()
    teardown_s = time.monotonic() - teardown_start_s

    events = 0
    for record in records:
        times_s = _event_times_s(record)
        events += int(np.count_nonzero((times_s >= window_start_s) & (times_s < window_end_s)))
    window_records = [r for r in records if r.start_monotonic_s >= window_start_s]
    errors: dict[str, int] = {}
    for r in records:
        if r.error is not None and r.error != "interrupted":
            errors[r.error] = errors.get(r.error, 0) + 1
    if args.records_out:
        with open(args.records_out, "wb") as f:
            for r in window_records:
                if r.ok:
                    f.write(orjson.dumps({"request_id": r.request_id, "start_monotonic_s": r.start_monotonic_s,
                                          "ttft_s": r.ttft_s, "itl_s": r.itl_s}) + b"\n")
    return {
        "client": args.client,
        "streams": args.streams,
        "window_start_s": window_start_s,
        "window_s": window_end_s - window_start_s,
        "cpu_s": cpu_end_s - cpu_start_s,
        "sim_cpu_s": sim_cpu_s,
        # Everything else that ran on the machine meanwhile (other processes, kernel softirq), and steal.
        "other_cpu_s": max(0.0, machine_end_s - machine_start_s - (cpu_end_s - cpu_start_s) - sim_cpu_s),
        "steal_s": steal_end_s - steal_start_s,
        "irq_s": irq_end_s - irq_start_s,
        "events": events,
        "wakeups": reads.wakeups,
        "events_read": reads.events,
        "shared_stamps": reads.shared_stamps,
        "read_lag": reads.lag.to_dict(),
        "ok_requests": sum(1 for r in window_records if r.ok),
        "errors": errors,
        "setup_s": setup_s,
        "teardown_s": teardown_s,
    }


# ---- replay target: one recorded response, written whole for every request --------------------

_CONTENT_LENGTH = re.compile(rb"(?i)\r\ncontent-length:[ \t]*(\d+)")


def record_response(base_url: str, max_tokens: int) -> bytes:
    """The built-in target's whole HTTP response to the benchmark's request, as its bytes on the wire."""
    from llmload.system.control_http import split_base_url

    _, host, port, prefix = split_base_url(base_url)
    payload = orjson.dumps(bench_body(max_tokens))
    head = (f"POST {prefix}/v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
    response = b""
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.sendall(head.encode() + payload)
        while not response.endswith(b"\r\n0\r\n\r\n"):  # the last HTTP chunk
            more = sock.recv(1 << 20)
            if not more:
                raise RuntimeError(f"the target closed the connection after {len(response)} bytes")
            response += more
    return response


class _ReplayProtocol(asyncio.Protocol):
    """Answers each request of a kept-alive connection with the same recorded response, in one write."""

    def __init__(self, response: bytes) -> None:
        self._response = response
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (head_end := self._buffer.find(b"\r\n\r\n")) >= 0:
            length = _CONTENT_LENGTH.search(self._buffer, 0, head_end + 2)
            request_end = head_end + 4 + (int(length.group(1)) if length else 0)
            if len(self._buffer) < request_end:
                return
            self._buffer = self._buffer[request_end:]
            self._transport.write(self._response)


def serve_replay(response_path: str) -> None:
    """Serve the recorded response on a free loopback port; print READY PORT once listening."""
    response = Path(response_path).read_bytes()

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(lambda: _ReplayProtocol(response), "127.0.0.1", 0,
                                                                  backlog=4096)
        print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
        await server.serve_forever()

    raise_fd_limit()
    asyncio.run(serve())


def _start_replay(response_path: str) -> tuple[subprocess.Popen, str]:
    """The replay target in its own process; (process, base URL) once it listens."""
    process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--replay-server", response_path],
                               stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if not line.startswith("READY "):
        process.kill()
        raise RuntimeError(f"replay target did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}"


# ---- parent: one measurement = fresh sim + worker subprocess -----------------------------------


@dataclass(frozen=True)
class Load:
    """CPU seconds per wall second over a run's window (1.0 = one core saturated)."""

    client: float
    sim: float
    """The target: the built-in one, or the replay target."""
    irq: float
    """Interrupts, mostly softirq: loopback TCP's receive path, charged to no process."""
    other: float
    """Everything else on the machine: other processes, kernel work not charged to a process."""
    steal: float
    """Time the hypervisor ran something else on this machine's virtual CPUs."""

    @classmethod
    def of(cls, results: list[dict[str, Any]]) -> "Load":
        """From the results of the worker processes of one run (which ran side by side)."""
        window_s = max(r["window_s"] for r in results)
        client_s = sum(r["cpu_s"] for r in results)
        machine_s = max(r["other_cpu_s"] + r["cpu_s"] for r in results)  # each saw the whole machine
        irq_s = max(r["irq_s"] for r in results)
        return cls(client_s / window_s, max(r["sim_cpu_s"] for r in results) / window_s, irq_s / window_s,
                   max(0.0, machine_s - client_s - irq_s) / window_s, max(r["steal_s"] for r in results) / window_s)

    def __str__(self) -> str:
        """client / target / interrupts / other / steal, in cores."""
        return f"{self.client:.2f} / {self.sim:.2f} / {self.irq:.2f} / {self.other:.2f} / {self.steal:.2f}"


@dataclass(frozen=True)
class Capacity:
    """Capacity figures of one (client, streams) run."""

    events_per_cpu_s: float
    """Per process: token events over client CPU seconds."""
    events_per_wall_s: float
    """All processes together."""
    load: Load
    errors: dict[str, int]


@dataclass(frozen=True)
class Reads:
    """The raw client's view of its own reads in a timing run."""

    events_per_wakeup: float | None
    shared_stamp_share: float | None
    """Events whose kernel stamp the kernel merged into a later segment's."""
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    lag_max_ms: float | None

    @classmethod
    def of(cls, results: list[dict[str, Any]]) -> "Reads":
        from llmload.results.histogram import LogHistogram

        lag = LogHistogram()
        for r in results:
            lag.merge(LogHistogram.from_dict(r["read_lag"]))
        wakeups, events = sum(r["wakeups"] for r in results), sum(r["events_read"] for r in results)

        def ms(value_s: float | None) -> float | None:
            return None if value_s is None else value_s * 1e3

        return cls(events / wakeups if wakeups else None,
                   sum(r["shared_stamps"] for r in results) / events if events and lag.count else None,
                   ms(lag.quantile_s(0.5)), ms(lag.quantile_s(0.99)), ms(lag.max_s) if lag.count else None)

    def __str__(self) -> str:
        """events per read, merged stamps, lag p50 / p99 / max."""
        if self.events_per_wakeup is None:
            return "-"
        if self.lag_p99_ms is None:
            return f"{self.events_per_wakeup:.2f} / - / -"
        return (f"{self.events_per_wakeup:.2f} / {self.shared_stamp_share:.1%} / "
                f"{self.lag_p50_ms:.2f}, {self.lag_p99_ms:.2f}, {self.lag_max_ms:.1f}")


@dataclass(frozen=True)
class Timing:
    """Timing-error figures of one (client, streams) run; errors in milliseconds."""

    ttft_abs_err_ms: np.ndarray
    itl_abs_err_ms: np.ndarray
    token_abs_err_ms: np.ndarray
    """Every token: client arrival minus the sim's send time."""
    joined_requests: int
    unjoined_requests: int
    cpu_per_event_us: float
    """Client CPU per token event at this realistic pace (capacity runs batch many events per read)."""
    load: Load
    errors: dict[str, int]
    reads: Reads


def _pin(pid: int, core: int) -> None:
    """Pin a process to one core when the machine has it."""
    if core < (os.cpu_count() or 1):
        os.sched_setaffinity(pid, {core})


@dataclass(frozen=True)
class Variant:
    """One row's client set-up: which client, which arrival stamps, how many processes."""

    client: str
    stamps: str
    processes: int


def _run_worker_processes(variant: Variant, streams: int, sim: subprocess.Popen, base_url: str, max_tokens: int,
                          args: argparse.Namespace, records_dir: str = "",
                          profile: str = "") -> list[dict[str, Any]]:
    """Run this script in worker mode, ``variant.processes`` at once sharing the streams; their JSON results."""
    running = []
    for index in range(variant.processes):
        share = streams // variant.processes + (1 if index < streams % variant.processes else 0)
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--client", variant.client,
                   "--stamps", variant.stamps, "--streams", str(share), "--base-url", base_url,
                   "--max-tokens", str(max_tokens), "--sim-pid", str(sim.pid),
                   "--window-s", str(args.window_s), "--warmup-s", str(args.warmup_s)]
        if records_dir:
            command += ["--records-out", str(Path(records_dir) / f"records-{index}.jsonl")]
        if profile:
            command += ["--profile", f"{profile}.{index}"]
        if args.pin and (os.cpu_count() or 1) > CLIENT_CORE:
            command += ["--pin-core", str(CLIENT_CORE)]
        running.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for process in running:
        stdout, stderr = process.communicate(timeout=args.warmup_s + args.window_s + 180)
        lines = stdout.strip().splitlines()
        if process.returncode != 0 or not lines:
            raise RuntimeError(f"worker {variant} x{streams} failed ({process.returncode}): {stderr.strip()[-2000:]}")
        results.append(orjson.loads(lines[-1]))
    return results


def _start_sim(sim_args: list[str], pin: bool) -> tuple[subprocess.Popen, str]:
    """A fresh simulator, pinned to its own core."""
    from llmload.sim import start_sim

    process, base_url = start_sim(sim_args)
    if pin and (os.cpu_count() or 1) > CLIENT_CORE:
        _pin(process.pid, SIM_CORE)
    return process, base_url


def _merged_errors(results: list[dict[str, Any]]) -> dict[str, int]:
    errors: dict[str, int] = {}
    for r in results:
        for kind, n in r["errors"].items():
            errors[kind] = errors.get(kind, 0) + n
    return errors


def measure_capacity(variant: Variant, streams: int, args: argparse.Namespace, profile: str = "",
                     target: str = "sim") -> Capacity:
    """Token events per client CPU second against a sim that sends as fast as it can, or the replay target."""
    from llmload.sim import stop_sim

    if target == "replay":
        process, base_url = _start_replay(args.replay_response)
    else:
        process, base_url = _start_sim(["--fixed-ttft-ms", "0", "--fixed-itl-ms", "0"], args.pin)
    try:
        results = _run_worker_processes(variant, streams, process, base_url, CAPACITY_MAX_TOKENS, args,
                                        profile=profile)
    finally:
        stop_sim(process)  # SIGTERM, wait, close its pipes: the replay target too
    events = sum(r["events"] for r in results)
    return Capacity(events / sum(r["cpu_s"] for r in results), events / max(r["window_s"] for r in results),
                    Load.of(results), _merged_errors(results))


def _join(records_paths: list[Path], send_log_path: Path) -> tuple[list[float], list[float], list[float], int, int]:
    """(TTFT errors, ITL errors, per-token errors) in seconds, joined and unjoined request counts."""
    sent: dict[str, list[float]] = {}
    with send_log_path.open("rb") as f:
        for line in f:
            item = orjson.loads(line)
            sent[item["request_id"]] = item["sent_s"]
    ttft_err_s: list[float] = []
    itl_err_s: list[float] = []
    token_err_s: list[float] = []
    joined = unjoined = 0
    for line in (line for path in records_paths for line in path.read_bytes().splitlines()):
        r = orjson.loads(line)
        sent_s = sent.get(r["request_id"])
        if sent_s is None or r["ttft_s"] is None or len(sent_s) != len(r["itl_s"]) + 1:
            unjoined += 1
            continue
        joined += 1
        first_s = r["start_monotonic_s"] + r["ttft_s"]
        ttft_err_s.append(first_s - sent_s[0])
        server_gaps_s = np.diff(np.asarray(sent_s))
        itl_err_s.extend((np.asarray(r["itl_s"]) - server_gaps_s).tolist())
        arrived_s = np.concatenate(([first_s], first_s + np.cumsum(r["itl_s"])))
        token_err_s.extend((arrived_s - np.asarray(sent_s)).tolist())
    return ttft_err_s, itl_err_s, token_err_s, joined, unjoined


def measure_timing(variant: Variant, streams: int, args: argparse.Namespace) -> Timing:
    """Client arrival times against the sim's send times, joined by request id."""
    from llmload.sim import stop_sim

    with tempfile.TemporaryDirectory(prefix="client_bench_") as tmp:
        send_log = Path(tmp) / "send.jsonl"
        process, base_url = _start_sim(["--fixed-ttft-ms", str(TIMING_TTFT_MS), "--fixed-itl-ms",
                                        str(TIMING_ITL_MS), "--send-log", str(send_log)], args.pin)
        try:
            results = _run_worker_processes(variant, streams, process, base_url, TIMING_MAX_TOKENS, args,
                                            records_dir=tmp)
        finally:
            stop_sim(process)  # flushes the send log
        ttft_err_s, itl_err_s, token_err_s, joined, unjoined = _join(sorted(Path(tmp).glob("records-*.jsonl")),
                                                                     send_log)
    cpu_per_event_us = sum(r["cpu_s"] for r in results) / max(1, sum(r["events"] for r in results)) * 1e6
    return Timing(np.abs(np.asarray(ttft_err_s)) * 1e3, np.abs(np.asarray(itl_err_s)) * 1e3,
                  np.abs(np.asarray(token_err_s)) * 1e3, joined, unjoined,
                  cpu_per_event_us, Load.of(results), _merged_errors(results), Reads.of(results))


# ---- output ------------------------------------------------------------------------------------


def _quantiles_ms(values_ms: np.ndarray) -> str:
    """p50 / p99 / max of absolute errors, or a dash when nothing was joined."""
    if values_ms.size == 0:
        return "-"
    p50, p99 = np.percentile(values_ms, [50, 99])
    return f"{p50:.3f} / {p99:.3f} / {values_ms.max():.2f}"


def _errors_note(errors: dict[str, int]) -> str:
    """Failed requests of a run, if any (interrupted streams at the window's end are not failures)."""
    return ", ".join(f"{k}={v}" for k, v in sorted(errors.items()))


Row = tuple[Variant, int, dict[str, Capacity], Timing]
"""One (client set-up, streams): capacity against each target ("sim", "replay"), timing against the sim."""


def _failed(label: str, errors: dict[str, int]) -> str:
    return f"{label}: {_errors_note(errors)}" if errors else ""


def format_table(rows: list[Row]) -> str:
    """Timing errors, and capacity against the built-in target, as one Markdown table."""
    out = [
        "| client | stamps | processes | streams | events/s per core | wall events/s, all processes "
        "| TTFT error p50 / p99 / max (ms) | per-token error p50 / p99 / max (ms) | ITL error p50 / p99 / max (ms) "
        "| joined requests (tokens) | client CPU per event, timing run (µs) "
        "| timing run: events per read / merged stamps / read lag p50, p99, max (ms) "
        "| cores busy, capacity run: client / sim / irq / other / steal | cores busy, timing run | failed requests |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for variant, streams, caps, tim in rows:
        cap = caps.get("sim")
        failed = "; ".join(x for x in (_failed("capacity", cap.errors if cap else {}),
                                       _failed("timing", tim.errors)) if x)
        joined = f"{tim.joined_requests} ({tim.token_abs_err_ms.size})"
        if tim.unjoined_requests:
            joined += f", {tim.unjoined_requests} unjoined"
        capacity = f"{cap.events_per_cpu_s:,.0f} | {cap.events_per_wall_s:,.0f}" if cap else "- | -"
        out.append(f"| {variant.client} | {variant.stamps} | {variant.processes} | {streams} | {capacity} "
                   f"| {_quantiles_ms(tim.ttft_abs_err_ms)} | {_quantiles_ms(tim.token_abs_err_ms)} "
                   f"| {_quantiles_ms(tim.itl_abs_err_ms)} | {joined} | {tim.cpu_per_event_us:.1f} | {tim.reads} "
                   f"| {cap.load if cap else '-'} | {tim.load} | {failed or 'none'} |")
    return "\n".join(out)


def format_replay_table(rows: list[Row]) -> str:
    """Capacity against the replay target, as one Markdown table."""
    out = ["| client | stamps | processes | streams | events/s per core | wall events/s, all processes "
           "| cores busy: client / target / irq / other / steal | failed requests |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for variant, streams, caps, _ in rows:
        if (cap := caps.get("replay")) is not None:
            out.append(f"| {variant.client} | {variant.stamps} | {variant.processes} | {streams} "
                       f"| {cap.events_per_cpu_s:,.0f} | {cap.events_per_wall_s:,.0f} | {cap.load} "
                       f"| {_errors_note(cap.errors) or 'none'} |")
    return "\n".join(out)


def _p99(values_ms: np.ndarray) -> float:
    return float(np.percentile(values_ms, 99)) if values_ms.size else float("inf")


def goal_lines(rows: list[Row]) -> list[str]:
    """The project's goals for the raw client, met or missed."""
    lines = []
    raw = [(v, n, caps, tim) for v, n, caps, tim in rows if v.client == "raw"]
    per_core = [cap.events_per_cpu_s for _, _, caps, _ in raw for cap in caps.values()]
    if per_core:
        verdict = "met" if min(per_core) >= GOAL_EVENTS_PER_CORE_S else "MISSED"
        lines.append(f"Goal raw >= {GOAL_EVENTS_PER_CORE_S:,} events/s on one core: {verdict} "
                     f"(lowest over the runs {min(per_core):,.0f}).")
    for v, n, _, tim in raw:
        if n == GOAL_STREAMS:
            p99_ms = _p99(tim.token_abs_err_ms)
            verdict = "met" if p99_ms <= GOAL_P99_ERROR_MS else "MISSED"
            lines.append(f"Goal p99 per-token |error| <= {GOAL_P99_ERROR_MS:g} ms at {GOAL_STREAMS} streams, "
                         f"{v.stamps} stamps, {v.processes} process(es): {verdict} ({p99_ms:.3f} ms; "
                         f"TTFT {_p99(tim.ttft_abs_err_ms):.3f} ms).")
    single = {(v.stamps, n): caps for v, n, caps, _ in raw if v.processes == 1}
    for v, n, caps, _ in raw:
        for target, cap in caps.items():
            one = single.get((v.stamps, n), {}).get(target)
            if v.processes == 2 and one is not None:
                ratio = cap.events_per_wall_s / one.events_per_wall_s
                verdict = "met" if ratio >= GOAL_SCALING else "MISSED"
                lines.append(f"Goal capacity 1 -> 2 processes >= {GOAL_SCALING:g}x, {target} target, {v.stamps} "
                             f"stamps, {n} streams: {verdict} ({one.events_per_wall_s:,.0f} -> "
                             f"{cap.events_per_wall_s:,.0f} events/s, {ratio:.2f}x).")
    return lines


def _machine() -> str:
    """nproc, CPU model and Python version."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"nproc {os.cpu_count()}, {model}, Python {platform.python_version()}"


# ---- command line ------------------------------------------------------------------------------


def _csv(text: str) -> list[str]:
    """A comma-separated flag value as a list."""
    return [x.strip() for x in text.split(",") if x.strip()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--clients", type=_csv, default=["raw", "openai"], help="clients to measure (default raw,openai)")
    p.add_argument("--stamps", type=_csv, default=["kernel", "user"],
                   help="arrival stamps of the raw client: kernel, user (default both)")
    p.add_argument("--processes", type=lambda s: [int(x) for x in _csv(s)], default=[1, 2],
                   help="client processes sharing the streams (default 1,2)")
    p.add_argument("--streams", type=lambda s: [int(x) for x in _csv(s)], default=[16, 256, 1000, 2000],
                   help="concurrent streams, all processes together (default 16,256,1000,2000)")
    p.add_argument("--window-s", type=float, default=8.0, help="measured window per run (default 8)")
    p.add_argument("--warmup-s", type=float, default=1.0, help="ramp/warm-up before each window (default 1)")
    p.add_argument("--pin", action="store_true",
                   help="pin the sim to core 0 and the client to core 1 (on this VM it raises wake-up latency)")
    p.add_argument("--profile-dir", default="",
                   help="also write a cProfile of each capacity window to DIR/CLIENT-N.pstats "
                        "(the profiler slows the client: figures of that run are not comparable)")
    p.add_argument("--capacity-targets", type=_csv, default=["sim", "replay"],
                   help="capacity against: sim (the built-in target at ITL 0), replay (a recorded response "
                        "written whole: costs the target little CPU) (default both)")
    # Worker mode (internal): one measurement, one JSON line on stdout.
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--client", help=argparse.SUPPRESS)
    p.add_argument("--base-url", help=argparse.SUPPRESS)
    p.add_argument("--max-tokens", type=int, help=argparse.SUPPRESS)
    p.add_argument("--records-out", default="", help=argparse.SUPPRESS)
    p.add_argument("--profile", default="", help=argparse.SUPPRESS)
    p.add_argument("--pin-core", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--sim-pid", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--replay-server", default="", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run every (client, streams) measurement and print the table."""
    args = _parser().parse_args(argv)
    if args.worker:
        args.streams, args.stamps = args.streams[0], args.stamps[0]
        sys.stdout.write(orjson.dumps(run_worker(args)).decode() + "\n")
        return 0
    if args.replay_server:
        serve_replay(args.replay_server)
        return 0
    started = datetime.datetime.now().astimezone()
    load_average_start = os.getloadavg()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="client_bench_replay_") as tmp:
        if "replay" in args.capacity_targets:
            args.replay_response = str(Path(tmp) / "response.bin")
            Path(args.replay_response).write_bytes(_recorded_response())
        _measure_all(args, rows)
    elapsed_s = (datetime.datetime.now().astimezone() - started).total_seconds()
    pinned = "sim on core 0, client on core 1" if args.pin and (os.cpu_count() or 1) > CLIENT_CORE else "not pinned"
    print(format_table(rows))
    if "replay" in args.capacity_targets:
        print(f"\nCapacity against the replay target (the built-in target's {REPLAY_MAX_TOKENS}-token response, "
              "written whole for every request):\n")
        print(format_replay_table(rows))
    print()
    for line in goal_lines(rows):
        print(line)
    loads = [load for _, _, caps, tim in rows for load in (*(c.load for c in caps.values()), tim.load)]
    print(f"Background during the windows (not client, not target): other CPU up to "
          f"{max(x.other for x in loads):.2f} cores, hypervisor steal up to {max(x.steal for x in loads):.2f} cores.")
    if args.profile_dir:
        print(f"Capacity windows ran under cProfile ({args.profile_dir}): their events/s are not comparable.")
    load_average_end = os.getloadavg()
    print(f"`{shlex.join(['python', *sys.argv])}` — {started:%Y-%m-%d %H:%M %Z}, {_machine()}, {pinned}, "
          f"window {args.window_s:g} s after {args.warmup_s:g} s ramp, {elapsed_s:.0f} s in all; load average "
          f"{' '.join(f'{x:.2f}' for x in load_average_start)} at the start, "
          f"{' '.join(f'{x:.2f}' for x in load_average_end)} at the end. "
          f"Capacity: sim TTFT 0/ITL 0, max_tokens {CAPACITY_MAX_TOKENS}; timing: sim TTFT {TIMING_TTFT_MS} ms/"
          f"ITL {TIMING_ITL_MS} ms, max_tokens {TIMING_MAX_TOKENS}; errors are |client - sim send time|.")
    return 0


def _recorded_response() -> bytes:
    """The built-in target's response to a REPLAY_MAX_TOKENS request, recorded from a fresh sim at ITL 0."""
    from llmload.sim import stop_sim

    process, base_url = _start_sim(["--fixed-ttft-ms", "0", "--fixed-itl-ms", "0"], False)
    try:
        return record_response(base_url, REPLAY_MAX_TOKENS)
    finally:
        stop_sim(process)


def _measure_all(args: argparse.Namespace, rows: list[Row]) -> None:
    """Every (client, stamps, processes, streams): capacity against each target, then timing."""
    for client in args.clients:
        for stamps in args.stamps if client == "raw" else ["user"]:
            for processes in args.processes:
                variant = Variant(client, stamps, processes)
                for streams in args.streams:
                    profile = (str(Path(args.profile_dir) / f"{client}-{stamps}-{processes}-{streams}.pstats")
                               if args.profile_dir else "")
                    caps = {target: measure_capacity(variant, streams, args, profile, target)
                            for target in args.capacity_targets}
                    rows.append((variant, streams, caps, measure_timing(variant, streams, args)))


if __name__ == "__main__":
    sys.exit(main())
