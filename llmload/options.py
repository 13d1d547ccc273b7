"""Every setting of every command, defined once in TABLE: the Makefile's KEY=VALUE, the CLI's flags,
Locust's parser and web UI, scenarios, the built-in target and the vLLM CPU launcher.

``make load GPU=a100 USERS=8`` passes ``GPU=a100 USERS=8`` to ``python -m llmload load``, which
turns each KEY=VALUE into its flag. Options Locust itself owns (host, users, spawn rate, run
time, stop timeout) keep Locust's flags; the rest are added to Locust's parser from this table,
with typed defaults so the web UI can cast what is typed into its form. Each option lists the
commands that take it; summary.json's ``config`` records a run's options under ``config_name``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from llmload.errors import ConfigError

__all__ = [
    "Option", "TABLE", "COMMANDS", "OPTIONS", "PROMPT_OPTIONS", "SWEEP_OPTIONS", "CAPACITY_OPTIONS", "SIM_OPTIONS", "VLLM_CPU_OPTIONS", "CROSSCHECK_OPTIONS",
    "WORKER_OPTIONS", "EFFORTS", "ARRIVALS", "RUNNER_KEYS", "options_for", "host_port", "option_by_key", "bare_model_name", "REASONING_EFFORTS", "config_name", "add_suite_options", "settings_to_argv", "parse_settings",
    "parse_run_args", "parse_duration_s", "scaled_duration_s", "effort_shares", "Slo", "SLO_METRICS", "parse_slos", "validate", "api_key", "web_login", "extra_body", "run_config",
    "check_range", "check_ranges", "SUITE_OWNED_FIELDS", "help_lines", "FIXED_IN_WEB_UI_ENV",
]

REASONING_EFFORTS = ("low", "medium", "high")
"""gpt-oss's reasoning_effort values."""
EFFORTS = (*REASONING_EFFORTS, "none")
"""EFFORT's values: none leaves reasoning_effort out of the request."""
ARRIVALS = ("poisson", "constant", "gamma")
"""ARRIVALS's values: how the gaps between RATE's sends are drawn."""
RUNNER_KEYS = ("HOST", "OUT", "API_KEY", "SPEEDUP", "API_KEY_FILE", "WEB_HOST", "WEB_PORT", "WEB_LOGIN")
"""Settings that say where and how a sweep or a run is driven, not what a cell measures: never written in a scenario."""
COMMANDS = ("load", "ui", "prompts", "sweep", "serve-sim", "vllm-cpu", "worker", "capacity", "crosscheck")
"""Every command that takes settings: ``make <command>`` (vllm-cpu: ``make serve-vllm-cpu`` and ``stop-vllm-cpu``;
capacity: also every load option, which its steps run with)."""
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
    Option("GPU", "--gpu", "gpu", "h100", "GPU label; without HOST, the GPU the built-in target plays",
           commands=("load", "ui", "serve-sim")),
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
    Option("DURATION", "--run-time", "run_time", "120s", "how long load is sent, e.g. 120s, 2m", locust_flag="-t"),
    Option("REQUESTS", "--requests", "requests", 0, "send this many requests, then stop (USERS is then the maximum concurrency); 0: DURATION decides "
           "(crosscheck: per tool and repeat, 0 = 100)", minimum=0, commands=_RUN_AND_CROSSCHECK),
    Option("WARMUP_REQUESTS", "--warmup-requests", "warmup_requests", 0, "requests sent and finished before the measured ones start (kept in samples, not in the summary)", minimum=0),
    Option("SPEEDUP", "--speedup", "speedup", 1.0, "the built-in target runs N times faster (without HOST, or a HOST "
           "started with SPEEDUP=N); DURATION is divided by N", commands=("load", "ui", "sweep", "serve-sim"), above=0),
    Option("STOP_TIMEOUT", "--stop-timeout", "stop_timeout", 600, "seconds streams in flight may take to finish at the end", locust_flag="-s", minimum=0),
    Option("CLIENT", "--client", "client", "raw", "streaming client", choices=("raw", "openai")),
    Option("OUT", "--out", "out", "", "where results go: a run's folder (default results/<time>-<gpu>-<model>-<effort>-u<users>); "
           "a sweep's (default results/<scenario name>; rerunning resumes it); prompts: the sets' folder (default prompts); "
           "crosscheck: its folder (default results/crosscheck-<model>)", commands=("load", "ui", "sweep", "prompts", "crosscheck")),
    Option("TEMPERATURE", "--temperature", "temperature", 1.0, "sampling temperature sent", minimum=0,
           commands=_RUN_AND_CROSSCHECK),
    Option("EXTRA_BODY", "--extra-body", "extra_body", "", "JSON object merged into every request body"),
    Option("CONTINUOUS_USAGE", "--continuous-usage", "continuous_usage", "auto", "ask for usage on every chunk (auto: when the server is vLLM)", choices=("auto", "on", "off")),
    Option("REQUEST_TIMEOUT", "--request-timeout", "request_timeout", 600.0, "seconds a request may wait for data before it fails", above=0),
    Option("SEED", "--seed", "seed", 0, "seed: of each user's random prompt choice; prompts: a set depends only on it, "
           "the templates and the size; serve-sim: of output lengths and faults; crosscheck: repeat i uses SEED + i",
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
    Option("SCENARIO", "--scenario", "scenario", "", "the scenario file, e.g. scenarios/h100-grid.yaml", commands=("sweep",)),
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
    # crash safety
    Option("FLUSH_INTERVAL", "--flush-interval", "flush_interval", 1.0, "seconds between appends of records to samples.jsonl: at most what a kill -9 loses"),
    # failure pacing, and faults the built-in target injects
    Option("FAILURE_BACKOFF", "--failure-backoff", "failure_backoff", 0.1, "seconds a user waits after a failed request, "
           "doubled after each failure in a row up to FAILURE_BACKOFF_MAX, none after a success (0: no wait)", minimum=0),
    Option("FAILURE_BACKOFF_MAX", "--failure-backoff-max", "failure_backoff_max", 5.0, "the longest wait after failures in a row, in seconds",
           minimum=0),
    Option("MAX_FAIL_RATIO", "--max-fail-ratio", "max_fail_ratio", 0.5, "stop the run once more than this share of its requests "
           "failed, judged from the 10th on (exit code 3; 0: never stop)", minimum=0, maximum=1),
    Option("FAULT", "--fault", "fault", None, "a fault injected into chat requests: no-done, bad-json, error-object, slow-headers, "
           "or http-<code> (that status, with a request id in its message)", commands=("serve-sim",), value_type=str),
    Option("FAULT_RATE", "--fault-rate", "fault_rate", 1.0, "fraction of chat requests FAULT hits", commands=("serve-sim",),
           minimum=0, maximum=1),
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
    Option("ITL_PER_SEQ_MS", "--itl-per-seq-ms", "itl_per_seq_ms", None, "the inter-token gap grows by this per running "
           "sequence (also on top of FIXED_ITL_MS): a known capacity, for tests", commands=("serve-sim",), value_type=float,
           minimum=0),
    Option("CAPACITY_BY", "--capacity-by", "capacity_by", "users", "what the capacity search varies: USERS (closed loop) "
           "or RATE (open loop)", choices=("users", "rate"), commands=("capacity",)),
    Option("CAPACITY_START", "--capacity-start", "capacity_start", 1.0, "the first USERS (or RATE) tried; the search doubles "
           "it until a step fails", commands=("capacity",), above=0),
    Option("CAPACITY_MAX", "--capacity-max", "capacity_max", 1024.0, "the largest USERS (or RATE) tried", commands=("capacity",),
           above=0),
    Option("CAPACITY_STEPS", "--capacity-steps", "capacity_steps", 12, "the search's budget: at most this many steps (each a "
           "run of DURATION, or less when it surely fails)", commands=("capacity",), minimum=1),
    Option("CAPACITY_PRECISION", "--capacity-precision", "capacity_precision", 0.1, "stop once the largest passing and the "
           "smallest failing step are within this fraction of the answer", commands=("capacity",), minimum=0),
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
SIM_OPTIONS = options_for("serve-sim")
VLLM_CPU_OPTIONS = options_for("vllm-cpu")
CROSSCHECK_OPTIONS = options_for("crosscheck")
WORKER_OPTIONS = options_for("worker")


def bare_model_name(model: str) -> str:
    """A model id without its organisation: ``openai/gpt-oss-120b`` -> ``gpt-oss-120b`` (MODEL matches either)."""
    return model.rsplit("/", 1)[-1]


def option_by_key(key: str) -> Option:
    """The table's option named ``key`` (ConfigError when there is none)."""
    for option in TABLE:
        if option.key == key:
            return option
    raise ConfigError(f"unknown setting {key}; known settings: {', '.join(o.key for o in TABLE)}")


def config_name(option: Option) -> str:
    """The option's name in summary.json's ``config`` (its dest; Locust's num_users is recorded as users)."""
    return "users" if option.dest == "num_users" else option.dest


FIXED_IN_WEB_UI_ENV = "LLMLOAD_FIXED_IN_WEB_UI"
"""Comma-separated keys the web UI's form must not offer: the built-in target `make ui` started cannot change them."""


def add_suite_options(parser: Any, *, include_locust: bool = False, web_ui: bool = False,
                      table: Sequence[Option] = OPTIONS) -> None:
    """Add a table's options to an argparse (or Locust's configargparse) parser."""
    fixed = set(os.environ.get(FIXED_IN_WEB_UI_ENV, "").split(","))
    for o in sorted(table, key=lambda o: o.secret) if web_ui else table:  # the web UI's form lists secrets last
        if (o.locust_flag and not include_locust) or (web_ui and not o.to_locust):
            continue
        flags = [o.locust_flag, o.flag] if o.locust_flag and o.locust_flag != o.flag else [o.flag]
        kwargs: dict[str, Any] = dict(dest=o.dest, type=_checked_type(o), default=o.default, help=o.help)
        if o.choices:
            kwargs["choices"] = o.choices
        if web_ui:
            kwargs["include_in_web_ui"] = o.key not in fixed
            if o.secret:
                kwargs["is_secret"] = True
        parser.add_argument(*flags, **kwargs)


def settings_to_argv(settings: Sequence[str], table: Sequence[Option] = OPTIONS) -> list[str]:
    """Turn ``KEY=VALUE`` words (as the Makefile passes them) into flags; flags pass through."""
    by_key = {o.key: o for o in table}
    argv: list[str] = []
    for word in settings:
        key, sep, value = word.partition("=")
        if sep and not word.startswith("-") and re.fullmatch(r"[A-Z][A-Z0-9_]*", key):
            option = by_key.get(key)
            if option is None:
                raise ConfigError(f"unknown setting {key}; known settings: {', '.join(by_key)}")
            argv.append(f"{option.flag}={value}")
        else:
            argv.append(word)
    return argv


def check_range(o: Option, value: Any) -> None:
    """ConfigError unless a numeric option's value is a finite number inside the option's range."""
    kind = o.value_type or type(o.default)
    if value is None or kind is bool or kind not in (int, float):
        return
    inside = (math.isfinite(value) and (o.minimum is None or value >= o.minimum)
              and (o.above is None or value > o.above) and (o.maximum is None or value <= o.maximum))
    if not inside:
        rules = [f"{word} {limit:g}" for word, limit in (("at least", o.minimum), ("more than", o.above), ("at most", o.maximum))
                 if limit is not None]
        default = "" if o.default is None else f" (the default is {o.key}={o.default})"
        raise ConfigError(f"{o.key}={value:g} is out of range: it must be a finite number{' ' if rules else ''}{' and '.join(rules)}{default}")


def check_ranges(options: Any, table: Sequence[Option] = OPTIONS) -> None:
    """check_range for every option of ``table`` in ``options`` (values from Locust's web UI form never met the parser)."""
    for o in table:
        if hasattr(options, o.dest):
            check_range(o, getattr(options, o.dest))


def _checked_type(o: Option) -> Callable[[str], Any]:
    """The option's type for argparse: cast by its type, then range-checked."""
    cast = o.value_type or type(o.default)

    def convert(text: str) -> Any:
        value = cast(text)
        try:
            check_range(o, value)
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return value

    convert.__name__ = cast.__name__  # argparse names the type in "invalid int value: 'x'"
    return convert


class _OneLineParser(argparse.ArgumentParser):
    def __init__(self, table: Sequence[Option]) -> None:
        super().__init__(prog="llmload", add_help=False)
        self.table = table
        add_suite_options(self, include_locust=True, table=table)

    def error(self, message: str) -> None:  # argparse would print usage and exit; we want one line
        match = re.match(r"argument ([^:]+): (.*)", message)
        if match:
            flags = set(match.group(1).split("/"))
            for o in self.table:
                if match.group(2).startswith(f"{o.key}="):
                    raise ConfigError(match.group(2))  # check_range's own line
                if flags & {o.flag, o.locust_flag}:
                    raise ConfigError(f"{o.key} (--{o.flag.lstrip('-')}): {match.group(2)}")
        raise ConfigError(message)


def parse_settings(settings: Sequence[str], table: Sequence[Option]) -> argparse.Namespace:
    """Parse KEY=VALUE words or flags against one option table; a secret given there is refused."""
    namespace = _OneLineParser(table).parse_args(settings_to_argv(settings, table))
    for o in table:
        if o.secret and getattr(namespace, o.dest):
            raise ConfigError(f"{o.key} on a command line is visible to every user in ps; export it as {o.key} in the "
                              f"environment instead (make passes {o.key}=... on to the environment, not to the command line)"
                              + (" or give API_KEY_FILE=path" if o.key == "API_KEY" else ""))
    return namespace


def parse_run_args(settings: Sequence[str]) -> argparse.Namespace:
    """Parse and validate a run's settings (KEY=VALUE words or flags)."""
    namespace = parse_settings(settings, OPTIONS)
    validate(namespace)
    return namespace


_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s?)?")


