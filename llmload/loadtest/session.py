"""One test, from Locust's test_start to test_stop, in each process that runs it; one class per role.

RunSession is what every process of a test knows: the target, what to send and how (its users read it). Each
process takes one role: RunOwner owns the run (the load process, or the master of workers): it counts the
requests, ends the test, writes the run's files and serves the live table. RunWorker is a worker: it sends its
share and forwards its records, failures and the end to the master, which owns the run.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import logging
from abc import ABC, abstractmethod
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

import gevent
import orjson
from gevent.event import Event
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from llmload.client.apis import APIS
from llmload.client.body import ChatOptions
from llmload.client.measure import ChatClient, make_client
from llmload.credentials import api_key_for
from llmload.errors import LoadTestError
from llmload.loadtest.arrivals import Arrivals, Replay
from llmload.loadtest.conversations import ConversationDraw
from llmload.loadtest.budget import RequestBudget
from llmload.loadtest.distributed import DONE, FAILED, WARMED, MasterCollector, WorkerForwarder, plan_of, share
from llmload.loadtest.earlystop import watch_slos
from llmload.loadtest.efforts import EffortDraw
from llmload.loadtest.live import LiveStats
from llmload.loadtest.pacing import FailRatioGuard
from llmload.loadtest.pipeline import RequestPipeline
from llmload.loadtest.schedule import Schedule
from llmload.loadtest.selfcheck import GeneratorMonitor
from llmload.loadtest.server_window import ServerWindow
from llmload.loadtest.preflight import (ServerInfo, check_api, check_prefix_fits, check_target_plays, continuous_usage,
                                        probe_server, reset_prefix_cache, resolve_model, served_by)
from llmload.loadtest.runconfig import RunConfig, launched_config, parse_extra_body
from llmload.loadtest.stopping import stop_signal
from llmload.loadtest.toolrounds import ToolRounds
from llmload.loadtest.turns import TurnPlan
from llmload.loadtest.workload import workload_of
from llmload.promptsets.catalog import Prompt, prompt_overrides
from llmload.results.efforts import effort_shares, mixed_efforts
from llmload.results.generator import check
from llmload.results.predicted import predicted_label
from llmload.results.records import RequestRecord, read_records
from llmload.results.run_metrics import RunMetrics
from llmload.results.slo import Slo, is_good, slos_of
from llmload.results.structured import judge_answer, parse_response_format
from llmload.results.storage import (CONFIG_FILE, SAMPLES_FILE, SERVER_WINDOW_FILE, SampleWriter, default_run_dir,
                                     fresh_run_dir, write_summary)
from llmload.results.summary import summarize
from llmload.results.vllm_bench import write_vllm_bench
from llmload.timescale import resolve_time_scale

__all__ = ["RunSession", "RunOwner", "RunWorker", "start_session", "current_session", "current_collector",
           "current_live", "current_metrics", "start_measured_schedule"]

logger = logging.getLogger("llmload")


def start_session(environment: Environment) -> RunSession:
    """The session of the test starting in ``environment``, in this process's role; its options read once and held to
    the rules between settings (rules.py): a test started by Locust itself has not met the command line's checks."""
    runner = environment.runner
    processes = runner.worker_count if isinstance(runner, MasterRunner) else plan_of(environment).workers
    config = launched_config(RunConfig.of(environment.parsed_options), processes).checked()
    if isinstance(runner, WorkerRunner):  # the master writes the run's files and ends the test
        return RunWorker(environment, config, runner)
    return RunOwner(environment, config)


def current_session(environment: Environment) -> RunSession | None:
    """The session of the test running in ``environment``; None before one starts or when it failed to."""
    return getattr(environment, "llmload_session", None)


def current_collector(environment: Environment) -> MasterCollector | None:
    """On the master, the running test's collector of its workers' records; None anywhere else."""
    session = current_session(environment)
    return session.collector if isinstance(session, RunOwner) else None


def current_live(environment: Environment) -> LiveStats | None:
    """The running test's live table (the web UI's streaming tab); None headless, on a worker, or before a test."""
    session = current_session(environment)
    return session.live if isinstance(session, RunOwner) else None


def current_metrics(environment: Environment) -> RunMetrics | None:
    """The running test's figures for METRICS_PORT; None when it is off, on a worker, or before a test."""
    session = current_session(environment)
    return session.metrics if isinstance(session, RunOwner) else None


def start_measured_schedule(environment: Environment, start_unix_s: float) -> None:
    """On a worker, the master's word that every warm-up is done: the measured schedule starts at ``start_unix_s``."""
    session = current_session(environment)
    if isinstance(session, RunWorker):
        session.go(start_unix_s)


