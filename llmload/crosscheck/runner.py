"""`make crosscheck`: vLLM's own bench and llmload on one server and workload, alternating, REPEATS times each.

    OUT/vllm_bench/repeat-<i>.json, .log   `vllm bench serve --save-result --save-detailed` and its output
    OUT/vllm_bench/prompts-<i>.jsonl        the prompts it sent (its custom dataset)
    OUT/llmload/repeat-<i>/                 llmload's run (summary.json, samples.jsonl, load.log)
    OUT/<tool>/server_window-<i>.jsonl      the server's /metrics scraped before and after that tool's run
    OUT/crosscheck.json                     {"vllm_bench": {metric: [one value per repeat]}, "llmload": {...},
                                             "server_account": {tool: {...}}, "deviation_from_server_pct": ...}

Both send the same requests, text for text: llmload's PROMPTS=random:IN:OUT (random text of IN o200k
tokens, OUT tokens forced with ignore_eos) given to vLLM's bench as its custom dataset, in the same
order, at most USERS at once, REQUESTS per repeat, with the same temperature and reasoning_effort.
Repeat i uses seed SEED + i, so no repeat meets prompts the server has cached; the order of the tools
flips every repeat, so a server that warms up or slows down favours neither. The server's own account
of each run (its /metrics before and after) referees what it counts: each tool is set beside the
server as it was during that tool's own run.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import orjson

from llmload.credentials import read_api_key
from llmload.crosscheck.compare import METRICS, SERVER_KEYS, SERVER_TOLERANCE_PCT, bench_metrics, compare, format_table, suite_metrics
from llmload.errors import ConfigError, LoadTestError
from llmload.system.files import write_atomic
from llmload.loadtest.preflight import probe_server, resolve_model
from llmload.loadtest.runconfig import parse_run_args
from llmload.loadtest.server_window import ServerWindow
from llmload.system.processes import die_with_parent
from llmload.results.metrics import VLLM_METRICS
from llmload.results.provenance import bare_model_name
from llmload.results.reconcile import ServerAccount, server_account
from llmload.results.storage import read_summary
from llmload.results.summary import Summary

__all__ = ["CROSSCHECK_SCHEMA_VERSION", "DEFAULT_WORKLOAD", "DEFAULT_REQUESTS", "DEFAULT_REPEATS", "random_workload", "run_crosscheck"]

# 2: "definitions" holds each tool's definition apart ({metric: {tool: text}}); 3: the server's account of each run
# ("server_account", "deviation_from_server_pct"), "agree" judged by it, count metrics
CROSSCHECK_SCHEMA_VERSION = 3
DEFAULT_WORKLOAD = "random:256:128"
"""PROMPTS when it is left at its default (builtin, a set vLLM's bench cannot send)."""
DEFAULT_REQUESTS = 100
"""REQUESTS per repeat when it is left at 0."""
DEFAULT_REPEATS = 3
"""REPEATS when it is left at 0: the fewest runs whose spread says something."""


def random_workload(prompts: str) -> tuple[int, int]:
    """(IN, OUT) of PROMPTS=random:IN:OUT; builtin (the default) stands for DEFAULT_WORKLOAD."""
    spec = DEFAULT_WORKLOAD if prompts == "builtin" else prompts
    kind, *lengths = spec.split(":")
    if kind != "random" or len(lengths) != 2 or not all(x.isdigit() and int(x) > 0 for x in lengths):
        raise ConfigError(f"PROMPTS={prompts}: crosscheck needs PROMPTS=random:IN:OUT (e.g. {DEFAULT_WORKLOAD}), "
                          "a workload vLLM's bench makes too")
    return int(lengths[0]), int(lengths[1])


def _bench_args(options: argparse.Namespace, host: str, model: str, prompts: Path, requests: int, result: Path) -> list[str]:
    _, output_len = random_workload(options.prompts)
    # --skip-chat-template: the text goes as the user message, as llmload sends it (the server applies the template)
    args = ["--backend", "openai-chat", "--base-url", host, "--endpoint", "/v1/chat/completions", "--model", model,
            "--dataset-name", "custom", "--dataset-path", str(prompts), "--custom-output-len", str(output_len),
            "--skip-chat-template", "--disable-shuffle", "--num-prompts", str(requests),
            "--max-concurrency", str(options.num_users), "--ignore-eos", "--temperature", str(options.temperature),
            "--disable-tqdm",
            "--percentile-metrics", ",".join(m.vllm or "" for m in VLLM_METRICS), "--metric-percentiles", "50,99",
            "--save-result", "--save-detailed", "--result-dir", str(result.parent), "--result-filename", result.name]
    if options.effort != "none":
        args += ["--extra-body", orjson.dumps({"reasoning_effort": options.effort}).decode()]
    return args


def _suite_prompts(options: argparse.Namespace, requests: int) -> str:
    input_len, output_len = random_workload(options.prompts)
    return f"random:{input_len}:{output_len}:{requests}"


def _suite_settings(options: argparse.Namespace, host: str, model: str, seed: int, requests: int, out: Path) -> list[str]:
    return [f"HOST={host}", f"MODEL={model}", f"PROMPTS={_suite_prompts(options, requests)}", "ORDER=sequence",
            f"REQUESTS={requests}", f"USERS={options.num_users}", f"SEED={seed}", f"EFFORT={options.effort}",
            f"TEMPERATURE={options.temperature}", f"OUT={out}"]


def _run(command: list[str], log: Path, env: dict[str, str], what: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                               preexec_fn=die_with_parent)
    if code != 0:
        raise LoadTestError(f"{what} exited with code {code}; see {log}")


def _bench_repeat(options: argparse.Namespace, host: str, model: str, seed: int, requests: int, out: Path,
                  api_key: str) -> dict[str, float | None]:
    from llmload.promptsets.catalog import load_prompt_set
    from llmload.vllm_cpu.launcher import bench_command

    repeat = seed - options.seed
    prompts = out / "vllm_bench" / f"prompts-{repeat}.jsonl"
    prompts.parent.mkdir(parents=True, exist_ok=True)
    texts = [prompt.messages[-1]["content"] for prompt in load_prompt_set(_suite_prompts(options, requests), seed)]
    prompts.write_bytes(b"".join(orjson.dumps({"prompt": text}) + b"\n" for text in texts))
    result = out / "vllm_bench" / f"repeat-{repeat}.json"
    env = {**os.environ, "OPENAI_API_KEY": api_key}  # vLLM's bench sends $OPENAI_API_KEY as the bearer token
    _run(bench_command(_bench_args(options, host, model, prompts, requests, result)), result.with_suffix(".log"), env,
         "vllm bench serve")
    return bench_metrics(orjson.loads(result.read_bytes()))


def _suite_repeat(options: argparse.Namespace, host: str, model: str, seed: int, requests: int, out: Path,
                  api_key: str) -> tuple[dict[str, float | None], Summary]:
    run_dir = out / "llmload" / f"repeat-{seed - options.seed}"
    env = {**os.environ, "API_KEY": api_key}  # the key never goes on a command line
    _run([sys.executable, "-m", "llmload", "load", *_suite_settings(options, host, model, seed, requests, run_dir)],
         run_dir.with_suffix(".log"), env, "llmload load")
    summary = read_summary(run_dir)
    return suite_metrics(summary), summary


_ACCOUNT_FIELDS = tuple(field.name for field in dataclasses.fields(ServerAccount))


def _server_account(window: ServerWindow, requests: int, path: Path) -> ServerAccount | None:
    """The server's account of the run just ended (None from a server without request histograms)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scrapes = window.close(requests, path)
    return server_account(*scrapes) if scrapes else None


def run_crosscheck(options: argparse.Namespace) -> int:
    """Runs both tools REPEATS times, writes OUT/crosscheck.json and prints the table; 0 when every run finished."""
    if not options.host:
        raise ConfigError("HOST is missing: crosscheck measures a running server, e.g. HOST=http://127.0.0.1:8000")
    if options.num_users < 1 or options.requests < 0:
        raise ConfigError("USERS must be at least 1, REQUESTS 0 (the default, 100) or more")
    random_workload(options.prompts)
    requests = options.requests or DEFAULT_REQUESTS
    # the suite's runs held to a run's rules (llmload/loadtest/rules.py) before anything is sent
    parse_run_args(_suite_settings(options, options.host, options.model or "model", options.seed, requests, Path("out")))
    api_key = read_api_key(options.api_key_file)
    model = resolve_model(options.model, probe_server(options.host, api_key))
    repeats = options.repeats or DEFAULT_REPEATS
    out = Path(options.out) if options.out else Path("results") / f"crosscheck-{bare_model_name(model)}"
    if (out / "crosscheck.json").exists():
        raise ConfigError(f"OUT={out} already holds a crosscheck; choose another OUT")
    tools = ("vllm_bench", "llmload")
    values: dict[str, dict[str, list[float | None]]] = {tool: {m: [] for m in METRICS} for tool in tools}
    accounts: dict[str, list[ServerAccount | None]] = {tool: [] for tool in tools}
    limited: list[str | None] = []  # per llmload repeat: the cause its self-check found when it limited the run
    reasoning = False
    for repeat in range(repeats):
        seed = options.seed + repeat
        order = tools if repeat % 2 == 0 else tools[::-1]
        for tool in order:
            print(f"repeat {repeat + 1}/{repeats}: {tool}", flush=True)
            window = ServerWindow(options.host, api_key)
            if tool == "vllm_bench":
                metrics = _bench_repeat(options, options.host, model, seed, requests, out, api_key)
            else:
                metrics, summary = _suite_repeat(options, options.host, model, seed, requests, out, api_key)
                reasoning = reasoning or bool(summary.reasoning_tokens.total)
                generator = summary.generator
                limited.append((generator.cause or "yes") if generator and generator.generator_limited else None)
            accounts[tool].append(_server_account(window, requests, out / tool / f"server_window-{repeat}.jsonl"))
            for metric in METRICS:
                values[tool][metric].append(metrics.get(metric))
    server = {tool: {metric: [None if a is None else getattr(a, key) for a in accounts[tool]]
                     for metric, key in SERVER_KEYS.items()} for tool in tools}
    rows = compare(values["vllm_bench"], values["llmload"], reasoning, server)
    input_len, output_len = random_workload(options.prompts)
    document = {"schema_version": CROSSCHECK_SCHEMA_VERSION, "host": options.host, "model": model,
                "workload": {"input_tokens": input_len, "output_tokens": output_len, "requests": requests,
                             "users": options.num_users, "repeats": repeats, "effort": options.effort,
                             "temperature": options.temperature},
                # A metric only one tool has (TTFVT: llmload; the role-only chunk's gap: vLLM bench) is left out of
                # the other's.
                "reasoning": reasoning, **{tool: {m: v for m, v in by_metric.items() if any(x is not None for x in v)}
                                           for tool, by_metric in values.items()},
                # The server's own account of each tool's runs (one per repeat; null from a server without request
                # histograms), and each tool's deviation from it.
                "server_account": {tool: {field: [None if a is None else getattr(a, field) for a in accounts[tool]]
                                          for field in _ACCOUNT_FIELDS} for tool in tools},
                "deviation_from_server_pct": {"vllm_bench": {row.metric: list(row.vllm_bench_deviation_pct)
                                                             for row in rows if row.vllm_bench_deviation_pct},
                                              "llmload": {row.metric: list(row.llmload_deviation_pct)
                                                          for row in rows if row.llmload_deviation_pct}},
                "server_tolerance_pct": SERVER_TOLERANCE_PCT,
                "agree": {row.metric: {"agree": row.agree, "judged_by": "server" if row.refereed else "spread"}
                          for row in rows},
                "within_spread": {row.metric: row.within_spread for row in rows},
                "llmload_generator_limited": limited,
                "definitions": {row.metric: {"vllm_bench": row.definitions[0], "llmload": row.definitions[1],
                                             **({"reasoning": row.reasoning} if row.reasoning else {})}
                                for row in rows}}
    write_atomic(out / "crosscheck.json", orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print(format_table(rows))
    if any(limited):
        named = ", ".join(f"{i + 1} ({cause})" for i, cause in enumerate(limited) if cause)
        print(f"warning: llmload's self-check found its load generator limited in repeat {named}: on a machine this "
              "busy each tool's timings carry its own lag, which the server's account cannot remove (its counts hold)")
    print(f"Results: {out}/crosscheck.json (each tool's runs under {out}/vllm_bench and {out}/llmload)")
    return 0
