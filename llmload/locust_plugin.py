"""Locust wiring: the suite's options, the streaming user, the run's files, the web UI table.

Each completed request fires exactly one Locust request event (response_time = E2E in ms,
response_length = output tokens), so Locust's Requests/s and median response time are the
study's figures. Streaming metrics go to samples.jsonl and to their own web UI table, never
into Locust's request stats.
"""

from __future__ import annotations

import csv
import logging
from collections import deque
import random
from pathlib import Path
from typing import Any, Callable

import gevent
from gevent.event import Event
import orjson
from flask import request as flask_request
from locust import User, constant, events, task
from locust.exception import StopUser
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from llmload import options as opts
from llmload.clients import RequestFailed, make_client, measure_request
from llmload.errors import LoadTestError
from llmload.metrics import distribution, summarize, token_stats
from llmload.payload import ChatOptions, chat_body
from llmload.preflight import continuous_usage, probe_server, resolve_model
from llmload.prompts import Prompt, load_prompt_set
from llmload.records import RequestRecord, read_records
from llmload.storage import SAMPLES_FILE, SampleWriter, default_run_dir, fresh_run_dir, write_summary

__all__ = ["ChatUser"]

logger = logging.getLogger("llmload")
REQUEST_NAME = "/v1/chat/completions"


class LiveStats:
    """Streaming metrics of the current test, for the web UI table: the most recent values of each.

    Bounded, so a long run's memory stays flat (summary.json has the exact figures over every request).
    """

    MAX_VALUES = 1_000_000

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        def window() -> deque:
            return deque(maxlen=self.MAX_VALUES)

        self.ttft_s, self.ttfvt_s, self.tpot_s, self.itl_s = window(), window(), window(), window()
        self.output_tokens, self.reasoning_tokens, self.prompt_tokens = window(), window(), window()

    def add(self, r: RequestRecord) -> None:
        if not r.ok:
            return
        for values, value in ((self.ttft_s, r.ttft_s), (self.ttfvt_s, r.ttfvt_s), (self.tpot_s, r.tpot_s),
                              (self.output_tokens, r.completion_tokens), (self.reasoning_tokens, r.reasoning_tokens),
                              (self.prompt_tokens, r.prompt_tokens)):
            if value is not None:
                values.append(value)
        self.itl_s.extend(r.itl_s)

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for name, values in (("TTFT (ms)", self.ttft_s), ("TTFVT (ms)", self.ttfvt_s),
                             ("TPOT (ms)", self.tpot_s), ("ITL (ms)", self.itl_s)):
            d = distribution(values, 1000.0)
            rows.append({"metric": name, "count": d.count, "mean": d.mean, "median": d.median, "p90": d.p90, "p99": d.p99, "max": d.max})
        for name, counts in (("output tokens", self.output_tokens), ("reasoning tokens", self.reasoning_tokens),
                             ("prompt tokens", self.prompt_tokens)):
            t = token_stats(counts)
            rows.append({"metric": name, "count": t.count, "mean": t.mean, "median": t.median, "p90": None, "p99": None, "max": t.max})
        for row in rows:
            row.update({k: round(v, 2) for k, v in row.items() if isinstance(v, float)})
        return rows


class RequestBudget:
    """WARMUP_REQUESTS, then REQUESTS: tickets for users, and the end of the test when all are done."""

    def __init__(self, warmups: int, measured: int, on_all_done: Callable[[], None]) -> None:
        self.warmups = warmups
        self.measured = measured  # 0: no count, DURATION ends the test
        self._issued = 0
        self._warmups_left = warmups
        self._measured_done = 0
        self._on_all_done = on_all_done
        self.warmed_up = Event()
        if not warmups:
            self.warmed_up.set()

    def take(self) -> int | None:
        """The number of the next request to send, or None once every request is out."""
        if self.measured and self._issued >= self.warmups + self.measured:
            return None
        self._issued += 1
        return self._issued - 1

    def is_warmup(self, ticket: int) -> bool:
        return ticket < self.warmups

    def done(self, ticket: int) -> None:
        if self.is_warmup(ticket):
            self._warmups_left -= 1
            if not self._warmups_left:
                self.warmed_up.set()
            return
        self._measured_done += 1
        if self.measured and self._measured_done == self.measured:
            gevent.spawn(self._on_all_done)