def parse_duration_s(text: str) -> float:
    """Seconds in a Locust-style time span: ``120``, ``120s``, ``2m``, ``1h30m``."""
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or not match:
        raise ConfigError(f"DURATION={text!r} is not a time span; use e.g. 120s, 2m or 1h30m")
    hours, minutes, seconds = match.groups()
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)


def scaled_duration_s(options: Any) -> float:
    """DURATION in seconds, divided by SPEEDUP: the built-in target then runs that much faster."""
    return parse_duration_s(options.run_time) / options.speedup


SUITE_OWNED_FIELDS = {
    "model": "set MODEL= instead", "messages": "choose prompts with PROMPTS= instead",
    "stream": "the suite always streams", "stream_options": "set CONTINUOUS_USAGE= instead",
    "n": "one choice per request is measured", "max_tokens": "set MAX_TOKENS= instead",
    "max_completion_tokens": "set MAX_TOKENS= instead", "temperature": "set TEMPERATURE= instead",
    "reasoning_effort": "set EFFORT= instead",
}
"""Request fields the suite sets and measures by; EXTRA_BODY may not change them (the hint says what to do)."""


def effort_shares(text: str) -> dict[str, float]:
    """EFFORT as {effort: share of requests}: ``high`` is {"high": 1.0}; ``mix:low=3,high=1`` {"low": 0.75, "high": 0.25}."""
    if not text.startswith("mix:"):
        if text not in EFFORTS:
            raise ConfigError(f"EFFORT={text!r} is not one of {', '.join(EFFORTS)}, nor a mix like mix:low=70,medium=25,high=5")
        return {text: 1.0}
    weights: dict[str, float] = {}
    for part in text[len("mix:"):].split(","):
        name, _, weight = part.partition("=")
        name = name.strip()
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if name not in EFFORTS or name in weights or not 0 <= value < float("inf"):
            raise ConfigError(f"EFFORT={text!r}: {part.strip()!r} is not effort=weight with an effort of "
                              f"{', '.join(EFFORTS)} named once and a weight of 0 or more; e.g. mix:low=70,medium=25,high=5")
        weights[name] = value
    total = sum(weights.values())
    if not total > 0:
        raise ConfigError(f"EFFORT={text!r}: the weights add up to 0; give at least one a positive weight")
    return {name: weight / total for name, weight in weights.items()}