class RunSession(ABC):
    """One test in one process, in three parts: what it sends (``draw``: the workload's prompts and conversations),
    when (``schedule``) and the one path every request takes (``pipeline``); a role's outputs (``add``) keep the
    records."""

    budget: RequestBudget
    fail_ratio: FailRatioGuard
    monitor: GeneratorMonitor

    def __init__(self, environment: Environment, config: RunConfig) -> None:
        self.plan = plan_of(environment)
        self.server = self._connect(environment, config)
        self.chat = self._body(config)
        self.workload = workload_of(config)
        self.draw = ConversationDraw(self.workload, self.plan, TurnPlan.of(config.turns, config.think_time, self.scale),
                                     EffortDraw(effort_shares(config.effort), config.seed), config.order == "sequence",
                                     config.nonce == "on", config.tool_rounds if self.workload.tools else 1,
                                     cold=config.cache == "cold", seed=config.seed, prefix_tokens=config.prefix_tokens)
        self.schedule = self._schedule(config)
        self.client_name, self.timeout_s = config.client, config.request_timeout
        self.failure_backoff_s, self.failure_backoff_max_s = config.failure_backoff, config.failure_backoff_max
        self.seed = config.seed
        self.users_started = 0
        self.finished = False
        self.files_written = Event()

    def _connect(self, environment: Environment, config: RunConfig) -> ServerInfo:
        """The target: its root, the key it gets, what it serves and its time scale (asked before anything else)."""
        self.host = (environment.host or config.host).rstrip("/")
        if not self.host:
            raise LoadTestError("no HOST: give the server root, e.g. http://127.0.0.1:8000")
        parsed = environment.parsed_options
        typed, parsed.api_key = parsed.api_key, ""  # a key typed in the form is used once: not after a change of host
        self.api_key = api_key_for(self.host, getattr(environment, "llmload_start_host", None) or self.host, typed)
        info = probe_server(self.host, self.api_key)
        check_api(info, config.api, self.api_key)  # the web UI's form may have changed API or HOST
        self.scale = resolve_time_scale(config.speedup, served_by(info, ""))
        """The run's one time scale, from its target: every conversion to the target's clock goes through it."""
        return info

    def _body(self, config: RunConfig) -> ChatOptions:
        """The request body's options before the effort (the model the server serves, the run's fields)."""
        workload = workload_of(config)
        chat = ChatOptions(model=resolve_model(config.model, self.server), max_tokens=config.max_tokens,
                           temperature=config.temperature, continuous_usage=continuous_usage(config.continuous_usage, self.server),
                           extra_body=parse_extra_body(config.extra_body), tools=workload.tools,
                           tool_choice=config.tool_choice, response_format=parse_response_format(config.response_format))
        if config.trace and self.server.version is not None:  # a trace's output lengths are forced, where vLLM can
            chat = replace(chat, extra_body={"ignore_eos": True, **chat.extra_body})
        check_prefix_fits(config.prefix_tokens, self.server, chat.model)  # the web UI's form may have changed it
        return chat

    def _schedule(self, config: RunConfig) -> Schedule:
        """RATE's or TRACE's schedule on the target's clock (the same load on a target that runs faster than the GPU
        it plays is that much the rate), or the closed loop's request count."""
        trace = self.workload.trace
        arrivals: Arrivals | Replay | None = (
            Replay(tuple(row.offset_s for row in trace.rows), self.scale.target_rate(config.trace_speed)) if trace is not None
            else Arrivals(self.scale.target_rate(config.rate), config.arrivals, config.burstiness) if config.rate > 0 else None)
        warmup_rows = config.warmup_requests if trace is not None else 0
        requests = len(trace.rows) - warmup_rows if trace is not None else config.requests
        return Schedule(self.plan, arrivals, requests, warmup_rows, share(config.max_concurrency, self.plan),
                        config.seed, self.plan.start_unix_s)

    def _pipeline(self, environment: Environment, config: RunConfig) -> RequestPipeline:
        """The path every request of this process takes, once the role has its budget and failure guard."""
        api = APIS[config.api]
        judge = None if self.chat.response_format is None else functools.partial(judge_answer, self.chat.response_format)
        return RequestPipeline(api, {effort: replace(self.chat, effort=effort) for effort in self.draw.efforts.efforts},
                               ToolRounds.of(self.workload.tools, config.tool_rounds, self.workload.tool_results, api),
                               judge, self.draw.turn_plan.conversations, self.add, self.budget, self.fail_ratio,
                               environment.events.request.fire)

    def arrival_prompt(self, number: int) -> Prompt | None:
        """The prompt arrival ``number`` sends: a trace's row; None under RATE (a prompt is drawn)."""
        return self.workload.prompts[number] if self.workload.trace is not None else None

    def new_client(self) -> ChatClient:
        """A streaming client for one user (or one open-loop slot), as the run's options say."""
        return make_client(self.client_name, self.host, self.api_key, self.timeout_s, self.chat_api)

    @property
    def chat_api(self) -> str:
        return self.pipeline.api.name

    @abstractmethod
    def add(self, record: RequestRecord) -> None:
        """Keep one finished request's record (called once per request, on the request's greenlet)."""

    def on_quitting(self) -> None:
        """Locust is exiting: a finish in progress completes first; before any, the records held in memory are kept.

        Waiting matters: a second quit() while the first stop's files are written returns at once (Locust's stop()
        does nothing once the state is STOPPED) and Locust would exit mid-write (a capacity step lost its summary).
        """
        if self.finished:
            self.files_written.wait()
        else:
            self._keep_held_records()

    def finish(self, environment: Environment) -> None:
        """End the test's part of this process once, however often the test stops (a call while the first is at
        work returns when it is done)."""
        if self.finished:  # a second stop (EARLY_STOP's while DURATION's drains) waits: Locust exits once it returns
            self.files_written.wait()
            return
        self.finished = True
        try:
            self._close(environment)
        finally:
            self.files_written.set()

    @abstractmethod
    def _keep_held_records(self) -> None:
        """Locust exits before the test ended: keep the records held in memory."""

    @abstractmethod
    def _close(self, environment: Environment) -> None:
        """The test ended: this process's last records and figures go where the role sends them."""