class RunSession:
    """One test (from test_start to test_stop): its options, prompts, files and live stats."""

    def __init__(self, environment: Any) -> None:
        o = environment.parsed_options
        self.host = (environment.host or o.host).rstrip("/")
        if not self.host:
            raise LoadTestError("no HOST: give the server root, e.g. http://127.0.0.1:8000")
        self.api_key = opts.api_key(o)
        info = probe_server(self.host, self.api_key)
        model = resolve_model(o.model, info)
        continuous = continuous_usage(o.continuous_usage, info)
        self.chat = ChatOptions(model=model, effort=o.effort, max_tokens=o.max_tokens, temperature=o.temperature,
                                continuous_usage=continuous, extra_body=opts.extra_body(o))
        self.prompts: tuple[Prompt, ...] = load_prompt_set(o.prompts, o.seed)
        self.in_sequence = o.order == "sequence"
        runner = environment.runner
        self.budget = RequestBudget(o.warmup_requests, o.requests, runner.quit if o.headless else runner.stop)
        self.nonce = o.nonce == "on"
        self._next_prompt = 0
        self.client_name = o.client
        self.timeout_s = o.request_timeout
        self.seed = o.seed
        self.config = {**opts.run_config(o), "host": self.host, "model": model, "continuous_usage": continuous,
                       "server_version": info.version, "users": environment.runner.target_user_count or o.num_users}
        base = Path(o.out) if o.out else default_run_dir(o.gpu, model, o.effort, o.num_users)
        self.run_dir = fresh_run_dir(base)
        self.config["out"] = str(self.run_dir)
        self.writer = SampleWriter(self.run_dir / SAMPLES_FILE)
        self.writer.start()
        (self.run_dir / "config.json").write_bytes(orjson.dumps(self.config, option=orjson.OPT_INDENT_2))
        self.live = LiveStats() if environment.web_ui else None  # headless runs have no table to fill
        self.users_started = 0

    def next_prompt(self, rng: random.Random) -> Prompt:
        """A random prompt, or with ORDER=sequence the set's next one (shared by all users)."""
        if not self.in_sequence:
            return rng.choice(self.prompts)
        prompt = self.prompts[self._next_prompt % len(self.prompts)]
        self._next_prompt += 1
        return prompt

    def add(self, record: RequestRecord) -> None:
        self.writer.add(record)
        if self.live is not None:
            self.live.add(record)

    def finish(self, environment: Any) -> None:
        self.writer.close()
        write_summary(self.run_dir, summarize(read_records(self.writer.path), self.config))
        _write_locust_csv(environment, self.run_dir)


def _write_locust_csv(environment: Any, run_dir: Path) -> None:
    """Locust's request and failure tables as they stand at the end of the test.

    Locust's own --csv writer refreshes once a second and is closed without a last write, so it
    misses requests that finish while in-flight streams drain; these files have them all.
    """
    tables = StatsCSV(environment, PERCENTILES_TO_REPORT)
    for name, write in (("locust_stats.csv", tables.requests_csv), ("locust_failures.csv", tables.failures_csv)):
        with (run_dir / name).open("w", newline="") as f:
            write(csv.writer(f))


_session: RunSession | None = None


class ChatUser(User):
    """A closed-loop user: streams one chat completion after another, no wait between them."""

    wait_time = constant(0)

    def on_start(self) -> None:
        session = _session
        self.session = session
        if session is None:
            return  # the test did not start (its error is logged); chat() stops this user
        session.users_started += 1
        self.rng = random.Random(session.seed * 1_000_003 + session.users_started)
        self.client = make_client(session.client_name, session.host, session.api_key, session.timeout_s)

    def on_stop(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()

    @task
    def chat(self) -> None:
        session = self.session
        ticket = session.budget.take() if session is not None else None
        if ticket is None:
            raise StopUser()
        warmup = session.budget.is_warmup(ticket)
        if not warmup:
            session.budget.warmed_up.wait()
        prompt = session.next_prompt(self.rng)
        nonce = f"{self.rng.randrange(10**12):012d}" if session.nonce else None
        body = chat_body(session.chat, prompt.messages, prompt.request, nonce)
        record = measure_request(self.client, body, prompt.id, session.add, warmup)
        session.budget.done(ticket)
        if warmup:
            return  # warm-ups stay out of Locust's statistics too
        self.environment.events.request.fire(
            request_type="POST", name=REQUEST_NAME, response_time=record.e2e_s * 1000.0,
            response_length=record.completion_tokens or 0, context={"prompt_id": prompt.id},
            exception=None if record.ok else RequestFailed(record.error or "", record.error_detail or ""),
        )


@events.init_command_line_parser.add_listener
def _add_options(parser: Any, **_: Any) -> None:
    opts.add_suite_options(parser, web_ui=True)


@events.test_start.add_listener
def _on_test_start(environment: Any, **_: Any) -> None:
    global _session
    try:
        _session = RunSession(environment)
    except LoadTestError as e:
        _session = None
        logger.error("error: %s", e)
        if environment.runner is not None:
            gevent.spawn(environment.runner.quit if environment.parsed_options.headless else environment.runner.stop)


@events.test_stop.add_listener
def _on_test_stop(environment: Any, **_: Any) -> None:
    if _session is not None:
        _session.finish(environment)


@events.quitting.add_listener
def _on_quitting(**_: Any) -> None:
    if _session is not None:
        _session.writer.flush()


@events.reset_stats.add_listener
def _on_reset_stats(**_: Any) -> None:
    if _session is not None and _session.live is not None:
        _session.live.clear()


@events.init.add_listener
def _extend_web_ui(environment: Any, **_: Any) -> None:
    web_ui = environment.web_ui
    if not web_ui:
        return
    web_ui.template_args["extended_tabs"] = [{"title": "Streaming metrics", "key": "streaming"}]
    web_ui.template_args["extended_tables"] = [{"key": "streaming", "structure": [
        {"key": k, "title": t} for k, t in (("metric", "Metric"), ("count", "Count"), ("mean", "Mean"),
                                            ("median", "Median"), ("p90", "P90"), ("p99", "P99"), ("max", "Max"))]}]

    @web_ui.app.after_request
    def _add_streaming_stats(response: Any) -> Any:
        if flask_request.path != "/stats/requests" or not response.is_json:
            return response
        rows = _session.live.rows() if _session is not None and _session.live is not None else []
        response.set_data(orjson.dumps({**response.get_json(), "extended_stats": [{"key": "streaming", "data": rows}]}))
        return response
