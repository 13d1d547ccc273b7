"""A run's options as one typed, immutable RunConfig, checked once where it is built.

``python -m llmload load`` and ``ui`` build a LaunchConfig from their KEY=VALUE settings (parse_run_args: every
grammar and every rule between options, before anything starts); each test builds a RunConfig from Locust's
parsed_options at test_start, where the web UI's form may have changed values (their ranges are checked again;
the effort mix, SLOs and EXTRA_BODY are parsed where they are used). The fields are the option table's dests;
tests/test_options.py keeps them and their types equal to the table's.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any, Self, Sequence

import orjson

from llmload.credentials import check_metrics_host, web_login
from llmload.errors import ConfigError
from llmload.loadtest.turns import TurnPlan
from llmload.options import OPTIONS, config_name
from llmload.promptsets.tools import load_tools, tool_names, tool_results
from llmload.results.cost import usd_per_gpu_hour
from llmload.results.efforts import effort_shares
from llmload.results.slo import parse_slos
from llmload.results.structured import parse_response_format
from llmload.settings import check_ranges, host_port, parse_duration_s, parse_settings

__all__ = ["RunConfig", "LaunchConfig", "RECORDED_OPTIONS", "LAUNCH_OPTIONS", "SUITE_OWNED_FIELDS", "parse_extra_body",
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
        """The config in ``options`` (the CLI's parsed settings, or Locust's parsed_options), each range checked."""
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
    """A run's settings (KEY=VALUE words or flags), parsed and checked whole: ConfigError names the first wrong one."""
    config = parse_values(settings)
    _check_rules(config)
    return config


def parse_values(settings: Sequence[str]) -> LaunchConfig:
    """The settings parsed, each value checked against its own grammar but not yet against the others (a scenario
    checks one setting of its grid at a time, then each cell whole)."""
    config = LaunchConfig.of(parse_settings(settings, OPTIONS))
    if parse_duration_s(str(config.run_time)) <= 0:
        raise ConfigError(f"DURATION={config.run_time} must be longer than 0 s")
    if not 0 < config.flush_interval <= 60:
        raise ConfigError(f"FLUSH_INTERVAL={config.flush_interval:g} must be more than 0 and at most 60 (seconds)")
    host_port(config.master_bind, "MASTER_BIND")
    parse_extra_body(config.extra_body)
    usd_per_gpu_hour(config.price)
    effort_shares(config.effort)
    parse_slos(config.slo)
    parse_response_format(config.response_format)
    TurnPlan.of(config.turns, config.think_time)
    return config


def _check_rules(config: LaunchConfig) -> None:
    """Raise ConfigError where options that are each well formed do not go together."""
    if config.failure_backoff_max < config.failure_backoff:
        raise ConfigError(f"FAILURE_BACKOFF_MAX={config.failure_backoff_max:g} is below FAILURE_BACKOFF={config.failure_backoff:g}; "
                          "raise FAILURE_BACKOFF_MAX or lower FAILURE_BACKOFF")
    if web_login() is None and config.web_host != "127.0.0.1":
        raise ConfigError(f"WEB_HOST={config.web_host} lets other machines drive the web UI; set WEB_LOGIN=user:password too")
    if config.workers and config.expect_remote_workers:
        raise ConfigError("WORKERS and EXPECT_WORKERS: give one (start local workers with make worker WORKERS=N)")
    check_metrics_host(config.metrics_host, config.metrics_port)
    _check_open_loop(config)
    if config.early_stop == "on" and not config.slo:
        raise ConfigError("EARLY_STOP=on needs SLO: it ends the run once an SLO's failure is certain")
    _check_workload(config)


def _check_workload(config: LaunchConfig) -> None:
    """What TURNS, THINK_TIME, the shared prefixes and TRACE each need of the others."""
    plan = TurnPlan.of(config.turns, config.think_time)
    if plan.think_s and not plan.conversations:
        raise ConfigError(f"THINK_TIME={config.think_time} is the wait between turns of a conversation; give TURNS above 1 "
                          "too, or leave THINK_TIME out")
    if config.trace:
        _check_trace(config, plan)
    elif config.trace_speed != 1.0 or config.trace_limit:
        raise ConfigError(f"{'TRACE_SPEED' if config.trace_speed != 1.0 else 'TRACE_LIMIT'} applies with TRACE; give TRACE=path "
                          "too, or leave it out")
    _check_tools(config)
    if config.prefix_groups != 1 and not config.prefix_tokens:
        raise ConfigError(f"PREFIX_GROUPS={config.prefix_groups} needs PREFIX_TOKENS: give the prefixes' length, e.g. "
                          "PREFIX_TOKENS=1000")


def _check_tools(config: LaunchConfig) -> None:
    """The tools file is a list of function tools; TOOL_CHOICE and TOOL_ROUNDS need one; results fit their length."""
    if not config.tools:
        for key, given in (("TOOL_ROUNDS", config.tool_rounds != 1), ("TOOL_CHOICE", config.tool_choice != "auto")):
            if given:
                raise ConfigError(f"{key} applies with TOOLS: give TOOLS=path to a JSON list of function tools "
                                  f"(e.g. tools/example.json), or leave {key} out")
        return
    tools = load_tools(config.tools)
    if config.tool_rounds > 1:
        tool_results(tuple(sorted(tool_names(tools))), config.tool_result_tokens, config.seed)


def _check_open_loop(config: LaunchConfig) -> None:
    if config.burstiness != 1.0 and config.arrivals != "gamma":
        raise ConfigError(f"BURSTINESS applies to ARRIVALS=gamma only; with ARRIVALS={config.arrivals} leave it out")
    if config.rate and config.num_users != 1:
        raise ConfigError(f"USERS={config.num_users} with RATE: requests are sent on RATE's schedule, not by users; "
                          "leave USERS out and cap requests in flight with MAX_CONCURRENCY")
    workers = config.workers or config.expect_remote_workers
    if config.open_loop and config.max_concurrency and config.max_concurrency < workers:
        raise ConfigError(f"MAX_CONCURRENCY={config.max_concurrency} is split over {workers} workers, so each needs one: "
                          f"give MAX_CONCURRENCY={workers} or more, or fewer workers")
    if config.max_concurrency and not config.open_loop:
        raise ConfigError("MAX_CONCURRENCY applies with RATE or TRACE; without them, USERS is the number of requests in flight")


def _check_trace(config: LaunchConfig, plan: TurnPlan) -> None:
    """A trace decides when each request goes, what it sends and how many there are: the settings that would too
    are refused."""
    conflicts = {"RATE": config.rate != 0, "USERS": config.num_users != 1, "REQUESTS": config.requests != 0,
                 "TURNS": plan.conversations, "PREFIX_TOKENS": config.prefix_tokens != 0,
                 "TOOL_ROUNDS": config.tool_rounds != 1}
    fixes = {"RATE": "the trace's times are the schedule; speed them up with TRACE_SPEED",
             "USERS": "requests are sent at the trace's times, not by users; cap those in flight with MAX_CONCURRENCY",
             "REQUESTS": "every row is a request; replay fewer with TRACE_LIMIT",
             "TURNS": "each row is one request", "PREFIX_TOKENS": "the trace's hash_ids say which prompts share blocks",
             "TOOL_ROUNDS": "each row is one request"}
    for key, conflicting in conflicts.items():
        if conflicting:
            raise ConfigError(f"{key} with TRACE: {fixes[key]}; leave {key} out")