class RunOwner(RunSession):
    """The process that owns the run (the load process, or the master): it counts requests, ends the test, writes
    the run's files and serves the live table; a master collects its workers' records through ``collector``."""

    def __init__(self, environment: Environment, config: RunConfig) -> None:
        super().__init__(environment, config)
        runner = environment.runner
        assert runner is not None
        end_test = runner.quit if environment.parsed_options.headless else runner.stop
        self.stop_timeout_s = float(config.stop_timeout)
        self.measured: list[RequestRecord] = []  # kept only for EARLY_STOP's looks
        self.stopped_early: str | None = None
        self.budget = RequestBudget(config.warmup_requests, self.schedule.requests, end_test)
        self.fail_ratio = FailRatioGuard(config.max_fail_ratio, lambda line: self._stop_for_failures(line, end_test))
        # RATE or TRACE: one dispatching user per process, not a load setting (USERS is 1)
        self._open_run_dir(config, 1 if config.open_loop else runner.target_user_count or config.num_users)
        arrivals = self.schedule.arrivals
        slos = self.slos
        self.metrics = RunMetrics(str(self.run_dir), config.gpu, self.draw.efforts.efforts, api=config.api,
                                  scheduled_rps=arrivals.rate_rps if arrivals is not None else 0.0,
                                  good=(lambda record: is_good(record, slos)) if slos else None) \
            if config.metrics_port else None  # METRICS_PORT's figures (exporter.py serves them)
        self.live = LiveStats() if environment.web_ui else None  # headless runs have no table to fill
        if self.live is not None:
            self.live.run_dir = str(self.run_dir)
            served = self.config["served_by"]
            if served.get("rehearsal"):
                self.live.played = (predicted_label(served), self.scale)
                self.live.validation = served.get("validation") or {}
        self.collector: MasterCollector | None = None
        if isinstance(runner, MasterRunner):
            self.collector = MasterCollector(runner, self.add, config.warmup_requests, self.schedule.requests, end_test,
                                             lambda line: self._stop_for_failures(line, end_test))
            if config.open_loop and runner.target_user_count < self.collector.workers:
                raise LoadTestError(f"RATE with {self.collector.workers} workers needs a user on each (one dispatches its part "
                                    f"of the schedule): start at least {self.collector.workers} users, not {runner.target_user_count}")
        self.monitor = GeneratorMonitor("master" if self.collector is not None else "load process")
        if config.early_stop == "on":  # Locust's run time is whole seconds, None with REQUESTS: then look every 6 s
            watch_slos(self.slos, self.measured, self.schedule.stopping, config.duration_s or 60.0,
                       lambda reason: self._stop_early(reason, end_test))
        if config.cache_reset == "on":
            self.config["cache_reset_outcome"] = outcome = reset_prefix_cache(self.host, self.api_key)
            if not outcome.startswith("done"):
                logger.warning("warning: CACHE_RESET=on: %s", outcome)
        self.server_window = ServerWindow(self.host, self.api_key)
        self.pipeline = self._pipeline(environment, config)

    def _open_run_dir(self, config: RunConfig, users: int) -> None:
        """The run's folder, its config.json, the SLOs and mix it is judged by, and the samples writer (started)."""
        chat = self.chat
        self.config = {**config.record(), "host": self.host, "model": chat.model, "continuous_usage": chat.continuous_usage,
                       "served_by": served_by(self.server, chat.model), "users": users,
                       "prompt_overrides": prompt_overrides(self.workload.prompts), "speedup": self.scale.speedup,
                       "time_scale": asdict(self.scale)}
        check_target_plays(config.gpu, self.config["served_by"])
        self.slos: tuple[Slo, ...] = slos_of(self.config)  # limits on the target's clock, by the run's time scale
        self.mix_efforts = mixed_efforts(config.effort)
        # Named from what the test starts with (the web UI's form included), not from what `make ui` was given.
        base = Path(config.out) if config.out else default_run_dir(config.gpu, chat.model, config.effort, users)
        self.run_dir = fresh_run_dir(base)
        logger.info("llmload: results go to %s/", self.run_dir)
        self.config["out"] = str(self.run_dir)
        self.writer = SampleWriter(self.run_dir / SAMPLES_FILE, config.flush_interval)
        self.writer.start()
        (self.run_dir / CONFIG_FILE).write_bytes(orjson.dumps(self.config, option=orjson.OPT_INDENT_2))

    def _stop_for_failures(self, line: str, end_test: Callable[[], None]) -> None:
        logger.error("error: %s", line)
        self.config["stopped_by"] = "MAX_FAIL_RATIO"
        gevent.spawn(end_test)

    def _stop_early(self, reason: str, end_test: Callable[[], None]) -> None:
        self.stopped_early = reason
        end_test()

    def add(self, record: RequestRecord) -> None:
        self.writer.add(record)
        if self.metrics is not None:
            self.metrics.add(record)
        if self.slos and not record.warmup:
            self.measured.append(record)
        if self.live is not None:
            self.live.add(record)

    def _keep_held_records(self) -> None:
        self.writer.flush()

    def _close(self, environment: Environment) -> None:
        """Write samples.jsonl (synced), summary.json and Locust's tables; a master waits for every worker's records."""
        loads = [self.monitor.stop()]
        if self.collector is not None:
            self.collector.collect(timeout_s=self.stop_timeout_s + 60)
            loads += sorted(self.collector.loads, key=lambda load: load.name)
        self.writer.close()
        records = list(read_records(self.writer.path))
        window = self.server_window.close(sum(1 for r in records if r.ok), self.run_dir / SERVER_WINDOW_FILE)
        self.config["server_metrics"] = self.server_window.describe()  # where they were, whose, or why none
        summary = summarize(records, self.config, check(loads), window, slos=self.slos, mix_efforts=self.mix_efforts)
        write_summary(self.run_dir, dataclasses.replace(summary, interrupted_by=stop_signal(environment),
                                                        stopped_early=self.stopped_early))
        write_vllm_bench(self.run_dir, records, self.config)
        _write_locust_csv(environment, self.run_dir)
        logger.info("llmload: results in %s/ (summary.json, vllm_bench.json, samples.jsonl, locust_*.csv)", self.run_dir)