SLO_METRICS = {"ttft": "ttft_ms", "ttfvt": "ttfvt_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2e": "response_time_ms"}
"""SLO metric names and the summary.json distribution each one reads."""
SLO_STATS = ("mean", "median", "p50", "p90", "p99")
_SLO = re.compile(r"([a-z0-9]+)_([a-z0-9]+)<=(\d+(?:\.\d*)?|\.\d+)([a-z]*)")
_SLO_UNITS_S = {"ms": 0.001, "s": 1.0}


@dataclass(frozen=True)
class Slo:
    """One objective, ``<metric>_<stat><=<limit><unit>``: e.g. ttft_p90<=2s (the p90 of TTFT at most 2 s)."""

    text: str
    metric: str
    """A key of SLO_METRICS: ttft, ttfvt, tpot, itl, e2e."""
    stat: str
    """mean, median, p90 or p99 (p50 is read as median)."""
    limit_s: float

    @property
    def quantile(self) -> float | None:
        """The stat as a quantile (median 0.5, p90 0.9, p99 0.99); None for the mean."""
        return None if self.stat == "mean" else 0.5 if self.stat == "median" else int(self.stat[1:]) / 100


def parse_slos(text: str, speedup: float = 1.0) -> tuple[Slo, ...]:
    """SLO's comma-separated objectives; ConfigError naming the bad one and the form it must take.

    ``speedup``: the target runs that many times faster (a rehearsal), so each time limit shrinks as much: the SLO
    keeps speaking of the GPU the target plays, as RATE and DURATION do.
    """
    if not text.strip():
        return ()
    slos: list[Slo] = []
    for part in (p.replace(" ", "") for p in text.split(",")):
        match = _SLO.fullmatch(part)
        if not match:
            raise ConfigError(f"SLO={text!r}: {part!r} is not <metric>_<stat><=<number><unit>; give e.g. ttft_p90<=2s,tpot_p90<=50ms")
        metric, stat, number, unit = match.groups()
        if metric not in SLO_METRICS:
            raise ConfigError(f"SLO={text!r}: {part!r} names no known metric; use one of {', '.join(SLO_METRICS)}")
        if stat not in SLO_STATS:
            raise ConfigError(f"SLO={text!r}: {part!r} names no known statistic; use one of {', '.join(SLO_STATS)}")
        if unit not in _SLO_UNITS_S:
            raise ConfigError(f"SLO={text!r}: {part!r} needs a unit, ms or s: {metric}_{stat}<={number}s or {metric}_{stat}<={number}ms")
        stat = "median" if stat == "p50" else stat
        if any(s.metric == metric and s.stat == stat for s in slos):
            raise ConfigError(f"SLO={text!r}: {metric}_{stat} is given twice; keep one limit")
        slos.append(Slo(part, metric, stat, float(number) * _SLO_UNITS_S[unit] / speedup))
    return tuple(slos)


