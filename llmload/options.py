"""Every setting of every command, defined once in TABLE: the Makefile's KEY=VALUE, the CLI's flags,
Locust's parser and web UI, scenarios, the built-in target and the vLLM CPU launcher.

``make load GPU=a100 USERS=8`` passes ``GPU=a100 USERS=8`` to ``python -m llmload load``, which
turns each KEY=VALUE into its flag. Options Locust itself owns (host, users, spawn rate, run
time, stop timeout) keep Locust's flags; the rest are added to Locust's parser from this table,
with typed defaults so the web UI can cast what is typed into its form. Each option lists the
commands that take it; summary.json's ``config`` records a run's options under ``config_name``.

Only the table lives here, and llmload/settings.py reads settings against it (KEY=VALUE to flags, parsers, the
help text); a run's options become one typed RunConfig in loadtest/runconfig.py; the grammars of values live with the stages that use them (EFFORT's mix in
results/efforts.py, SLO in results/slo.py), the API key, WEB_LOGIN and METRICS_LOGIN in credentials.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmload.errors import ConfigError

__all__ = [
    "Option", "TABLE", "COMMANDS", "OPTIONS", "PROMPT_OPTIONS", "SWEEP_OPTIONS", "CAPACITY_OPTIONS", "SIM_OPTIONS",
    "VLLM_CPU_OPTIONS", "CROSSCHECK_OPTIONS", "CALIBRATE_OPTIONS", "WORKER_OPTIONS", "MONITOR_OPTIONS", "BUNDLE_OPTIONS", "ARRIVALS",
    "RUNNER_KEYS", "TUNE_OPTIONS", "options_for", "option_by_key", "config_name",
]

ARRIVALS = ("poisson", "constant", "gamma")
"""ARRIVALS's values: how the gaps between RATE's sends are drawn."""
RUNNER_KEYS = ("HOST", "OUT", "API_KEY", "SPEEDUP", "API_KEY_FILE", "WEB_HOST", "WEB_PORT", "WEB_LOGIN", "METRICS_HOST",
               "METRICS_PORT", "METRICS_LOGIN", "PROMPT_START", "CACHE_RESET")
"""Settings that say where and how a sweep or a run is driven, not what a cell measures: never written in a scenario
(a study gives each run its own PROMPT_START: llmload/sweep/fresh.py)."""
COMMANDS = ("load", "ui", "prompts", "sweep", "serve-sim", "vllm-cpu", "worker", "capacity", "crosscheck", "monitor", "calibrate", "tune",
            "bundle")
"""Every command that takes settings: ``make <command>`` (vllm-cpu: ``make serve-vllm-cpu`` and ``stop-vllm-cpu``;
capacity and tune: also every load option, which their runs take)."""
_RUN = ("load", "ui")
_RUN_AND_SWEEP = ("load", "ui", "sweep")
_RUN_AND_CROSSCHECK = ("load", "ui", "crosscheck")


@dataclass(frozen=True)
class Option:
    """One setting, defined once for every command that takes it."""

    key: str
    """The Makefile variable and KEY=VALUE name."""
    flag: str
    dest: str
    default: Any
    """Typed: its type casts the value, in the CLI and in Locust's web UI form."""
    help: str
    choices: tuple[str, ...] | None = None
    locust_flag: str | None = None
    """Set when Locust defines the option itself (then ``flag`` is Locust's long flag)."""
    secret: bool = False
    """Read from the environment variable named ``key``, never from a command line (ps shows command lines)."""
    to_locust: bool = True
    """Passed on to Locust's parser and web UI form; False for options only ``python -m llmload`` reads."""
    web_form: bool = True
    """Offered in the web UI's form; False for what is fixed once Locust has started (a port it listens on)."""
    commands: tuple[str, ...] = _RUN
    """The commands that take it (see COMMANDS)."""
    value_type: type | None = None
    """The type when ``default`` is None (an option that is off unless given)."""
    # The range of a numeric option, checked wherever it is parsed (check_range); nan and inf never pass.
    minimum: float | None = None
    """The smallest value allowed."""
    above: float | None = None
    """Values must be greater than this (a timeout of 0 s means nothing)."""
    maximum: float | None = None
    """The largest value allowed."""


