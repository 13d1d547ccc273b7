"""Command line: python -m llmload.sim [--gpu h100] [--model gpt-oss-20b] [--port 0] ..."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import re
import signal
import sys
import time
from typing import Any, NoReturn

from llmload.errors import ConfigError
from llmload.options import SIM_OPTIONS
from llmload.system.processes import raise_fd_limit
from llmload.promptsets.tokens import harmony_encoding
from llmload.settings import add_suite_options, settings_to_argv

from .chunks import FAULTS
from .dialects import dialect_of
from .engine import Engine
from .loop import new_event_loop
from .profiles import choose_profile
from .sendlog import SendLog
from .server import MAX_MODEL_LEN, SimApp
from .serverflags import ServerFlags, with_flags

EXIT_USAGE = 2


class _UsageError(Exception):
    """A bad flag; reported as one line on stderr."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one 'error: ...' line instead of usage + message."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> _Parser:
    p = _Parser(prog="python -m llmload.sim", description="OpenAI-compatible simulator of vLLM serving gpt-oss. "
                "Flags or KEY=VALUE settings (make serve-sim GPU=a100 SPEEDUP=5).")
    add_suite_options(p, include_locust=True, table=SIM_OPTIONS)
    return p


def _check_host(host: str) -> None:
    """Refuse to listen anywhere but loopback: the simulator has no authentication."""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise _UsageError(f"--host must be a loopback address (127.0.0.1, ::1, localhost); got {host!r}")


def _validate(args: argparse.Namespace) -> None:
    """Checks the option table's types and ranges cannot express."""
    _check_host(args.host)
    if args.fault is not None and args.fault not in FAULTS and not re.fullmatch(r"http-[45]\d\d", args.fault):
        raise _UsageError(f"--fault must be one of {', '.join(FAULTS)} or http-<4xx/5xx code>; got {args.fault!r}")


def _timings(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    """Where the target's timings come from: its profile, or fixed times that replace it."""
    if args.fixed_ttft_ms is not None and args.fixed_itl_ms is not None:
        return {"profile": None, "profile_kind": "fixed timings (FIXED_TTFT_MS, FIXED_ITL_MS)",
                "validation": {"status": "fixed", "method": "fixed timings: no model"}}
    return {"profile": engine.profile.name, "profile_kind": engine.profile.kind, "validation": engine.profile.validation}


async def _serve(args: argparse.Namespace, engine: Engine, send_log: SendLog | None) -> int:
    """Bind, announce READY, run until SIGTERM/SIGINT."""
    loop = asyncio.get_running_loop()
    harmony_encoding()  # load the tokenizer (~1 s) before READY, not inside the first request
    dialect = dialect_of(args.dialect)
    # The key the target requires, as vLLM's --api-key; make serve-sim API_KEY=... passes it in the environment.
    app = SimApp(engine, send_log, args.api_key or os.environ.get("API_KEY") or os.environ.get("VLLM_API_KEY", ""),
                 fault=args.fault, fault_rate=args.fault_rate, seed=args.seed, tool_calls=args.tool_calls,
                 tool_invalid_rate=args.tool_invalid_rate, max_model_len=args.max_model_len or MAX_MODEL_LEN,
                 stream_interval=args.stream_interval, dialect=dialect,
                 identity={"gpu_profile": engine.profile.gpu, **_timings(engine, args), "speedup": args.speedup,
                           "fixed_ttft_ms": args.fixed_ttft_ms, "fixed_itl_ms": args.fixed_itl_ms})
    try:
        server = await loop.create_server(app.protocol, args.host, args.port, backlog=4096)
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e.strerror or e}",
              file=sys.stderr, flush=True)
        return EXIT_USAGE
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    engine.start()
    if send_log is not None:
        send_log.start()
    port = server.sockets[0].getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"READY http://{host}:{port}", flush=True)
    if dialect.name == "sglang":  # the lines SGLang logs (engine.py, http_server.py), which make tune reads
        engine_flags = engine.profile.engine
        print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] server_args=ServerArgs(model_path='{engine.profile.served_model}', "
              f"context_length={app.max_model_len}, max_running_requests={engine_flags.max_num_seqs}, "
              f"chunked_prefill_size={engine_flags.max_num_batched_tokens}, tp_size={args.tensor_parallel_size}, "
              f"stream_interval={args.stream_interval}, enable_metrics=True, reasoning_parser='gpt-oss', port={port})\n"
              f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] The server is fired up and ready to roll!", file=sys.stderr, flush=True)
    await stop.wait()
    server.close()
    for conn in list(app.connections):
        conn.abort()  # in-flight streams end now and still get their send-log line
    await engine.close()
    await asyncio.sleep(0)  # let the connection_lost callbacks run
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse flags, build the engine and serve; returns the process exit code."""
    send_log = None
    try:
        args = _parser().parse_args(settings_to_argv(sys.argv[1:] if argv is None else argv, SIM_OPTIONS))
        _validate(args)
        flags = ServerFlags(args.max_num_seqs, args.max_num_batched_tokens, args.gpu_memory_utilization,
                            args.max_model_len, args.tensor_parallel_size, args.stream_interval)
        profile = with_flags(choose_profile(args.target_profile, args.gpu, args.model), flags)
        if profile.engine.max_num_batched_tokens < profile.engine.max_num_seqs:  # vLLM refuses the same
            raise _UsageError(f"--max-num-batched-tokens ({profile.engine.max_num_batched_tokens}) must be greater than or "
                              f"equal to --max-num-seqs ({profile.engine.max_num_seqs})")
        s_per_ms = 1e-3
        engine = Engine(
            profile, seed=args.seed, speedup=args.speedup,
            fixed_ttft_s=None if args.fixed_ttft_ms is None else args.fixed_ttft_ms * s_per_ms,
            fixed_itl_s=None if args.fixed_itl_ms is None else args.fixed_itl_ms * s_per_ms,
            itl_per_seq_s=None if args.itl_per_seq_ms is None else args.itl_per_seq_ms * s_per_ms,
            fail_rate=args.fail_rate, disconnect_rate=args.disconnect_rate)
        if args.send_log is not None:
            try:
                send_log = SendLog(args.send_log)
            except OSError as e:
                raise _UsageError(f"cannot open --send-log {args.send_log!r}: {e.strerror or e}") from None
    except (_UsageError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    raise_fd_limit()
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            return runner.run(_serve(args, engine, send_log))
    finally:
        if send_log is not None:
            send_log.close()  # flush at shutdown, including after SIGTERM


if __name__ == "__main__":
    sys.exit(main())
