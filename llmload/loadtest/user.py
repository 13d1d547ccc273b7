"""Locust wiring: the suite's options, the streaming user, and the hooks that start and end a run.

Each completed request fires exactly one Locust request event (response_time = E2E in ms,
response_length = output tokens), so Locust's Requests/s and median response time are the
study's figures. Streaming metrics go to samples.jsonl and to their own web UI table, never
into Locust's request stats.
"""

from __future__ import annotations

import argparse
import gc
import logging
import random
from typing import Any

import gevent
from locust import User, events, task
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import MasterRunner

from llmload.errors import LoadTestError
from llmload.loadtest.distributed import register_messages
from llmload.loadtest.exporter import install_exporter
from llmload.loadtest.live import install_streaming_tab
from llmload.loadtest.openloop import run_open_loop
from llmload.loadtest.pacing import FailureBackoff
from llmload.loadtest.runconfig import RunConfig
from llmload.loadtest.session import (RunSession, current_collector, current_live, current_metrics, current_session,
                                      start_measured_schedule, start_session)
from llmload.loadtest.stopping import stop_signal
from llmload.loadtest.webui_form import install_form_check
from llmload.loadtest.webui_guard import install_webui_guard
from llmload.loadtest.workload import workload_of
from llmload.promptsets.conversation import Conversation
from llmload.settings import add_suite_options

__all__ = ["ChatUser"]

logger = logging.getLogger("llmload")


class ChatUser(User):
    """A closed-loop user: streams one chat completion after another, no wait between them but after failures; with
    TURNS, it holds one conversation at a time and waits THINK_TIME between an answer and the next turn.

    With RATE (or TRACE), the first user instead keeps the open-loop schedule (openloop.py) and the others stop. Every
    request goes through the session's RequestPipeline (pipeline.py), whoever sends it.
    """

    pause_s = 0.0
    """The wait before the next request: FAILURE_BACKOFF after a failure, THINK_TIME within a conversation, else none."""
    session: RunSession | None
    """The running test's session in this process; None when the test did not start."""
    conversation: Conversation | None = None
    """The conversation this user holds; None before its first."""
    effort = "medium"
    """Its conversation's reasoning effort."""

    def wait_time(self) -> float:
        return self.pause_s

    def on_start(self) -> None:
        session = current_session(self.environment)
        self.session = session
        if session is None:
            return  # the test did not start (its error is logged); chat() stops this user
        session.users_started += 1
        self.backoff = FailureBackoff(session.failure_backoff_s, session.failure_backoff_max_s)
        self.rng = random.Random(session.seed * 1_000_003 + session.plan.position * 100_003 + session.users_started)
        self.client = session.new_client()

    def on_stop(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()

    @task
    def chat(self) -> None:
        session = self.session
        if session is not None and session.schedule.arrivals is not None:
            return run_open_loop(session, self.rng)  # RATE: the first user keeps the schedule, the others stop
        ticket = session.budget.take() if session is not None else None
        if ticket is None:
            raise StopUser()
        warmup = session.budget.is_warmup(ticket)
        if not warmup:
            session.budget.warmed_up.wait()
            if stop_signal(self.environment) is not None:
                raise StopUser()  # Ctrl-C came while this user waited for the warm-ups: send nothing more
        if warmup or self.conversation is None or self.conversation.done:
            self.conversation, self.effort = session.draw.new_conversation(self.rng, warmup)
        record = session.pipeline.send(ticket, self.client, self.conversation, self.effort)
        # closed loop only: RATE's schedule never waits
        self.pause_s = self.backoff.after(record.ok)
        if record.ok and not self.conversation.done and not self.conversation.mid_turn:
            self.pause_s = session.draw.turn_plan.think_time_s(self.rng)


@events.init_command_line_parser.add_listener
def _add_options(parser: LocustArgumentParser, **_: Any) -> None:
    add_suite_options(parser, web_ui=True)


@events.test_start.add_listener
def _on_test_start(environment: Environment, **_: Any) -> None:
    environment.llmload_session = None
    # What exists now (Locust, Flask, the prompt set) lives for the whole run: out of the collector's sight, a
    # full collection in mid-run scans only what the run made (one scanning everything held the loop 35 ms).
    gc.collect()
    gc.freeze()
    try:
        environment.llmload_session = start_session(environment)
    except Exception as e:  # a test that cannot start must end, not leave Locust waiting with idle users
        if isinstance(e, LoadTestError):
            logger.error("error: %s", e)
        else:
            logger.exception("error: the test could not start")
        if environment.runner is not None:
            gevent.spawn(environment.runner.quit if environment.parsed_options.headless else environment.runner.stop)


@events.test_stopping.add_listener
def _on_test_stopping(environment: Environment, **_: Any) -> None:
    session = current_session(environment)
    if session is not None:
        session.schedule.stopping.set()  # RATE's dispatcher sends nothing more


@events.test_stop.add_listener
def _on_test_stop(environment: Environment, **_: Any) -> None:
    session = current_session(environment)
    if session is not None:
        session.finish(environment)


@events.quitting.add_listener
def _on_quitting(environment: Environment, **_: Any) -> None:
    session = current_session(environment)
    if session is not None:
        session.on_quitting()
    if environment.llmload_exporter is not None:
        environment.llmload_exporter.wait_for_last_scrape()


@events.init.add_listener
def _on_init(environment: Environment, **_: Any) -> None:
    environment.llmload_start_host = environment.host  # the host the environment's API key is for
    register_messages(environment, current_collector, start_measured_schedule)
    environment.llmload_exporter = install_exporter(environment, lambda: current_metrics(environment))
    environment.events.reset_stats.add_listener(lambda **_: _clear_live(environment))
    if environment.web_ui:
        install_webui_guard(environment.web_ui, environment.parsed_options.web_host, environment.parsed_options.web_port)
        install_form_check(environment.web_ui, lambda: _processes(environment))
        install_streaming_tab(environment.web_ui, lambda: current_live(environment))
    _load_prompts_early(environment.parsed_options)
    # gevent's loop caches its clock; after the seconds of imports above, a stale clock would make
    # Locust's run-time timer (scheduled next) fire at once: a 1 s run would end before it began.
    gevent.get_hub().loop.update_now()


def _load_prompts_early(options: argparse.Namespace | None) -> None:
    """Build the workload now, before Locust starts its run-time clock: at test_start the build would count
    against DURATION (a random:IN:OUT set takes seconds); it is cached for the session."""
    if options is not None:
        try:
            workload_of(RunConfig.of(options))
        except LoadTestError:
            pass  # test_start reports it as the run's one error line


def _clear_live(environment: Environment) -> None:
    live = current_live(environment)
    if live is not None:
        live.clear()


def _processes(environment: Environment) -> int:
    """The processes that run the users: the master's workers, else this one."""
    runner = environment.runner
    return runner.worker_count if isinstance(runner, MasterRunner) else 1
