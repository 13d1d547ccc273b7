"""Every run option, defined once: the Makefile's KEY=VALUE, the CLI's flags, Locust's parser and web UI.

``make load GPU=a100 USERS=8`` passes ``GPU=a100 USERS=8`` to ``python -m llmload load``, which
turns each KEY=VALUE into its flag. Options Locust itself owns (host, users, spawn rate, run
time, stop timeout) keep Locust's flags; the rest are added to Locust's parser from this table,
with typed defaults so the web UI can cast what is typed into its form.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from typing import Any, Sequence

import orjson

from llmload.errors import ConfigError

__all__ = [
    "Option", "OPTIONS", "PROMPT_OPTIONS", "SWEEP_OPTIONS", "EFFORTS", "add_suite_options", "settings_to_argv", "parse_settings", "parse_run_args",
    "parse_duration_s", "scaled_duration_s", "validate", "api_key", "extra_body", "run_config",
]

EFFORTS = ("low", "medium", "high", "none")
RUNNER_KEYS = ("HOST", "OUT", "API_KEY", "SPEEDUP")
"""Settings that say where and how a sweep runs, not what a cell measures: given to the sweep, never written in a scenario."""


@dataclass(frozen=True)
class Option:
    """One run option."""

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


OPTIONS: tuple[Option, ...] = (
    Option("HOST", "--host", "host", "", "server root, e.g. http://127.0.0.1:8000; empty starts the built-in target", locust_flag="--host"),
    Option("GPU", "--gpu", "gpu", "h100", "GPU label; without HOST, the GPU the built-in target plays"),
    Option("MODEL", "--model", "model", "", "model to request; empty takes the one the server serves"),
    Option("EFFORT", "--effort", "effort", "medium", "reasoning_effort sent (none leaves it out)", choices=EFFORTS),
    Option("USERS", "--users", "num_users", 1, "concurrent users (streams in flight)", locust_flag="-u"),
    Option("SPAWN_RATE", "--spawn-rate", "spawn_rate", 0.0, "users started per second (0: all at once)", locust_flag="-r"),
    Option("MAX_TOKENS", "--max-tokens", "max_tokens", 0, "max_tokens sent (0 leaves it out)"),
    Option("PROMPTS", "--prompts", "prompts", "builtin", "prompt set: builtin or a path to a prompts JSONL file"),
    Option("ORDER", "--order", "order", "random", "prompt order: a random prompt per request, or the set's order", choices=("random", "sequence")),
    Option("NONCE", "--nonce", "nonce", "off", "a unique number before every prompt, so vLLM's prefix cache cannot help", choices=("off", "on")),
    Option("DURATION", "--run-time", "run_time", "120s", "how long load is sent, e.g. 120s, 2m", locust_flag="-t"),
    Option("REQUESTS", "--requests", "requests", 0, "send this many requests, then stop (USERS is then the maximum concurrency); 0: DURATION decides"),
    Option("WARMUP_REQUESTS", "--warmup-requests", "warmup_requests", 0, "requests sent and finished before the measured ones start (kept in samples, not in the summary)"),
    Option("SPEEDUP", "--speedup", "speedup", 1.0, "the built-in target runs N times faster (without HOST, or a HOST started with --speedup N); DURATION is divided by N"),
    Option("STOP_TIMEOUT", "--stop-timeout", "stop_timeout", 600, "seconds streams in flight may take to finish at the end", locust_flag="-s"),
    Option("CLIENT", "--client", "client", "raw", "streaming client", choices=("raw", "openai")),
    Option("OUT", "--out", "out", "", "the run's folder (default results/<time>-<gpu>-<model>-<effort>-u<users>)"),
    Option("TEMPERATURE", "--temperature", "temperature", 1.0, "sampling temperature sent"),
    Option("EXTRA_BODY", "--extra-body", "extra_body", "", "JSON object merged into every request body"),
    Option("CONTINUOUS_USAGE", "--continuous-usage", "continuous_usage", "auto", "ask for usage on every chunk (auto: when the server is vLLM)", choices=("auto", "on", "off")),
    Option("REQUEST_TIMEOUT", "--request-timeout", "request_timeout", 600.0, "seconds a request may wait for data before it fails"),
    Option("SEED", "--seed", "seed", 0, "seed of the random prompt choice"),
    Option("API_KEY", "--api-key", "api_key", "", "API key (default: $OPENAI_API_KEY)", secret=True),
)

PROMPT_OPTIONS: tuple[Option, ...] = (
    Option("SIZES", "--sizes", "sizes", "2k,4k,8k", "which sets to write (comma-separated: 2k, 4k, 8k)"),
    Option("COUNT", "--count", "count", 5000, "prompts per set"),
    Option("SEED", "--seed", "seed", 0, "seed; a set depends only on it, the templates and the size"),
    Option("TEMPLATES", "--templates", "templates", "templates", "folder of task templates"),
    Option("OUT", "--out", "out", "prompts", "folder the sets are written to"),
    Option("VERIFY", "--verify", "verify", "", "server root whose /tokenize checks a sample of every set"),
    Option("MODEL", "--model", "model", "", "model named in VERIFY's /tokenize requests (empty: the one served)"),
    Option("API_KEY", "--api-key", "api_key", "", "API key for VERIFY (default: $OPENAI_API_KEY)", secret=True),
)


SWEEP_OPTIONS: tuple[Option, ...] = (
    Option("SCENARIO", "--scenario", "scenario", "", "the scenario file, e.g. scenarios/h100-grid.yaml"),
    Option("HOST", "--host", "host", "", "server root; empty runs each cell against the built-in target playing its GPU and MODEL"),
    Option("OUT", "--out", "out", "", "the sweep's folder (default results/<scenario name>); rerunning resumes it"),
    Option("SPEEDUP", "--speedup", "speedup", 1.0, "without HOST: the built-in target runs N times faster, each cell takes DURATION/N"),
    Option("METRICS_INTERVAL", "--metrics-interval", "metrics_interval", 1.0, "seconds between samples of the server's /metrics"),
)


def add_suite_options(parser: Any, *, include_locust: bool = False, web_ui: bool = False,
                      table: Sequence[Option] = OPTIONS) -> None:
    """Add a table's options to an argparse (or Locust's configargparse) parser."""
    for o in table:
        if o.locust_flag and not include_locust:
            continue
        flags = [o.locust_flag, o.flag] if o.locust_flag and o.locust_flag != o.flag else [o.flag]
        kwargs: dict[str, Any] = dict(dest=o.dest, type=type(o.default), default=o.default, help=o.help)
        if o.choices:
            kwargs["choices"] = o.choices
        if web_ui:
            kwargs["include_in_web_ui"] = True
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
                if flags & {o.flag, o.locust_flag}:
                    raise ConfigError(f"{o.key} (--{o.flag.lstrip('-')}): {match.group(2)}")
        raise ConfigError(message)


def parse_settings(settings: Sequence[str], table: Sequence[Option]) -> argparse.Namespace:
    """Parse KEY=VALUE words or flags against one option table."""
    return _OneLineParser(table).parse_args(settings_to_argv(settings, table))


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


def _extra_body(text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"EXTRA_BODY is not JSON ({e}); give an object like '{{\"top_p\": 0.9}}'") from None
    if not isinstance(value, dict):
        raise ConfigError("EXTRA_BODY must be a JSON object like '{\"top_p\": 0.9}'")
    return value


def validate(options: argparse.Namespace) -> None:
    """Raise ConfigError on values the parser's types and choices let through."""
    if options.num_users < 1:
        raise ConfigError(f"USERS={options.num_users} must be at least 1")
    if options.spawn_rate < 0:
        raise ConfigError(f"SPAWN_RATE={options.spawn_rate:g} must not be negative")
    if options.max_tokens < 0:
        raise ConfigError(f"MAX_TOKENS={options.max_tokens} must be 0 (left out) or more")
    if parse_duration_s(options.run_time) <= 0:
        raise ConfigError(f"DURATION={options.run_time} must be longer than 0 s")
    if options.requests < 0 or options.warmup_requests < 0:
        raise ConfigError("REQUESTS and WARMUP_REQUESTS must be 0 or more")
    if not options.speedup > 0:
        raise ConfigError(f"SPEEDUP={options.speedup:g} must be more than 0")
    _extra_body(options.extra_body)


def api_key(options: Any) -> str:
    """The API key option, else $OPENAI_API_KEY."""
    return options.api_key or os.environ.get("OPENAI_API_KEY", "")


def extra_body(options: Any) -> dict[str, Any]:
    return _extra_body(options.extra_body)


def run_config(options: Any) -> dict[str, Any]:
    """The run's options as recorded in summary.json (the API key left out)."""
    config = {o.dest: getattr(options, o.dest, o.default) for o in OPTIONS if not o.secret}
    config["users"] = config.pop("num_users")
    config["duration_s"] = parse_duration_s(str(config["run_time"])) if config["run_time"] else None
    config["extra_body"] = _extra_body(config["extra_body"])
    return config