def _extra_body(text: str) -> dict[str, Any]:
    if not text:
        return {}
    import orjson  # lazy: `make help` reads this table with the system's python3

    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"EXTRA_BODY is not JSON ({e}); give an object like '{{\"top_p\": 0.9}}'") from None
    if not isinstance(value, dict):
        raise ConfigError("EXTRA_BODY must be a JSON object like '{\"top_p\": 0.9}'")
    owned = [key for key in value if key in SUITE_OWNED_FIELDS]
    if owned:
        raise ConfigError(f"EXTRA_BODY sets {owned[0]!r}, which the suite sets itself: remove it ({SUITE_OWNED_FIELDS[owned[0]]})")
    return value


def validate(options: argparse.Namespace) -> None:
    """Raise ConfigError on values the parser lets through."""
    check_ranges(options)
    if parse_duration_s(options.run_time) <= 0:
        raise ConfigError(f"DURATION={options.run_time} must be longer than 0 s")
    if options.failure_backoff_max < options.failure_backoff:
        raise ConfigError(f"FAILURE_BACKOFF_MAX={options.failure_backoff_max:g} is below FAILURE_BACKOFF={options.failure_backoff:g}; "
                          "raise FAILURE_BACKOFF_MAX or lower FAILURE_BACKOFF")
    if web_login() is None and options.web_host != "127.0.0.1":
        raise ConfigError(f"WEB_HOST={options.web_host} lets other machines drive the web UI; set WEB_LOGIN=user:password too")
    if not 0 < options.flush_interval <= 60:
        raise ConfigError(f"FLUSH_INTERVAL={options.flush_interval:g} must be more than 0 and at most 60 (seconds)")
    if options.workers and options.expect_remote_workers:
        raise ConfigError("WORKERS and EXPECT_WORKERS: give one (start local workers with make worker WORKERS=N)")
    host_port(options.master_bind, "MASTER_BIND")
    _extra_body(options.extra_body)
    effort_shares(options.effort)
    parse_slos(options.slo)
    _validate_open_loop(options)
    if options.early_stop == "on" and not options.slo:
        raise ConfigError("EARLY_STOP=on needs SLO: it ends the run once an SLO's failure is certain")