class RunWorker(RunSession):
    """A worker: its share of the request counts; its records, failures and the end go to the master."""

    def __init__(self, environment: Environment, config: RunConfig, runner: WorkerRunner) -> None:
        super().__init__(environment, config)
        self.budget = RequestBudget(
            share(config.warmup_requests, self.plan), share(self.schedule.requests, self.plan), lambda: runner.send_message(DONE),
            (lambda: runner.send_message(WARMED)) if config.warmup_requests else None)
        self.fail_ratio = FailRatioGuard(config.max_fail_ratio, lambda line: runner.send_message(FAILED, line))
        self.forwarder = WorkerForwarder(runner)
        self.monitor = GeneratorMonitor(f"worker {self.plan.position + 1}")
        self.pipeline = self._pipeline(environment, config)

    def go(self, start_unix_s: float) -> None:
        """Every worker's warm-ups are done: the measured requests start, RATE's schedule at ``start_unix_s``."""
        self.schedule.start_unix_s = start_unix_s
        self.budget.warmed_up.set()

    def add(self, record: RequestRecord) -> None:
        self.forwarder.add(record)

    def _keep_held_records(self) -> None:
        pass  # they go to the master with the next batch

    def _close(self, environment: Environment) -> None:
        """Send the last records, with this process's load figures, to the master."""
        self.forwarder.close(self.monitor.stop())


def _write_locust_csv(environment: Environment, run_dir: Path) -> None:
    """Locust's request and failure tables as they stand at the end of the test.

    Locust's own --csv writer refreshes once a second and is closed without a last write, so it misses requests that
    finish while in-flight streams drain; these files have them all."""
    tables = StatsCSV(environment, PERCENTILES_TO_REPORT)
    for name, write in (("locust_stats.csv", tables.requests_csv), ("locust_failures.csv", tables.failures_csv)):
        with (run_dir / name).open("w", newline="") as f:
            write(csv.writer(f))
