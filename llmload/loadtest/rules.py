"""The rules between a run's settings, written once as a table: each rule, the settings it relates, its message, and
an example of settings that break it.

Every entry point checks a run against the same table (``check_rules``): the command line (``parse_run_args``), the
web UI's form and its POST /swarm (webui_form.py, before anything starts), a test started by Locust itself (its
RunConfig at test_start), scenarios and sweep cells and capacity steps (``cell_options``), and crosscheck's suite
runs. tests/test_rules.py runs every rule's example through every entry point that takes its settings.

A rule reads a RunConfig; the launch rules (``launch=True``) read what only the command line sets (WORKERS,
WEB_HOST, ...) and apply where a LaunchConfig is checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from llmload.credentials import is_loopback, metrics_login, web_login
from llmload.errors import ConfigError
from llmload.loadtest.turns import TurnPlan

__all__ = ["Rule", "RULES", "check_rules", "broken_rules", "SAMPLE_TRACE"]

SAMPLE_TRACE = str(Path(__file__).resolve().parents[2] / "traces" / "sample.mooncake.jsonl")
"""The examples' trace: the sample Mooncake trace of 200 rows shipped in traces/."""
SAMPLE_TOOLS = str(Path(__file__).resolve().parents[2] / "tools" / "example.json")


@dataclass(frozen=True)
class Rule:
    """One rule between settings."""

    name: str
    keys: tuple[str, ...]
    """The settings it relates (an entry point that takes them all can break it)."""
    broken: Callable[[Any], bool]
    message: Callable[[Any], str]
    """The one line said when it is broken: the settings, why, and the fix."""
    example: dict[str, str] = field(default_factory=dict)
    """Settings that break it (and only it)."""
    launch: bool = False
    """It reads how the command line launches the run (a LaunchConfig), which no web form changes."""


def _trace_conflict(key: str, given: Callable[[Any], bool], fix: str, value: str, **also: str) -> Rule:
    return Rule(f"trace-{key.lower()}", ("TRACE", key), lambda c: bool(c.trace) and given(c),
                lambda c: f"{key} with TRACE: {fix}; leave {key} out", {"TRACE": SAMPLE_TRACE, key: value, **also})


def _turns(config: Any) -> TurnPlan:
    return TurnPlan.of(config.turns, config.think_time)


@lru_cache(maxsize=8)
def _trace_rows(path: str, limit: int) -> int:
    from llmload.promptsets.traces import read_trace

    return len(read_trace(Path(path), limit).rows)