def _validate_open_loop(options: argparse.Namespace) -> None:
    if options.burstiness != 1.0 and options.arrivals != "gamma":
        raise ConfigError(f"BURSTINESS applies to ARRIVALS=gamma only; with ARRIVALS={options.arrivals} leave it out")
    if options.rate and options.num_users != 1:
        raise ConfigError(f"USERS={options.num_users} with RATE: requests are sent on RATE's schedule, not by users; "
                          "leave USERS out and cap requests in flight with MAX_CONCURRENCY")
    workers = getattr(options, "workers", 0) or getattr(options, "expect_remote_workers", 0)
    if options.rate and options.max_concurrency and options.max_concurrency < workers:
        raise ConfigError(f"MAX_CONCURRENCY={options.max_concurrency} is split over {workers} workers, so each needs one: "
                          f"give MAX_CONCURRENCY={workers} or more, or fewer workers")
    if options.max_concurrency and not options.rate:
        raise ConfigError("MAX_CONCURRENCY applies with RATE; without RATE, USERS is the number of requests in flight")


def host_port(text: str, key: str) -> tuple[str, int]:
    """``address:port`` split, or ConfigError naming the setting."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{key}={text!r} is not address:port; use e.g. 10.0.0.5:5557")
    return host.strip("[]"), int(port)


def api_key(options: Any) -> str:
    """The API key: API_KEY_FILE's first line, else $API_KEY, else $OPENAI_API_KEY; empty when none."""
    path = getattr(options, "api_key_file", "")
    if not path:
        return os.environ.get("API_KEY") or os.environ.get("OPENAI_API_KEY", "")
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"API_KEY_FILE={path} cannot be read ({getattr(e, 'strerror', None) or e}); give a file holding the key") from None
    key = lines[0].strip() if lines else ""
    if not key:
        raise ConfigError(f"API_KEY_FILE={path} is empty; its first line must be the key")
    return key


