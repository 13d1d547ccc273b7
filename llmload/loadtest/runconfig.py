"""A run's options as one typed, immutable RunConfig, checked once where it is built.

``python -m llmload load`` and ``ui`` build a LaunchConfig from their KEY=VALUE settings (parse_run_args: every
grammar and every rule between options, before anything starts); each test builds a RunConfig from Locust's
parsed_options at test_start, where the web UI's form may have changed values (their ranges are checked again;
the effort mix, SLOs and EXTRA_BODY are parsed where they are used). The fields are the option table's dests;
tests/test_options.py keeps them and their types equal to the table's.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, fields
from typing import Any, Self, Sequence

import orjson

from llmload.errors import ConfigError
from llmload.loadtest.rules import check_rules
from llmload.loadtest.turns import TurnPlan
from llmload.options import OPTIONS, config_name
from llmload.promptsets.tools import load_tools, tool_names, tool_results
from llmload.results.cost import usd_per_gpu_hour
from llmload.results.efforts import effort_shares
from llmload.results.slo import parse_slos
from llmload.results.structured import parse_response_format
from llmload.settings import check_ranges, host_port, parse_duration_s, parse_settings

__all__ = ["RunConfig", "LaunchConfig", "launched_config", "RECORDED_OPTIONS", "LAUNCH_OPTIONS", "SUITE_OWNED_FIELDS", "parse_extra_body",
           "parse_run_args", "parse_values"]

RECORDED_OPTIONS = tuple(o for o in OPTIONS if o.to_locust and not o.secret)
"""A test's options: Locust gets them, and config.json records them (a RunConfig's fields)."""
LAUNCH_OPTIONS = tuple(o for o in OPTIONS if not o.to_locust and not o.secret)
"""How the CLI launches Locust (a LaunchConfig's own fields); no test sees them."""
_DEFAULTS = {o.dest: o.default for o in OPTIONS}


@dataclass(frozen=True)
class RunConfig:
    """A test's options (options.py's table says what each means), named by their dests.

    Locust's own options are as Locust parsed them: ``run_time`` in whole seconds, None when REQUESTS ends the
    test; text like ``120s`` in the CLI's LaunchConfig.
    """

    host: str
    gpu: str
    target_profile: str
    price: str
    gpus: int
    model: str
    effort: str
    num_users: int
    spawn_rate: float
    max_tokens: int
    prompts: str
    order: str
    nonce: str
    cache: str
    prompt_start: int
    cache_reset: str
    run_time: str | int | None
    requests: int
    warmup_requests: int
    speedup: float
    stop_timeout: int
    client: str
    api: str
    response_format: str
    out: str
    temperature: float
    extra_body: str
    continuous_usage: str
    request_timeout: float
    seed: int
    metrics_port: int
    metrics_host: str
    flush_interval: float
    failure_backoff: float
    failure_backoff_max: float
    max_fail_ratio: float
    slo: str
    rate: float
    arrivals: str
    burstiness: float
    max_concurrency: int
    early_stop: str
    turns: str
    think_time: str
    prefix_tokens: int
    prefix_groups: int
    trace: str
    trace_speed: float
    trace_limit: int
    tools: str
    tool_choice: str
    tool_rounds: int
    tool_result_tokens: int

    @classmethod
    def of(cls, options: argparse.Namespace) -> Self:
        """The config in ``options`` (the CLI's parsed settings, or Locust's parsed_options), each range checked; the
        rules between settings are ``checked``'s."""
        check_ranges(options)  # values typed into the web UI's form have not met the parser's checks

        def value(name: str) -> Any:
            given = getattr(options, name)
            # A worker's Locust leaves its own options unset (the master holds them): the table's defaults stand in,
            # but for DURATION, whose absence means REQUESTS ends the test.
            return _DEFAULTS[name] if given is None and name != "run_time" else given

        return cls(**{f.name: value(f.name) for f in fields(cls)})

    @property
    def duration_s(self) -> float | None:
        """DURATION in seconds; None without one (REQUESTS ends the test)."""
        return parse_duration_s(str(self.run_time)) if self.run_time else None

    @property
    def ends_with_last_request(self) -> bool:
        """Whether the test ends when its last request does (REQUESTS, or every row of TRACE), not at DURATION."""
        return bool(self.requests or self.trace)

    @property
    def open_loop(self) -> bool:
        """Whether requests are sent on a schedule (RATE or TRACE), one dispatching user per process, not by USERS."""
        return bool(self.rate or self.trace)

    def check_values(self) -> None:
        """ConfigError (one line) for a value its own grammar refuses (a range is the parser's and ``of``'s)."""
        if self.run_time is not None and parse_duration_s(str(self.run_time)) <= 0:
            raise ConfigError(f"DURATION={self.run_time} must be longer than 0 s")
        if not 0 < self.flush_interval <= 60:
            raise ConfigError(f"FLUSH_INTERVAL={self.flush_interval:g} must be more than 0 and at most 60 (seconds)")
        parse_extra_body(self.extra_body)
        usd_per_gpu_hour(self.price)
        effort_shares(self.effort)
        parse_slos(self.slo)
        parse_response_format(self.response_format)
        TurnPlan.of(self.turns, self.think_time)

    def checked(self) -> Self:
        """This config with its values and the rules between settings (rules.py) checked: what a test started from
        Locust's own parser or web UI form has not met (ConfigError, one line)."""
        self.check_values()
        check_rules(self)
        return self

    def record(self) -> dict[str, Any]:
        """The options as config.json and summary.json's ``config`` record them, with DURATION in seconds."""
        config = {config_name(o): getattr(self, o.dest) for o in RECORDED_OPTIONS}
        config["duration_s"] = self.duration_s
        config["extra_body"] = parse_extra_body(self.extra_body)
        return config


@dataclass(frozen=True)
class LaunchConfig(RunConfig):
    """A RunConfig and how ``python -m llmload load`` or ``ui`` launches Locust with it: worker processes, the web
    UI's address, Locust's console and files, the key file (the WEB_LOGIN secret stays in the environment)."""

    api_key_file: str
    web_host: str
    web_port: int
    workers: int
    expect_remote_workers: int
    master_bind: str
    locust_table: str
    locust_history: str


def launched_config(config: RunConfig, processes: int) -> RunConfig:
    """A Locust test's options as its settings gave them: under RATE or TRACE the launcher runs one dispatching user
    per process, so Locust's user count is the number of processes, which the settings' USERS (1) stands for."""
    if config.open_loop and config.num_users == max(1, processes):
        return dataclasses.replace(config, num_users=1)
    return config


SUITE_OWNED_FIELDS = {
    "model": "set MODEL= instead", "messages": "choose prompts with PROMPTS= instead",
    "stream": "the suite always streams", "stream_options": "set CONTINUOUS_USAGE= instead",
    "n": "one choice per request is measured", "max_tokens": "set MAX_TOKENS= instead",
    "max_completion_tokens": "set MAX_TOKENS= instead", "temperature": "set TEMPERATURE= instead",
    "reasoning_effort": "set EFFORT= instead", "input": "choose prompts with PROMPTS= instead",
    "max_output_tokens": "set MAX_TOKENS= instead", "reasoning": "set EFFORT= instead",
    "tools": "set TOOLS= instead", "tool_choice": "set TOOL_CHOICE= instead",
    "response_format": "set RESPONSE_FORMAT= instead",
}
"""Request fields the suite sets and measures by; EXTRA_BODY may not change them (the hint says what to do)."""


def parse_extra_body(text: str) -> dict[str, Any]:
    """EXTRA_BODY as the fields merged into every request body; ConfigError for JSON that is not an object, or that
    sets a field the suite owns."""
    if not text:
        return {}
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


def parse_run_args(settings: Sequence[str]) -> LaunchConfig:
    """A run's settings (KEY=VALUE words or flags), parsed and checked whole (each value, then the rules between
    them: rules.py): ConfigError names the first wrong one."""
    config = parse_values(settings)
    check_rules(config)
    _check_tools(config)
    return config


def parse_values(settings: Sequence[str]) -> LaunchConfig:
    """The settings parsed, each value checked against its own grammar but not yet against the others (a scenario
    checks one setting of its grid at a time, then each cell whole)."""
    config = LaunchConfig.of(parse_settings(settings, OPTIONS))
    config.check_values()
    host_port(config.master_bind, "MASTER_BIND")
    return config


def _check_tools(config: LaunchConfig) -> None:
    """TOOLS's file is a list of function tools, and with TOOL_ROUNDS its results fit TOOL_RESULT_TOKENS."""
    if not config.tools:
        return
    tools = load_tools(config.tools)
    if config.tool_rounds > 1:
        tool_results(tuple(sorted(tool_names(tools))), config.tool_result_tokens, config.seed)