RULES: tuple[Rule, ...] = (
    Rule("backoff", ("FAILURE_BACKOFF", "FAILURE_BACKOFF_MAX"), lambda c: c.failure_backoff_max < c.failure_backoff,
         lambda c: f"FAILURE_BACKOFF_MAX={c.failure_backoff_max:g} is below FAILURE_BACKOFF={c.failure_backoff:g}; raise "
                   "FAILURE_BACKOFF_MAX or lower FAILURE_BACKOFF", {"FAILURE_BACKOFF": "2", "FAILURE_BACKOFF_MAX": "1"}),
    Rule("burstiness", ("BURSTINESS", "ARRIVALS"), lambda c: c.burstiness != 1.0 and c.arrivals != "gamma",
         lambda c: f"BURSTINESS applies to ARRIVALS=gamma only; with ARRIVALS={c.arrivals} leave it out",
         {"RATE": "2", "BURSTINESS": "4"}),
    Rule("rate-users", ("RATE", "USERS"), lambda c: bool(c.rate) and c.num_users != 1,
         lambda c: f"USERS={c.num_users} with RATE: requests are sent on RATE's schedule, not by users; leave USERS out "
                   "and cap requests in flight with MAX_CONCURRENCY", {"RATE": "2", "USERS": "16"}),
    Rule("max-concurrency-closed-loop", ("MAX_CONCURRENCY", "RATE", "TRACE"),
         lambda c: bool(c.max_concurrency) and not c.open_loop,
         lambda c: "MAX_CONCURRENCY applies with RATE or TRACE; without them, USERS is the number of requests in flight",
         {"MAX_CONCURRENCY": "4"}),
    Rule("early-stop-slo", ("EARLY_STOP", "SLO"), lambda c: c.early_stop == "on" and not c.slo,
         lambda c: "EARLY_STOP=on needs SLO: it ends the run once an SLO's failure is certain", {"EARLY_STOP": "on"}),
    Rule("think-time-turns", ("THINK_TIME", "TURNS"), lambda c: bool(_turns(c).think_s) and not _turns(c).conversations,
         lambda c: f"THINK_TIME={c.think_time} is the wait between turns of a conversation; give TURNS above 1 too, or "
                   "leave THINK_TIME out", {"THINK_TIME": "2s"}),
    Rule("trace-options", ("TRACE", "TRACE_SPEED", "TRACE_LIMIT"),
         lambda c: not c.trace and (c.trace_speed != 1.0 or bool(c.trace_limit)),
         lambda c: f"{'TRACE_SPEED' if c.trace_speed != 1.0 else 'TRACE_LIMIT'} applies with TRACE; give TRACE=path too, "
                   "or leave it out", {"TRACE_SPEED": "2"}),
    _trace_conflict("RATE", lambda c: c.rate != 0, "the trace's times are the schedule; speed them up with TRACE_SPEED", "2"),
    _trace_conflict("USERS", lambda c: c.num_users != 1, "requests are sent at the trace's times, not by users; cap those "
                                                         "in flight with MAX_CONCURRENCY", "4"),
    _trace_conflict("REQUESTS", lambda c: c.requests != 0, "every row is a request; replay fewer with TRACE_LIMIT", "10"),
    _trace_conflict("TURNS", lambda c: _turns(c).conversations, "each row is one request", "3"),
    _trace_conflict("PREFIX_TOKENS", lambda c: c.prefix_tokens != 0, "the trace's hash_ids say which prompts share "
                                                                     "blocks", "100"),
    _trace_conflict("TOOL_ROUNDS", lambda c: c.tool_rounds != 1, "each row is one request", "2", TOOLS=SAMPLE_TOOLS),
    Rule("trace-warmups", ("TRACE", "TRACE_LIMIT", "WARMUP_REQUESTS"),
         lambda c: bool(c.trace) and bool(c.warmup_requests) and c.warmup_requests >= _trace_rows(c.trace, c.trace_limit),
         lambda c: f"WARMUP_REQUESTS={c.warmup_requests} with TRACE: the warm-ups are the trace's first rows (sent, not "
                   f"measured, not replayed again) and it has only {_trace_rows(c.trace, c.trace_limit)} "
                   f"{'(TRACE_LIMIT) ' if c.trace_limit else ''}rows; give fewer WARMUP_REQUESTS or more rows",
         {"TRACE": SAMPLE_TRACE, "TRACE_LIMIT": "3", "WARMUP_REQUESTS": "5"}),
    Rule("tools", ("TOOLS", "TOOL_ROUNDS", "TOOL_CHOICE"),
         lambda c: not c.tools and (c.tool_rounds != 1 or c.tool_choice != "auto"),
         lambda c: f"{'TOOL_ROUNDS' if c.tool_rounds != 1 else 'TOOL_CHOICE'} applies with TOOLS: give TOOLS=path to a "
                   "JSON list of function tools (e.g. tools/example.json), or leave it out", {"TOOL_ROUNDS": "2"}),
    Rule("prefix-groups", ("PREFIX_GROUPS", "PREFIX_TOKENS"), lambda c: c.prefix_groups != 1 and not c.prefix_tokens,
         lambda c: f"PREFIX_GROUPS={c.prefix_groups} needs PREFIX_TOKENS: give the prefixes' length, e.g. PREFIX_TOKENS=1000",
         {"PREFIX_GROUPS": "2"}),
    Rule("users-requests", ("USERS", "REQUESTS"), lambda c: bool(c.requests) and c.num_users > c.requests,
         lambda c: f"USERS={c.num_users} is more than REQUESTS={c.requests}; at most REQUESTS are ever in flight: give "
                   f"USERS={c.requests} or fewer", {"USERS": "8", "REQUESTS": "4"}),
    # How the command line launches the run: no web form changes these.
    Rule("web-login", ("WEB_HOST",), lambda c: web_login() is None and c.web_host != "127.0.0.1",
         lambda c: f"WEB_HOST={c.web_host} lets other machines drive the web UI; set WEB_LOGIN=user:password too",
         {"WEB_HOST": "0.0.0.0"}, launch=True),
    Rule("workers", ("WORKERS", "EXPECT_WORKERS"), lambda c: bool(c.workers and c.expect_remote_workers),
         lambda c: "WORKERS and EXPECT_WORKERS: give one (start local workers with make worker WORKERS=N)",
         {"WORKERS": "2", "EXPECT_WORKERS": "2"}, launch=True),
    Rule("metrics-login", ("METRICS_HOST", "METRICS_PORT"),
         lambda c: bool(c.metrics_port) and metrics_login() is None and not is_loopback(c.metrics_host),
         lambda c: f"METRICS_HOST={c.metrics_host} lets other machines read the run's metrics; set METRICS_LOGIN=user:"
                   "password too (Prometheus's basic_auth), or leave METRICS_HOST=127.0.0.1",
         {"METRICS_PORT": "9464", "METRICS_HOST": "0.0.0.0"}, launch=True),
    Rule("max-concurrency-workers", ("MAX_CONCURRENCY", "WORKERS"),
         lambda c: c.open_loop and bool(c.max_concurrency) and c.max_concurrency < (c.workers or c.expect_remote_workers),
         lambda c: f"MAX_CONCURRENCY={c.max_concurrency} is split over {c.workers or c.expect_remote_workers} workers, so "
                   f"each needs one: give MAX_CONCURRENCY={c.workers or c.expect_remote_workers} or more, or fewer workers",
         {"RATE": "2", "MAX_CONCURRENCY": "1", "WORKERS": "2"}, launch=True),
)


def broken_rules(config: Any) -> list[Rule]:
    """The rules ``config`` breaks, in the table's order (a RunConfig is held to the rules that read it; a LaunchConfig
    to every one)."""
    launch = hasattr(config, "workers")
    return [rule for rule in RULES if (launch or not rule.launch) and rule.broken(config)]


def check_rules(config: Any) -> None:
    """ConfigError with the first broken rule's line."""
    broken = broken_rules(config)
    if broken:
        raise ConfigError(broken[0].message(config))