# Defaults that are empty are filled from other values where they are used, as each help says.
TABLE: tuple[Option, ...] = (
    Option("HOST", "--host", "host", "", "server root, e.g. http://127.0.0.1:8000; empty starts the built-in target "
           "(a sweep: each cell's GPU and MODEL; crosscheck: required)", locust_flag="--host", commands=(*_RUN_AND_SWEEP, "crosscheck")),
    Option("GPU", "--gpu", "gpu", "h100", "GPU label; without HOST, the GPU the built-in target plays (its MXFP4 "
           "profile; PROFILE names another); the label prices the run (PRICE); crosscheck: its llmload runs' label",
           commands=("load", "ui", "serve-sim", "crosscheck")),
    Option("PROFILE", "--target-profile", "target_profile", "", "the built-in target's timing profile: a shipped name (e.g. "
           "h200-gpt-oss-20b-bf16) or a profile file; empty: GPU's MXFP4 profile for MODEL; calibrate: the profile "
           "refitted (its GPU, model, weights and server limits)", commands=("load", "ui", "serve-sim", "calibrate")),
    Option("PRICE", "--price", "price", "", "USD per GPU-hour for the run's cost, a number above 0 (empty: the built-in "
           "on-demand list price of GPU, a dated default)"),
    Option("GPUS", "--gpus", "gpus", 1, "GPUs per server, for the cost (a server with tensor parallelism 2: GPUS=2)",
           minimum=1),
    Option("MODEL", "--model", "model", "", "model to request; empty takes the one the server serves (the built-in "
           "target: gpt-oss-20b; make serve-vllm-cpu: tiny-gptoss); VERIFY: the model named in /tokenize",
           commands=("load", "ui", "prompts", "serve-sim", "vllm-cpu", "crosscheck")),
    Option("EFFORT", "--effort", "effort", "medium", "reasoning_effort sent: low, medium, high, none (left out), "
           "or a mix drawn per request, e.g. mix:low=70,medium=25,high=5", commands=_RUN_AND_CROSSCHECK),
    Option("USERS", "--users", "num_users", 1, "concurrent users (streams in flight)", locust_flag="-u", minimum=1,
           commands=_RUN_AND_CROSSCHECK),
    Option("SPAWN_RATE", "--spawn-rate", "spawn_rate", 0.0, "users started per second (0: all at once)", locust_flag="-r", minimum=0),
    Option("MAX_TOKENS", "--max-tokens", "max_tokens", 0, "max_tokens sent (0 leaves it out)", minimum=0),
    Option("PROMPTS", "--prompts", "prompts", "builtin", "prompt set: builtin (12 short prompts), 2k, 4k or 8k (generated sets), "
           "a prompts JSONL path, sharegpt:PATH[:N] or random:IN:OUT[:N] (sets max_tokens itself); crosscheck: "
           "random:IN:OUT (builtin, the default, stands for random:256:128)", commands=_RUN_AND_CROSSCHECK),
    Option("ORDER", "--order", "order", "random", "prompt order: a random prompt per request, or the set's order", choices=("random", "sequence")),
    Option("NONCE", "--nonce", "nonce", "off", "a unique number before every prompt, so vLLM's prefix cache cannot help", choices=("off", "on")),
    # issue-32: the prefix cache as a controlled setting
    Option("CACHE", "--cache", "cache", "cold", "what the server's prefix cache may hold of this run's prompts: cold (no "
           "prompt it has seen in this study: each request a prompt not sent before, from PROMPT_START on; once the "
           "set runs out, a prompt sent again gets a nonce in front) or warm (prompts repeated on purpose: ORDER as "
           "it says); every run reports the server's hit rate and flags one above what its workload declares "
           "(crosscheck: cold only)",
           choices=("cold", "warm"), commands=_RUN_AND_CROSSCHECK),
    Option("PROMPT_START", "--prompt-start", "prompt_start", 0, "where this run's fresh prompts start: position N of the "
           "set's order (ORDER=random: its seeded shuffle); a random:IN:OUT set is drawn anew for each N; studies (sweep, "
           "capacity, crosscheck, tune) give each run its own, from this one on", minimum=0,
           commands=(*_RUN_AND_CROSSCHECK, "sweep")),
    Option("CACHE_RESET", "--cache-reset", "cache_reset", "off", "on: ask the server to empty its prefix cache before "
           "the run (vLLM's POST /reset_prefix_cache, served with VLLM_SERVER_DEV_MODE=1; the built-in target has it); "
           "a server without it: one line, the run goes on, the result block says so",
           choices=("off", "on"), commands=(*_RUN_AND_CROSSCHECK, "sweep")),
    Option("DURATION", "--run-time", "run_time", "120s", "how long load is sent, e.g. 120s, 2m", locust_flag="-t"),
    Option("REQUESTS", "--requests", "requests", 0, "send this many requests, then stop (USERS is then the maximum concurrency); 0: DURATION decides "
           "(crosscheck: per tool and repeat, 0 = 100)", minimum=0, commands=_RUN_AND_CROSSCHECK),
    Option("WARMUP_REQUESTS", "--warmup-requests", "warmup_requests", 0, "requests sent and finished before the measured ones start (kept in samples, not in the summary)", minimum=0),
    Option("SPEEDUP", "--speedup", "speedup", 1.0, "the built-in target runs N times faster (without HOST, or a HOST "
           "started with SPEEDUP=N); DURATION is divided by N", commands=("load", "ui", "sweep", "serve-sim"), above=0),
    Option("STOP_TIMEOUT", "--stop-timeout", "stop_timeout", 600, "seconds streams in flight may take to finish at the end", locust_flag="-s", minimum=0),
    Option("CLIENT", "--client", "client", "raw", "streaming client", choices=("raw", "openai")),
    Option("API", "--api", "api", "chat", "the API each request uses: chat (POST /v1/chat/completions) or responses "
           "(POST /v1/responses, the Responses API: reasoning.effort, max_output_tokens)", choices=("chat", "responses")),
    Option("RESPONSE_FORMAT", "--response-format", "response_format", "", "structured output asked of every answer: "
           "json_object (a JSON object) or json_schema:PATH (valid against the JSON Schema in PATH); each record says "
           "whether its answer parsed and was valid, the summary gives the valid share (empty: off)"),
    Option("OUT", "--out", "out", "", "where results go: a run's folder (default results/<time>-<gpu>-<model>-<effort>-u<users>); "
           "a sweep's (default results/<scenario name>; rerunning resumes it); prompts: the sets' folder (default prompts); "
           "crosscheck: its folder (default results/crosscheck-<model>); calibrate: the profile file written (default "
           "profiles/<PROFILE's name>.json); bundle: the bundle's folder, refused if it holds one (default "
           "results/bundle-<PLATFORM>-py<PYTHON>)", commands=("load", "ui", "sweep", "prompts", "crosscheck", "calibrate", "bundle")),
    Option("TEMPERATURE", "--temperature", "temperature", 1.0, "sampling temperature sent", minimum=0,
           commands=_RUN_AND_CROSSCHECK),
    Option("EXTRA_BODY", "--extra-body", "extra_body", "", "JSON object merged into every request body"),
    Option("CONTINUOUS_USAGE", "--continuous-usage", "continuous_usage", "auto", "ask for usage on every chunk (auto: when the server is vLLM)", choices=("auto", "on", "off")),
    Option("REQUEST_TIMEOUT", "--request-timeout", "request_timeout", 600.0, "seconds a request may wait for data before it fails", above=0),
    Option("SEED", "--seed", "seed", 0, "seed: of each user's random prompt choice; prompts: a set depends only on it, "
           "the templates and the size; serve-sim: of output lengths and faults; crosscheck: every run's prompts are "
           "PROMPTS drawn at SEED and the run's own PROMPT_START",
           commands=("load", "ui", "prompts", "serve-sim", "crosscheck"), minimum=0),
    Option("API_KEY", "--api-key", "api_key", "", "API key sent with every call to the server: $API_KEY, else "
           "$OPENAI_API_KEY, or API_KEY_FILE; in the web UI, type one to load another host; serve-sim: the key the "
           "built-in target requires (as vLLM's --api-key)", secret=True,
           commands=("load", "ui", "prompts", "sweep", "serve-sim", "crosscheck")),
    # prompts
    Option("SIZES", "--sizes", "sizes", "2k,4k,8k", "which sets to write (comma-separated: 2k, 4k, 8k)", commands=("prompts",)),
    Option("COUNT", "--count", "count", 5000, "prompts per set", commands=("prompts",), minimum=1),
    Option("TEMPLATES", "--templates", "templates", "templates", "folder of task templates", commands=("prompts",)),
    Option("VERIFY", "--verify", "verify", "", "server root whose /tokenize checks a sample of every set", commands=("prompts",)),
    # sweep
    Option("SCENARIO", "--scenario", "scenario", "", "the scenario file, e.g. scenarios/h100-grid.yaml (tune: its cells "
           "are the workload, its server.configs may list the configurations)", commands=("sweep", "tune")),
    Option("METRICS_INTERVAL", "--metrics-interval", "metrics_interval", 1.0, "seconds between samples of the server's /metrics", commands=("sweep",), minimum=0.1),
    # crosscheck
    Option("REPEATS", "--repeats", "repeats", 0, "runs of each cell (sweep: every run kept, their spread reported beside "
           "each run's intervals; given here it replaces the scenario's REPEATS) or of each tool, alternating (crosscheck: "
           "their spread is what agreement is judged by); 0: the scenario's REPEATS, else 1 (crosscheck: 3)",
           commands=("sweep", "crosscheck"), minimum=0),
    # the built-in target and the vLLM CPU server
    Option("PORT", "--port", "port", 8000, "TCP port the server listens on (0: a free one)", commands=("serve-sim", "vllm-cpu"), minimum=0, maximum=65535),
    Option("BIND", "--host", "host", "127.0.0.1", "loopback address the built-in target listens on", commands=("serve-sim",)),
    Option("FIXED_TTFT_MS", "--fixed-ttft-ms", "fixed_ttft_ms", None, "exact time to first token after admission, replacing the model",
           commands=("serve-sim",), value_type=float, minimum=0),
    Option("FIXED_ITL_MS", "--fixed-itl-ms", "fixed_itl_ms", None, "exact inter-token latency; 0 sends tokens as fast as possible",
           commands=("serve-sim",), value_type=float, minimum=0),
    Option("FAIL_RATE", "--fail-rate", "fail_rate", 0.0, "fraction of requests answered 500 (fault injection)", commands=("serve-sim",), minimum=0, maximum=1),
    Option("DISCONNECT_RATE", "--disconnect-rate", "disconnect_rate", 0.0, "fraction of requests whose connection is closed mid-stream",
           commands=("serve-sim",), minimum=0, maximum=1),
    Option("SEND_LOG", "--send-log", "send_log", None, "append per-token send times of streamed requests as JSON lines to this file",
           commands=("serve-sim",), value_type=str),
    # secrets and the web UI
    Option("API_KEY_FILE", "--api-key-file", "api_key_file", "", "file whose first line is the API key (instead of $API_KEY)",
           to_locust=False, commands=("load", "ui", "prompts", "sweep", "crosscheck")),
    Option("WEB_HOST", "--web-host", "web_host", "127.0.0.1", "address the web UI listens on; anything but 127.0.0.1 needs WEB_LOGIN",
           to_locust=False),
    Option("WEB_PORT", "--web-port", "web_port", 8089, "port of the web UI", to_locust=False, minimum=1, maximum=65535),
    Option("WEB_LOGIN", "--web-login", "web_login", "", "user:password the web UI asks for (Locust's --web-login)",
           secret=True, to_locust=False),
    # issue-25: the run's metrics for Prometheus, and a Prometheus to scrape them
    Option("METRICS_PORT", "--metrics-port", "metrics_port", 0, "port where the process that owns the run serves its "
           "metrics to Prometheus (llmload_* beside vLLM's vllm:*; monitoring/); 0: off", web_form=False, minimum=0,
           maximum=65535, commands=_RUN_AND_SWEEP),
    Option("METRICS_HOST", "--metrics-host", "metrics_host", "127.0.0.1", "address METRICS_PORT listens on; one other than "
           "loopback needs METRICS_LOGIN", web_form=False, commands=_RUN_AND_SWEEP),
    Option("METRICS_LOGIN", "--metrics-login", "metrics_login", "", "user:password METRICS_PORT asks for (HTTP basic auth, "
           "Prometheus's basic_auth)", secret=True, to_locust=False, commands=_RUN_AND_SWEEP),
    Option("MONITOR_PORT", "--monitor-port", "monitor_port", 9090, "port of the Prometheus that make monitor starts on "
           "127.0.0.1", commands=("monitor",), minimum=1, maximum=65535),
    # crash safety
    Option("FLUSH_INTERVAL", "--flush-interval", "flush_interval", 1.0, "seconds between appends of records to samples.jsonl: at most what a kill -9 loses"),
    # failure pacing, and faults the built-in target injects
    Option("FAILURE_BACKOFF", "--failure-backoff", "failure_backoff", 0.1, "seconds a user waits after a failed request, "
           "doubled after each failure in a row up to FAILURE_BACKOFF_MAX, none after a success (0: no wait)", minimum=0),
    Option("FAILURE_BACKOFF_MAX", "--failure-backoff-max", "failure_backoff_max", 5.0, "the longest wait after failures in a row, in seconds",
           minimum=0),
    Option("MAX_FAIL_RATIO", "--max-fail-ratio", "max_fail_ratio", 0.5, "stop the run once more than this share of its requests "
           "failed, judged from the 10th on (exit code 3; 0: never stop)", minimum=0, maximum=1),
    Option("FAULT", "--fault", "fault", None, "a fault injected into chat and Responses API requests: no-done, bad-json, error-object, slow-headers, "
           "or http-<code> (that status, with a request id in its message)", commands=("serve-sim",), value_type=str),
    Option("FAULT_RATE", "--fault-rate", "fault_rate", 1.0, "fraction of requests FAULT hits", commands=("serve-sim",),
           minimum=0, maximum=1),
    Option("TOOL_CALLS", "--tool-calls", "tool_calls", 1, "with tools offered (tool_choice auto): the function calls the "
           "target answers a task with, one per request while it holds fewer tool results, before a text answer",
           commands=("serve-sim",), minimum=0),
    Option("TOOL_INVALID_RATE", "--tool-invalid-rate", "tool_invalid_rate", 0.0, "fraction of function calls broken "
           "(fault injection): half with arguments that are not JSON, half naming a function not offered",
           commands=("serve-sim",), minimum=0, maximum=1),
    # more than one Locust process (issue 14)
    Option("WORKERS", "--workers", "workers", 0, "Locust worker processes on this machine running the users (0: the "
           "one process runs them); one samples.jsonl either way", to_locust=False, commands=("load", "ui", "worker"),
           minimum=0),
    Option("EXPECT_WORKERS", "--expect-remote-workers", "expect_remote_workers", 0, "be the master of this many workers "
           "started elsewhere (make worker MASTER=address:port); the run starts when all have connected", to_locust=False,
           minimum=0),
    Option("MASTER_BIND", "--master-bind", "master_bind", "127.0.0.1:5557", "address:port the master listens on for "
           "EXPECT_WORKERS (0.0.0.0:5557: every interface)", to_locust=False),
    Option("MASTER", "--master", "master", "", "the master's address:port (its MASTER_BIND), e.g. 10.0.0.5:5557",
           to_locust=False, commands=("worker",)),
    # issue-17: the console and Locust's own files
    Option("LOCUST_TABLE", "--locust-table", "locust_table", "off", "on: Locust's request table every few seconds during "
           "a headless run (off: once, at the end)", choices=("off", "on"), to_locust=False, commands=("load",)),
    Option("LOCUST_HISTORY", "--locust-history", "locust_history", "off", "on: also keep Locust's own --csv files, with its "
           "per-second history (OUT/locust_history_stats_history.csv)", choices=("off", "on"), to_locust=False),
    # issue-15: SLOs, open-loop arrivals, early stop, capacity search
    Option("SLO", "--slo", "slo", "", "service-level objectives, e.g. ttft_p90<=2s,tpot_p90<=50ms,ttfvt_p90<=10s "
           "(units required); gives goodput_rps"),
    Option("RATE", "--rate", "rate", 0.0, "open loop: requests per second sent on a schedule whatever the server does "
           "(0: USERS closed-loop users); with workers, each sends its share of the one schedule", minimum=0),
    Option("ARRIVALS", "--arrivals", "arrivals", "poisson", "with RATE: the gaps between sends", choices=ARRIVALS),
    Option("BURSTINESS", "--burstiness", "burstiness", 1.0, "ARRIVALS=gamma: the gaps' shape, as vLLM bench's --burstiness "
           "(below 1 burstier, above 1 more regular)", above=0),
    Option("MAX_CONCURRENCY", "--max-concurrency", "max_concurrency", 0, "with RATE: at most this many requests in flight "
           "(split evenly over workers); one due while all are busy waits for a slot (0: no cap)", minimum=0),
    Option("EARLY_STOP", "--early-stop", "early_stop", "off", "with SLO: end the run as soon as an SLO's failure is certain "
           "(a sequential test), not at DURATION", choices=("off", "on")),
    # issue-22: conversations, shared prefixes, trace replay
    Option("TURNS", "--turns", "turns", "1", "conversations: each user holds one of N turns at a time (or A-B, drawn per "
           "conversation), every turn sending the history so far; REQUESTS counts turns; with RATE, conversations start "
           "at RATE per second"),
    Option("THINK_TIME", "--think-time", "think_time", "0", "with TURNS: the wait between an answer and the next turn, "
           "a duration (e.g. 5s) or exp:MEAN (exponential, e.g. exp:5s); divided by SPEEDUP like DURATION"),
    Option("PREFIX_TOKENS", "--prefix-tokens", "prefix_tokens", 0, "the same system message of exactly N tokens before "
           "every prompt (0: none)", minimum=0),
    Option("PREFIX_GROUPS", "--prefix-groups", "prefix_groups", 1, "with PREFIX_TOKENS: this many distinct prefixes, "
           "prompt i of the set getting prefix i mod N", minimum=1),
    Option("TRACE", "--trace", "trace", "", "replay a trace: a Mooncake JSONL or an Azure LLM inference CSV file; each "
           "row is sent at its time with a prompt of its input length and max_tokens its output length (replaces "
           "PROMPTS, USERS and RATE; the run ends with its last row)"),
    Option("TRACE_SPEED", "--trace-speed", "trace_speed", 1.0, "with TRACE: replay this many times faster (2: twice as "
           "fast; times SPEEDUP)", above=0),
    Option("TRACE_LIMIT", "--trace-limit", "trace_limit", 0, "with TRACE: replay only its first N rows (0: all)", minimum=0),
    # issue-23: tools and their rounds
    Option("TOOLS", "--tools", "tools", "", "a JSON file of function tools in chat's form (e.g. tools/example.json), "
           "offered with every request (chat tools, or the Responses API's flat tools); empty: none"),
    Option("TOOL_CHOICE", "--tool-choice", "tool_choice", "auto", "with TOOLS: tool_choice sent: auto (the model "
           "decides), required (it must call one), none (it must not)", choices=("auto", "required", "none")),
    Option("TOOL_ROUNDS", "--tool-rounds", "tool_rounds", 1, "with TOOLS: the most requests a task makes; while an "
           "answer is a function call, the call and the tool's result go back in the next (1: no results sent)",
           minimum=1, maximum=64),
    Option("TOOL_RESULT_TOKENS", "--tool-result-tokens", "tool_result_tokens", 200, "with TOOL_ROUNDS: each tool "
           "result's length, exactly, in tokens of text (templates/tool_result/result.j2)", minimum=1, maximum=100_000),
    Option("ITL_PER_SEQ_MS", "--itl-per-seq-ms", "itl_per_seq_ms", None, "the inter-token gap grows by this per running "
           "sequence (also on top of FIXED_ITL_MS): a known capacity, for tests", commands=("serve-sim",), value_type=float,
           minimum=0),
    # issue-33: make tune
    Option("SERVE", "--serve", "serve", "", "tune: the server's launch command, {port} where the port goes (else "
           "--port N is appended), e.g. 'vllm serve openai/gpt-oss-20b --max-model-len 32768'; empty: the built-in "
           "target plays each configuration (a rehearsal)", commands=("tune",)),
    Option("GRID", "--grid", "grid", "", "tune: what varies, e.g. 'max-num-batched-tokens=2048,4096 async-scheduling="
           "off,on env:VLLM_ATTENTION_BACKEND=FLASH_ATTN,TRITON_ATTN' (default: the flag left out); the first of each "
           "is the baseline", commands=("tune",)),
    Option("SEARCH", "--search", "search", "auto", "tune: grid (every configuration at the full load time), halving "
           "(all briefly, then those within the leader's interval longer), auto (halving above 4 configurations)",
           choices=("auto", "grid", "halving"), commands=("tune",)),
    Option("OBJECTIVE", "--objective", "objective", "", "tune: capacity (users or rate at SLO), throughput (output "
           "tokens/s at the workload as given) or cost (USD per million output tokens, with PRICE); empty: capacity "
           "with SLO, else throughput", commands=("tune",)),
    Option("BUDGET", "--budget", "budget", "", "tune: the most load to send, in minutes (30) or a span (1h30m), on "
           "the server's clock; empty: no limit", commands=("tune",)),
    Option("SERVE_TIMEOUT", "--serve-timeout", "serve_timeout", 1200.0, "tune: seconds a server may take to serve "
           "(a 120b model loads for minutes)", above=0, commands=("tune",)),
    # issue-33: vLLM's serving flags the built-in target plays (llmload/sim/serverflags.py), under vLLM's names
    Option("MAX_NUM_SEQS", "--max-num-seqs", "max_num_seqs", None, "vLLM's --max-num-seqs: running sequences at most "
           "(empty: the profile's, vLLM's default for the GPU)", commands=("serve-sim",), value_type=int, minimum=1),
    Option("MAX_NUM_BATCHED_TOKENS", "--max-num-batched-tokens", "max_num_batched_tokens", None, "vLLM's "
           "--max-num-batched-tokens: tokens one step takes (empty: the profile's)", commands=("serve-sim",),
           value_type=int, minimum=1),
    Option("GPU_MEMORY_UTILIZATION", "--gpu-memory-utilization", "gpu_memory_utilization", None, "vLLM's "
           "--gpu-memory-utilization: the GPU memory share taken; what the weights leave is KV cache (empty: 0.9)",
           commands=("serve-sim",), value_type=float, above=0, maximum=1),
    Option("MAX_MODEL_LEN", "--max-model-len", "max_model_len", None, "vLLM's --max-model-len: a request's prompt "
           "and answer at most (empty: 131072)", commands=("serve-sim",), value_type=int, minimum=1),
    Option("TENSOR_PARALLEL_SIZE", "--tensor-parallel-size", "tensor_parallel_size", 1, "vLLM's -tp: the model split "
           "over N GPUs (weight reads and compute split N ways, N GPUs' memory)", commands=("serve-sim",), minimum=1),
    Option("STREAM_INTERVAL", "--stream-interval", "stream_interval", 1, "vLLM's --stream-interval: tokens per event "
           "after the first (gpt-oss's recipe sets 20)", commands=("serve-sim",), minimum=1),
    Option("DIALECT", "--dialect", "dialect", "vllm", "the engine the built-in target speaks as (llmload/sim/dialects.py): "
           "vllm; sglang (its routes, delta.reasoning_content, its usage, sglang: metrics); trtllm (trtllm-serve's "
           "routes, JSON /metrics, trtllm_ metrics at /prometheus/metrics)", choices=("vllm", "sglang", "trtllm"),
           commands=("serve-sim",)),
    Option("CAPACITY_BY", "--capacity-by", "capacity_by", "users", "what the capacity search varies: USERS (closed loop) "
           "or RATE (open loop)", choices=("users", "rate"), commands=("capacity", "tune")),
    Option("CAPACITY_START", "--capacity-start", "capacity_start", 1.0, "the first USERS (or RATE) tried; the search doubles "
           "it until a step fails", commands=("capacity", "tune"), above=0),
    Option("CAPACITY_MAX", "--capacity-max", "capacity_max", 1024.0, "the largest USERS (or RATE) tried", commands=("capacity", "tune"),
           above=0),
    Option("CAPACITY_STEPS", "--capacity-steps", "capacity_steps", 12, "the search's budget: at most this many steps (each a "
           "run of DURATION, or less when it surely fails)", commands=("capacity", "tune"), minimum=1),
    Option("RESULTS", "--results", "results", "", "calibrate: results folders of runs against a real server (a run, a "
           "sweep or a capacity OUT), vLLM bench --save-result JSON files, or measurement tables (cells JSON), "
           "space-separated", commands=("calibrate",)),
    # issue-32: offline bundles for a host without a registry
    Option("PLATFORM", "--platform", "platform", "manylinux_2_28_x86_64", "the host's platform tag: manylinux_2_Y_<arch> "
           "(glibc 2.Y or newer: ldd --version there), manylinux2014_<arch>, musllinux_1_Y_<arch>, linux_<arch>, "
           "macosx_X_Y_<arch>, win_amd64 (the grammar: llmload/bundle/plan.py)", commands=("bundle",)),
    Option("PYTHON", "--python", "python", "3.12", "the host's Python, MAJOR.MINOR[.PATCH] (python3 --version there)",
           commands=("bundle",)),
    Option("EXTRA", "--extra", "extra", "", "requirement specs bundled beside the suite, space- or comma-separated, e.g. "
           "vllm==0.25.0; one naming a package that others require otherwise wins over them (an override)",
           commands=("bundle",)),
    Option("FREEZE", "--freeze", "freeze", "", "a file of the host's `pip freeze` (name==version, or bare names): what it "
           "lists is left out of the bundle, its versions pinned in the resolution (empty: the host has nothing)",
           commands=("bundle",)),
    Option("PART_MB", "--part-mb", "part_mb", 1024, "the bundle's largest part, in MiB", commands=("bundle",), minimum=1),
    Option("CAPACITY_PRECISION", "--capacity-precision", "capacity_precision", 0.1, "stop once the largest passing and the "
           "smallest failing step are within this fraction of the answer", commands=("capacity", "tune"), minimum=0),
)


