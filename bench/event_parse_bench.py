#!/usr/bin/env python3
"""Event-parse benchmark: what the raw client spends on a Responses API event against a chat completion chunk.

The bytes are the real vLLM 0.32's (tests/fixtures/vllm-cpu/: tiny-gptoss, the same message, effort low), each
event framed as the HTTP chunk vLLM writes it in. Each event goes the raw client's way (llmload/client/raw.py):
ChunkedDecoder.feed, SSEDecoder.feed, orjson.loads of its data, the accumulator's on_chunk (``data: [DONE]``:
on_done), then finish() once per stream. Two figures per API, the median of --rounds rounds (each --passes passes
over the stream, a fresh decoder pair and accumulator per pass):

token event   a token-bearing event alone (chat: a chunk with reasoning or content; Responses: a reasoning_text,
              output_text or function_call_arguments delta): the per-token cost
whole stream  every event of the stream and finish(), divided by its token events: what each token costs with the
              events around them (the Responses API's lifecycle events; chat's role and usage chunks)
per stream    whole stream minus its token events alone: the events around the tokens, paid once a request (the
              fixtures' answers are 20 tokens long, so this share of "whole stream" shrinks with longer answers)

The goal (issue 23): a Responses event costs no more than 1.5x a chat chunk, per token event.

    python bench/event_parse_bench.py [--rounds 15] [--passes 200]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # the llmload beside bench/, installed or not

from llmload.client.apis import APIS  # noqa: E402
from llmload.client.sse import ChunkedDecoder, SSEDecoder  # noqa: E402

FIXTURES = BENCH.parent / "tests" / "fixtures" / "vllm-cpu"
STREAMS = {"chat": "tiny-gptoss-chat.sse", "responses": "tiny-gptoss-responses.sse"}
GOAL_RATIO = 1.5
_TOKEN_TYPES = (b'"type":"response.reasoning_text.delta"', b'"type":"response.output_text.delta"',
                b'"type":"response.function_call_arguments.delta"')


def http_chunks(sse_text: bytes) -> list[bytes]:
    """Each event of an SSE body (blocks ended by a blank line) as the HTTP chunk that carried it."""
    blocks = [b + b"\n\n" for b in sse_text.split(b"\n\n") if b.strip()]
    return [b"%x\r\n%b\r\n" % (len(block), block) for block in blocks]


def is_token_event(api: str, chunk: bytes) -> bool:
    if api == "responses":
        return any(kind in chunk for kind in _TOKEN_TYPES)
    return b'"delta":{"reasoning"' in chunk or b'"delta":{"content":"' in chunk and b'"content":""' not in chunk


def parse_pass(api: str, chunks: list[bytes]) -> int:
    """One pass over a stream as the raw client reads it; returns the events parsed."""
    accumulator = APIS[api].accumulator("r", "p", 0.0, 0.0)
    chunked, sse, loads = ChunkedDecoder(), SSEDecoder(), orjson.loads
    arrived_s = 0.0
    events = 0
    for chunk in chunks:
        arrived_s += 0.001
        for event in sse.feed(chunked.feed(chunk)):
            events += 1
            if event == b"[DONE]":
                accumulator.on_done(arrived_s)
            else:
                accumulator.on_chunk(arrived_s, loads(event))
    accumulator.finish(arrived_s)
    return events


def _ns_per(run: Callable[[], object], count: int, passes: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(passes):
        run()
    return (time.perf_counter_ns() - started) / (passes * count)


def measure(api: str, rounds: int, passes: int) -> dict[str, float]:
    """ns per token event: alone (token events only) and in the whole stream; the stream's event counts."""
    chunks = http_chunks((FIXTURES / STREAMS[api]).read_bytes())
    tokens = [c for c in chunks if is_token_event(api, c)]
    record = parse_pass(api, chunks)
    accumulator = APIS[api].accumulator("r", "p", 0.0, 0.0)
    chunked, sse, loads = ChunkedDecoder(), SSEDecoder(), orjson.loads

    def token_events() -> None:
        for chunk in tokens:
            for event in sse.feed(chunked.feed(chunk)):
                accumulator.on_chunk(0.0, loads(event))

    alone = [_ns_per(token_events, len(tokens), passes) for _ in range(rounds)]
    whole = [_ns_per(lambda: parse_pass(api, chunks), len(tokens), passes) for _ in range(rounds)]
    return {"events": record, "token_events": len(tokens), "alone_ns": statistics.median(alone),
            "whole_ns": statistics.median(whole), "alone_spread": (max(alone) - min(alone)) / statistics.median(alone)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--passes", type=int, default=200)
    args = p.parse_args(argv)
    started = datetime.datetime.now().astimezone()
    load_start = os.getloadavg()
    results = {}
    for api in ("chat", "responses", "chat", "responses"):  # interleaved, each measured twice; the second kept
        results[api] = measure(api, args.rounds, args.passes)
    print("| API | events in the stream | token events | token event alone (ns) | whole stream per token event (ns) "
          "| per stream, beside its token events (µs) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for api, r in results.items():
        per_stream_us = (r["whole_ns"] - r["alone_ns"]) * r["token_events"] / 1000
        print(f"| {api} | {r['events']} | {r['token_events']} | {r['alone_ns']:.0f} | {r['whole_ns']:.0f} | {per_stream_us:.1f} |")
    for name, key in (("token event alone", "alone_ns"), ("whole stream per token event", "whole_ns")):
        ratio = results["responses"][key] / results["chat"][key]
        print(f"\nResponses / chat, {name}: {ratio:.2f}x ({'met' if ratio <= GOAL_RATIO else 'MISSED'} <= {GOAL_RATIO:g}x)",
              end="")
    load_end = os.getloadavg()
    print(f"\n\n`{shlex.join(['python', *sys.argv])}` — {started:%Y-%m-%d %H:%M %Z}, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}; load average {' '.join(f'{x:.2f}' for x in load_start)} at the start, "
          f"{' '.join(f'{x:.2f}' for x in load_end)} at the end.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