def web_login() -> tuple[str, str] | None:
    """(user, password) from $WEB_LOGIN (``user:password``), or None when it is not set."""
    text = os.environ.get("WEB_LOGIN", "")
    if not text:
        return None
    user, sep, password = text.partition(":")
    if not (sep and user and password):
        raise ConfigError("WEB_LOGIN must be user:password, both non-empty")
    return user, password


def extra_body(options: Any) -> dict[str, Any]:
    return _extra_body(options.extra_body)


def run_config(options: Any) -> dict[str, Any]:
    """The run's options as recorded in summary.json (the API key left out)."""
    config = {config_name(o): getattr(options, o.dest, o.default) for o in OPTIONS if not o.secret and o.to_locust}
    config["duration_s"] = parse_duration_s(str(config["run_time"])) if config["run_time"] else None
    config["extra_body"] = _extra_body(config["extra_body"])
    return config


def _default_text(o: Option) -> str:
    if o.secret:
        return "(from the environment)"
    return "(off)" if o.default is None else repr(o.default) if o.default == "" else str(o.default)


_MAKE_TARGETS = {"vllm-cpu": "serve-vllm-cpu, stop-vllm-cpu"}


def help_lines(commands: Sequence[str] = COMMANDS) -> list[str]:
    """Every setting of the table, per command: ``KEY=default  help [choices]`` (``make help``, ``--help``)."""
    lines = []
    for command in commands:
        table = options_for(command)
        lines.append(f"Settings of make {_MAKE_TARGETS.get(command, command)} (KEY=VALUE):")
        width = max(len(f"{o.key}={_default_text(o)}") for o in table)
        for o in table:
            choices = f" [{'|'.join(o.choices)}]" if o.choices else ""
            lines.append(f"  {o.key}={_default_text(o):<{width - len(o.key) - 1}}  {o.help}{choices}")
    return lines