def options_for(command: str) -> tuple[Option, ...]:
    """The options ``command`` takes, in table order."""
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}")
    return tuple(o for o in TABLE if command in o.commands)


OPTIONS = options_for("load")
"""A run's options (load and ui take the same)."""
PROMPT_OPTIONS = options_for("prompts")
SWEEP_OPTIONS = options_for("sweep")
CAPACITY_OPTIONS = options_for("capacity")
TUNE_OPTIONS = options_for("tune")
"""Besides every load option (the workload's settings), as capacity takes them."""
SIM_OPTIONS = options_for("serve-sim")
VLLM_CPU_OPTIONS = options_for("vllm-cpu")
CROSSCHECK_OPTIONS = options_for("crosscheck")
CALIBRATE_OPTIONS = options_for("calibrate")
WORKER_OPTIONS = options_for("worker")
MONITOR_OPTIONS = options_for("monitor")
BUNDLE_OPTIONS = options_for("bundle")


def option_by_key(key: str) -> Option:
    """The table's option named ``key`` (ConfigError when there is none)."""
    for option in TABLE:
        if option.key == key:
            return option
    raise ConfigError(f"unknown setting {key}; known settings: {', '.join(o.key for o in TABLE)}")


def config_name(option: Option) -> str:
    """The option's name in summary.json's ``config`` (its dest; Locust's num_users is recorded as users)."""
    return "users" if option.dest == "num_users" else option.dest
