"""`make crosscheck`: vLLM's own bench and llmload on one server and workload, alternating, REPEATS times each.

    OUT/vllm_bench/repeat-<i>.json, .log   `vllm bench serve --save-result --save-detailed` and its output
    OUT/vllm_bench/prompts-<i>.jsonl        the prompts it sent (its custom dataset)
    OUT/llmload/repeat-<i>/                 llmload's run (summary.json, samples.jsonl, load.log)
    OUT/<tool>/server_window-<i>.jsonl      the server's /metrics scraped before and after that tool's run
    OUT/crosscheck.json                     {"vllm_bench": {metric: [one value per repeat]}, "llmload": {...},
                                             "server_account": {tool: {...}}, "deviation_from_server_pct": ...,
                                             "runs": [each run in time order]}

Both send statistically identical work: llmload's PROMPTS=random:IN:OUT (random text of IN o200k tokens, OUT
tokens forced with ignore_eos), given to vLLM's bench as its custom dataset, at most USERS at once, REQUESTS per
run, with the same temperature and reasoning_effort. Each run draws its own fresh prompts: run k (in the order they
run) takes PROMPT_START + k (fresh_prompt_set: a random set drawn anew for each start), so no tool meets prompts an
earlier run left in the server's prefix cache; CACHE_RESET=on empties that cache before each run as well. The order
of the tools flips every repeat, so a server that warms up or slows down favours neither. The server's own account
of each run (its /metrics before and after) referees what it counts: each tool is set beside the server as it was
during that tool's own run, with the server's prefix-cache hit rate and its count of finished requests.

crosscheck.json's versions (``schema_version``):

    2  "definitions" holds each tool's definition apart ({metric: {tool: text}})
    3  the server's account of each run ("server_account", "deviation_from_server_pct"), "agree" judged by it,
       count metrics
    4  2026-12-06: each run its own fresh prompts (PROMPT_START + k); "runs" (time order: repeat, tool, prompt_start,
       cache_reset, the server's prefix-cache hit rate and the points it exceeds the other tool's by, each side's
       request counts, vLLM bench's completed streams that ended short); "order" (the tools per repeat);
       server_account's prefix_cache_hit_rate; "gpu"; "speedup" (the target's time scale: every figure is on its
       clock)
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
from llmload.crosscheck.runs import TOOLS, PlannedRun, RunAccount, format_runs, hit_rate_excess, plan_runs, short_streams
from llmload.errors import ConfigError, LoadTestError
from llmload.system.files import write_atomic
from llmload.loadtest.preflight import probe_server, reset_prefix_cache, resolve_model
from llmload.loadtest.runconfig import parse_run_args
from llmload.loadtest.server_window import ServerWindow
from llmload.system.processes import die_with_parent
from llmload.results.metrics import VLLM_METRICS
from llmload.results.provenance import bare_model_name
from llmload.results.reconcile import ServerAccount, server_account
from llmload.results.storage import read_summary
from llmload.results.summary import Summary
from llmload.timescale import time_scale_of

__all__ = ["CROSSCHECK_SCHEMA_VERSION", "DEFAULT_WORKLOAD", "DEFAULT_REQUESTS", "DEFAULT_REPEATS", "random_workload", "bench_prompts",
           "run_crosscheck"]

CROSSCHECK_SCHEMA_VERSION = 4
"""crosscheck.json's version; its history is in the module's docstring."""
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


def _suite_settings(options: argparse.Namespace, host: str, model: str, start: int, requests: int, out: Path) -> list[str]:
    """A suite run's settings: its own fresh prompts from PROMPT_START ``start``, in the set's order (the bench's)."""
    return [f"HOST={host}", f"MODEL={model}", f"GPU={options.gpu}", f"PROMPTS={_suite_prompts(options, requests)}",
            "ORDER=sequence", f"PROMPT_START={start}", f"CACHE_RESET={options.cache_reset}", f"REQUESTS={requests}",
            f"USERS={options.num_users}", f"SEED={options.seed}", f"EFFORT={options.effort}",
            f"TEMPERATURE={options.temperature}", f"OUT={out}"]


def bench_prompts(spec: str, seed: int, start: int, requests: int) -> list[str]:
    """The texts a bench run sends, in order: the set a suite run with PROMPT_START ``start`` draws, from the position
    its first prompt is at (fresh_prompt_set), as ORDER=sequence walks it."""
    from llmload.promptsets.catalog import fresh_prompt_set

    prompts, first = fresh_prompt_set(spec, seed, start)
    return [prompts[(first + i) % len(prompts)].messages[-1]["content"] for i in range(requests)]


def _run(command: list[str], log: Path, env: dict[str, str], what: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                               preexec_fn=die_with_parent)
    if code != 0:
        raise LoadTestError(f"{what} exited with code {code}; see {log}")


def _bench_run(options: argparse.Namespace, host: str, model: str, run: PlannedRun, requests: int, out: Path,
               api_key: str) -> tuple[dict[str, float | None], dict]:
    from llmload.vllm_cpu.launcher import bench_command

    prompts = out / "vllm_bench" / f"prompts-{run.repeat}.jsonl"
    prompts.parent.mkdir(parents=True, exist_ok=True)
    texts = bench_prompts(_suite_prompts(options, requests), options.seed, run.prompt_start, requests)
    prompts.write_bytes(b"".join(orjson.dumps({"prompt": text}) + b"\n" for text in texts))
    result = out / "vllm_bench" / f"repeat-{run.repeat}.json"
    env = {**os.environ, "OPENAI_API_KEY": api_key}  # vLLM's bench sends $OPENAI_API_KEY as the bearer token
    _run(bench_command(_bench_args(options, host, model, prompts, requests, result)), result.with_suffix(".log"), env,
         "vllm bench serve")
    document = orjson.loads(result.read_bytes())
    return bench_metrics(document), document


def _suite_run(options: argparse.Namespace, host: str, model: str, run: PlannedRun, requests: int, out: Path,
               api_key: str) -> tuple[dict[str, float | None], Summary]:
    run_dir = out / "llmload" / f"repeat-{run.repeat}"
    env = {**os.environ, "API_KEY": api_key}  # the key never goes on a command line
    _run([sys.executable, "-m", "llmload", "load", *_suite_settings(options, host, model, run.prompt_start, requests,
                                                                    run_dir)],
         run_dir.with_suffix(".log"), env, "llmload load")
    summary = read_summary(run_dir)
    return suite_metrics(summary), summary


def _failures(summary: Summary) -> tuple[str, ...]:
    """llmload's failed requests: the server's messages where it gave them, else each kind's count."""
    if summary.server_failures is not None and summary.server_failures.messages:
        return tuple(f"{m.category}: {m.message} ({m.count})" for m in summary.server_failures.messages)
    return tuple(f"{kind} ({n})" for kind, n in sorted(summary.errors.items()) if kind != "interrupted")


_ACCOUNT_FIELDS = tuple(field.name for field in dataclasses.fields(ServerAccount))


def _server_account(window: ServerWindow, requests: int, path: Path) -> ServerAccount | None:
    """The server's account of the run just ended (None from a server without request histograms)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scrapes = window.close(requests, path)
    return server_account(*scrapes) if scrapes else None


def _reset(options: argparse.Namespace, run: PlannedRun, api_key: str) -> str:
    """CACHE_RESET=on: the prefix cache emptied before a bench run (a suite run empties it itself and records it)."""
    if options.cache_reset != "on" or run.tool != "vllm_bench":
        return "off"
    outcome = reset_prefix_cache(options.host, api_key)
    if not outcome.startswith("done"):
        print(f"warning: CACHE_RESET=on: {outcome}", flush=True)
    return outcome


def run_crosscheck(options: argparse.Namespace) -> int:
    """Runs both tools REPEATS times, writes OUT/crosscheck.json and prints the table; 0 when every run finished."""
    if not options.host:
        raise ConfigError("HOST is missing: crosscheck measures a running server, e.g. HOST=http://127.0.0.1:8000")
    if options.num_users < 1 or options.requests < 0:
        raise ConfigError("USERS must be at least 1, REQUESTS 0 (the default, 100) or more")
    if options.cache != "cold":
        raise ConfigError(f"CACHE={options.cache}: crosscheck gives every run its own fresh prompts (vLLM's bench repeats "
                          "none on purpose); leave CACHE out (cold)")
    input_len, output_len = random_workload(options.prompts)
    requests = options.requests or DEFAULT_REQUESTS
    repeats = options.repeats or DEFAULT_REPEATS
    runs = plan_runs(repeats, options.prompt_start)
    # the suite's runs held to a run's rules (llmload/loadtest/rules.py) before anything is sent
    parse_run_args(_suite_settings(options, options.host, options.model or "model", options.prompt_start, requests,
                                   Path("out")))
    api_key = read_api_key(options.api_key_file)
    model = resolve_model(options.model, probe_server(options.host, api_key))
    out = Path(options.out) if options.out else Path("results") / f"crosscheck-{bare_model_name(model)}"
    if (out / "crosscheck.json").exists():
        raise ConfigError(f"OUT={out} already holds a crosscheck; choose another OUT")
    values: dict[str, dict[str, list[float | None]]] = {tool: {m: [None] * repeats for m in METRICS} for tool in TOOLS}
    accounts: dict[str, list[ServerAccount | None]] = {tool: [None] * repeats for tool in TOOLS}
    limited: list[str | None] = [None] * repeats  # per llmload repeat: the cause its self-check found when it limited the run
    done: list[RunAccount] = []
    reasoning = False
    speedup = 1.0
    for run in runs:
        print(f"repeat {run.repeat + 1}/{repeats}: {run.tool} (PROMPT_START={run.prompt_start})", flush=True)
        reset = _reset(options, run, api_key)
        window = ServerWindow(options.host, api_key)
        if run.tool == "vllm_bench":
            metrics, result = _bench_run(options, options.host, model, run, requests, out, api_key)
            completed, failed = result.get("completed"), result.get("failed")
            short, failures = short_streams(result, output_len), ()
        else:
            metrics, summary = _suite_run(options, options.host, model, run, requests, out, api_key)
            reasoning = reasoning or bool(summary.reasoning_tokens.total)
            speedup = time_scale_of(summary.config).speedup
            generator = summary.generator
            limited[run.repeat] = (generator.cause or "yes") if generator and generator.generator_limited else None
            completed, failed, short, failures = summary.requests_ok, summary.requests_failed, (), _failures(summary)
            reset = summary.cache.reset if summary.cache is not None else reset
        account = _server_account(window, requests, out / run.tool / f"server_window-{run.repeat}.jsonl")
        accounts[run.tool][run.repeat] = account
        for metric in METRICS:
            values[run.tool][metric][run.repeat] = metrics.get(metric)
        done.append(RunAccount(run, reset, None if account is None else account.prefix_cache_hit_rate, completed, failed,
                               None if account is None else account.requests, output_len, short, failures,
                               metrics.get("mean_ttft_ms"), None if account is None else account.mean_ttft_ms))
        print(f"  server prefix-cache hit rate {_share(done[-1].hit_rate)}; prefix cache reset: {reset}", flush=True)
    server = {tool: {metric: [None if a is None else getattr(a, key) for a in accounts[tool]]
                     for metric, key in SERVER_KEYS.items()} for tool in TOOLS}
    rows = compare(values["vllm_bench"], values["llmload"], reasoning, server)
    excess = hit_rate_excess(done)
    document = {"schema_version": CROSSCHECK_SCHEMA_VERSION, "host": options.host, "model": model, "gpu": options.gpu,
                "speedup": speedup,
                "workload": {"input_tokens": input_len, "output_tokens": output_len, "requests": requests,
                             "users": options.num_users, "repeats": repeats, "effort": options.effort,
                             "temperature": options.temperature, "seed": options.seed,
                             "prompt_start": options.prompt_start, "cache_reset": options.cache_reset},
                # A metric only one tool has (TTFVT: llmload; the role-only chunk's gap: vLLM bench) is left out of
                # the other's.
                "reasoning": reasoning, **{tool: {m: v for m, v in by_metric.items() if any(x is not None for x in v)}
                                           for tool, by_metric in values.items()},
                # The server's own account of each tool's runs (one per repeat; null from a server without request
                # histograms), and each tool's deviation from it.
                "server_account": {tool: {field: [None if a is None else getattr(a, field) for a in accounts[tool]]
                                          for field in _ACCOUNT_FIELDS} for tool in TOOLS},
                "deviation_from_server_pct": {"vllm_bench": {row.metric: list(row.vllm_bench_deviation_pct)
                                                             for row in rows if row.vllm_bench_deviation_pct},
                                              "llmload": {row.metric: list(row.llmload_deviation_pct)
                                                          for row in rows if row.llmload_deviation_pct}},
                "server_tolerance_pct": SERVER_TOLERANCE_PCT,
                "agree": {row.metric: {"agree": row.agree, "judged_by": "server" if row.refereed else "spread"}
                          for row in rows},
                "within_spread": {row.metric: row.within_spread for row in rows},
                "llmload_generator_limited": limited,
                "order": [[r.tool for r in runs if r.repeat == repeat] for repeat in range(repeats)],
                "runs": [_run_entry(a, excess.get(a.run.index)) for a in done],
                "definitions": {row.metric: {"vllm_bench": row.definitions[0], "llmload": row.definitions[1],
                                             **({"reasoning": row.reasoning} if row.reasoning else {})}
                                for row in rows}}
    write_atomic(out / "crosscheck.json", orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print(format_table(rows))
    print()
    print(format_runs(done))
    if speedup != 1.0:
        print(f"The target is the built-in one at SPEEDUP {speedup:g}x: every time above, the server's account's too, is "
              "on its clock (vLLM's bench knows no other); each deviation from the server is a ratio, the same for the "
              "GPU it plays (each llmload run's result block gives its figures predicted for that GPU)")
    if any(limited):
        named = ", ".join(f"{i + 1} ({cause})" for i, cause in enumerate(limited) if cause)
        print(f"warning: llmload's self-check found its load generator limited in repeat {named}: on a machine this "
              "busy each tool's timings carry its own lag, which the server's account cannot remove (its counts hold)")
    print(f"Results: {out}/crosscheck.json (each tool's runs under {out}/vllm_bench and {out}/llmload); a next "
          f"crosscheck on this server with fresh prompts: PROMPT_START={runs[-1].prompt_start + 1}")
    return 0


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _run_entry(account: RunAccount, excess_points: float | None) -> dict:
    """One run of crosscheck.json's "runs"."""
    run = account.run
    return {"run": run.index, "repeat": run.repeat, "tool": run.tool, "prompt_start": run.prompt_start,
            "cache_reset": account.cache_reset, "server_prefix_cache_hit_rate": account.hit_rate,
            "hit_rate_above_other_tool_points": excess_points, "requests_completed": account.completed,
            "requests_failed": account.failed, "server_requests_finished": account.server_finished,
            "counted_differently": account.counted_differently,
            "short_streams": [{"request": s.request, "output_tokens": s.output_tokens} for s in account.short],
            "failures": list(account.failures)}
