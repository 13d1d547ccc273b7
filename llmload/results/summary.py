"""Pure statistics: distributions, and a run's Summary from its raw records (every metric of results/metrics.py).

Percentiles are exact (numpy's linear interpolation over every sample, as vLLM's bench serve
computes them), never Locust's rounded histogram buckets. Each median and percentile has its 95%
interval beside it (``median_ci95``), rates theirs from batch means (``rps_ci95``); see intervals.py.
Inputs are seconds; the Summary reports milliseconds, and its field names say so.

summary.json's versions (``schema_version``; a reader reads every version up to its own, what an older
file lacks taking its default or None, and names a newer one in one line):

    1  2026-12-02: the first summaries. Fields were added later without a new version (by_effort, slo,
       slo_met, arrivals, stopped_early, generator, server_vs_client, the *_ci95 intervals among them):
       a version-1 file may lack them.
    2  2026-12-04: delivery, warnings and server_vs_client's causes added; no TPOT for answers sent in one
       event (`llmload report` computes a version-1 summary again from samples.jsonl).
    3  2026-12-04: cost (USD per million tokens and per thousand requests at PRICE, with intervals) and, for a
       rehearsal, predicted (its figures for the GPU it played: times x SPEEDUP, rates / SPEEDUP).
    4  2026-12-04: decode_ms (E2E - TTFT, the metric table's decode row), in the run's measures and each effort's;
       an older file reads as having measured none of it (`llmload report` computes it from samples.jsonl).
    5  2026-12-04: by_turn (conversations' turns, each its Measures) and server_prefix_cache_hit_rate.
    6  2026-12-04: tasks (TOOL_ROUNDS: tasks by outcome, rounds, time to the final answer, tokens; results/tasks.py).
    7  2026-12-04: answer_json_ratio, answer_valid_ratio and its interval (RESPONSE_FORMAT's structured output), in
       the run's measures and each group's; an older file reads as having judged no answer.
    8  2026-12-06: the run-level figures laid out by the metric tables (results/metrics.py: RUN_METRICS first, then a
       Distribution per METRICS row); goodput_output_tok_s (output tokens/s of good requests); each SLO's
       requests_unmeasurable (a request with no value for a limited metric is never good and counts against the
       limit); predicted: scaled_by (was speedup), validated, validation and model_error (the profile's own error);
       config.time_scale (the SPEEDUP the run took from its target); cost priced from the predicted rates; cache
       (CACHE's intent, the declared, server's and answers' hit rates, prompts reused, the flag); server_failures
       (requests the server refused or broke, its messages); generator cause server_failed.
    9  2026-12-06: server_vs_client's engine (whose metric names the server's account was read under: vLLM's,
       SGLang's, trtllm-serve's), not_exposed (the figures that engine does not expose, said, not 0) and notes (figures
       that mean something else than vLLM's).

tests/test_versions.py pins each version's fields: a change of fields needs a new version and its line here.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from llmload.errors import ResultsError
from llmload.results.cache import CacheAccount, cache_account
from llmload.results.cost import Cost, run_cost
from llmload.results.intervals import batch_means_ci, batches_for, proportion_ci
from llmload.results.delivery import TokenDelivery, token_delivery
from llmload.results.distributions import Distribution, TokenStats, distribution, token_stats
from llmload.results.predicted import Predicted, predict_played
from llmload.results.failures import ServerFailures, server_failures
from llmload.results.generator import GeneratorCheck, exonerated
from llmload.results.metrics import MEASURED_RUN_METRICS, METRICS, run_metric_fields
from llmload.results.reconcile import ServerVsClient, reconcile
from llmload.results.provenance import served_by_of
from llmload.results.records import RequestRecord, run_span_s
from llmload.results.server_metrics import MetricsSample, prefix_cache_hit_rate
from llmload.results.slo import SLO_METRICS, Slo, SloResult, is_good, judge_slo
from llmload.results.tasks import TaskStats, task_stats

__all__ = ["SUMMARY_SCHEMA_VERSION", "Distribution", "TokenStats", "Measures", "ArrivalStats", "Summary", "distribution",
           "token_stats", "measure", "breakdown", "arrival_stats", "summarize", "check_metric_path", "metric_value",
           "metric_ci95"]

SUMMARY_SCHEMA_VERSION = 9


def _with_table_fields(cls: type) -> type:
    """Put the metric tables' fields before ``cls``'s own, before @dataclass reads them: one per run-level figure
    (results/metrics.py's RUN_METRICS held in the run's measures, each with its interval where one is kept), then one
    Distribution per per-request metric (METRICS), in the tables' order. A row added to a table is a field here."""
    own = dict(cls.__annotations__)
    cls.__annotations__ = {**run_metric_fields(MEASURED_RUN_METRICS), **{m.summary: "Distribution" for m in METRICS}, **own}
    return cls


@dataclass(frozen=True)
@_with_table_fields
class Measures:
    """What a set of records measured: the whole run's, or one group's (each effort of a mixed run).

    First the run-level figures of RUN_METRICS (requests, duration_s, the rates with their batch-means intervals,
    shares, counts), then one Distribution per row of METRICS (``response_time_ms``, ``ttft_ms``, ...), each in the
    row's unit, then what follows.
    """

    prompt_tokens: TokenStats
    output_tokens: TokenStats
    reasoning_tokens: TokenStats
    errors: dict[str, int]
    finish_reasons: dict[str, int]
    token_sources: dict[str, int]
    """How many requests took their counts from server usage or from counting the stream."""
    slo: list[SloResult]
    """Each SLO's verdict on these records, with the measured value and its interval."""


LATE_AFTER_S = 0.010
"""A RATE request sent more than this after its scheduled time counts as late."""


@dataclass(frozen=True)
class ArrivalStats:
    """RATE runs: how well the sends kept the schedule."""

    requests_scheduled: int
    scheduled_rate_rps: float | None
    """Scheduled sends per second, first to last due time."""
    send_rate_rps: float | None
    """Actual sends per second, first to last send."""
    send_interval_cv: float | None
    """Coefficient of variation of the gaps between sends: about 1 Poisson, 0 constant, 1/sqrt(BURSTINESS) gamma."""
    dispatch_lag_ms: Distribution
    """Actual minus scheduled send time, a wait for a MAX_CONCURRENCY slot included."""
    late_requests: int
    """Sent more than late_after_ms after their scheduled time."""
    late_after_ms: float
    slot_wait_ms: Distribution


def _per_second(times_s: np.ndarray) -> float | None:
    span_s = float(times_s[-1] - times_s[0]) if times_s.size > 1 else 0.0
    return (times_s.size - 1) / span_s if span_s > 0 else None


def arrival_stats(records: Sequence[RequestRecord]) -> ArrivalStats | None:
    """The schedule kept by ``records`` sent under RATE; None for a closed-loop run."""
    scheduled = [r for r in records if r.scheduled_monotonic_s is not None]
    if not scheduled:
        return None
    sends_s = np.sort([r.start_monotonic_s for r in scheduled])
    gaps_s = np.diff(sends_s)
    lags_s = [r.start_monotonic_s - r.scheduled_monotonic_s for r in scheduled]
    return ArrivalStats(
        requests_scheduled=len(scheduled),
        scheduled_rate_rps=_per_second(np.sort([r.scheduled_monotonic_s for r in scheduled])),
        send_rate_rps=_per_second(sends_s),
        send_interval_cv=float(gaps_s.std() / gaps_s.mean()) if gaps_s.size > 1 and gaps_s.mean() > 0 else None,
        dispatch_lag_ms=distribution(lags_s, 1000.0),
        late_requests=sum(1 for lag in lags_s if lag > LATE_AFTER_S),
        late_after_ms=LATE_AFTER_S * 1000.0,
        slot_wait_ms=distribution([r.slot_wait_s or 0.0 for r in scheduled], 1000.0),
    )


@dataclass(frozen=True)
class Summary(Measures):
    """What a run measured, computed from its raw records only."""

    interrupted_by: str | None = None
    """The first SIGINT or SIGTERM the run got ("SIGINT", "SIGTERM"): no request was sent after it. None: none came."""
    partial: bool = False
    """Rebuilt from samples.jsonl after the run died without writing its summary (``llmload report``)."""
    missing: list[str] = field(default_factory=list)
    """With ``partial``: what the run did not leave behind."""
    by_effort: dict[str, Measures] = field(default_factory=dict)
    """Under EFFORT=mix:... (or records of several efforts), each effort's part; rates over the whole run."""
    by_turn: dict[str, Measures] = field(default_factory=dict)
    """With TURNS: each turn's part ("1", "2", ...: every conversation's first requests, second, ...); rates over the
    whole run. Later turns send the history, so their prompt_tokens grow and the prefix cache decides their TTFT."""
    tasks: TaskStats | None = None
    """With TOOL_ROUNDS above 1: the tasks its rounds made up (results/tasks.py); None otherwise."""
    server_prefix_cache_hit_rate: float | None = None
    """The server's prefix-cache hits over its queries (both in tokens) between the scrapes around the run (vLLM's
    prefix_cache_hits and prefix_cache_queries counters; warm-ups included); None without them."""
    server_failures: ServerFailures | None = None
    """The measured requests the server refused or broke, and its most frequent messages (results/failures.py); None
    when it failed none."""
    cache: CacheAccount | None = None
    """CACHE's intent, what the workload declares shareable, what the server found, and the flag (results/cache.py)."""
    slo_met: bool | None = None
    """Every SLO passed: for the whole run, or under a mix for every effort that sent requests; None without SLO."""
    arrivals: ArrivalStats | None = None
    """RATE runs: the schedule's rate and how far sends lagged it; None in closed loop."""
    stopped_early: str | None = None
    """EARLY_STOP=on: why the run ended before DURATION (an SLO that surely failed); None otherwise."""
    config: dict[str, Any] = field(default_factory=dict)
    generator: GeneratorCheck | None = None
    """The load generator's own state (CPU, read and event-loop lag); None when not observed."""
    server_vs_client: ServerVsClient | None = None
    """The server's own account of the run's window (its /metrics) beside the client's; None without one."""
    delivery: TokenDelivery | None = None
    """How the server delivered its tokens: tokens per token-bearing event, answers that came in one event."""
    warnings: list[str] = field(default_factory=list)
    """What the figures above cannot show, one sentence each (TPOT and ITL of answers sent in one event)."""
    predicted: Predicted | None = None
    """A rehearsal's figures for the GPU it played (by its time scale), with its profile's own error; None for a real
    server."""
    cost: Cost | None = None
    """USD per million tokens and per thousand requests at PRICE (or the GPU's default list price), with intervals."""
    schema_version: int = SUMMARY_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@functools.cache
def check_metric_path(path: str) -> None:
    """Raise ResultsError unless ``path`` (``ttft_ms.median``) names a Summary field, or one inside it."""
    owner: Any = Summary
    for part in path.split("."):
        hints = typing.get_type_hints(owner) if dataclasses.is_dataclass(owner) else {}
        if part not in hints:
            known = ", ".join(f.name for f in dataclasses.fields(owner)) if dataclasses.is_dataclass(owner) else "nothing"
            raise ResultsError(f"unknown metric {path!r}: {part!r} is not one of {known}")
        owner = hints[part]
        if isinstance(owner, types.UnionType):  # ``ArrivalStats | None``: a block a run may lack still names its fields
            (owner,) = [a for a in typing.get_args(owner) if a is not type(None)]


def _owner(summary: Summary, path: str) -> tuple[Any, str]:
    """The record that holds the last part of ``path`` (None when this run has none there), and that part."""
    check_metric_path(path)
    *parents, leaf = path.split(".")
    owner: Any = summary
    for part in parents:
        owner = getattr(owner, part) if owner is not None else None
    return owner, leaf


def metric_value(summary: Summary, path: str) -> float | None:
    """The number at ``path`` (``ttft_ms.median``); None when this run has none. ResultsError for a path naming no number."""
    owner, leaf = _owner(summary, path)
    value = getattr(owner, leaf) if owner is not None else None
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ResultsError(f"metric {path!r} is not a number but {type(value).__name__}: name one inside it")
    return None if value is None else float(value)


def metric_ci95(summary: Summary, path: str) -> tuple[float, float] | None:
    """The 95% interval the summary keeps beside the number at ``path`` (``median_ci95`` beside ``median``), if any."""
    owner, leaf = _owner(summary, path)
    ci = getattr(owner, f"{leaf}_ci95", None) if owner is not None else None
    return None if ci is None else (float(ci[0]), float(ci[1]))


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _run_figures(records: Sequence[RequestRecord], ok: Sequence[RequestRecord], span_s: tuple[float, float],
                 slos: Sequence[Slo]) -> dict[str, Any]:
    """Every run-level figure of RUN_METRICS held in the measures, with its interval where the row keeps one."""
    start_s, end_s = span_s
    duration = end_s - start_s
    ends_s = [r.start_monotonic_s + r.e2e_s for r in ok]
    batches = batches_for(duration, float(np.median([r.e2e_s for r in ok])) if ok else 0.0)
    good = [is_good(r, slos) for r in ok] if slos else []
    figures: dict[str, Any] = {}
    for m in MEASURED_RUN_METRICS:
        ci: list[float] | None = None
        if m.kind == "time":
            value: Any = duration
        elif m.kind == "count":
            assert m.counted is not None
            value = sum(1 for r in records if m.counted(r))
        elif m.kind == "rate":
            assert m.weight is not None
            if m.good_only and not slos:
                value = None
            else:
                weights = [m.weight(r) * (good[i] if m.good_only else 1.0) for i, r in enumerate(ok)]
                value = _ratio(sum(weights), duration) or 0.0
                ci = batch_means_ci(ends_s, weights, start_s, end_s, batches)
        else:
            assert m.numerator is not None and m.denominator is not None
            part, whole = sum(m.numerator(r) for r in ok), sum(m.denominator(r) for r in ok)
            value = _ratio(part, whole)
            ci = proportion_ci(int(part), int(whole)) if m.interval else None
        figures[m.name] = value
        if m.interval:
            figures[f"{m.name}_ci95"] = ci
    return figures


def measure(records: Sequence[RequestRecord], span_s: tuple[float, float], slos: Sequence[Slo] = ()) -> Measures:
    """The Measures of measured (not warm-up) ``records``; rates are over ``span_s`` (start, end)."""
    ok = [r for r in records if r.ok]
    prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    output = [r.completion_tokens for r in ok if r.completion_tokens is not None]
    reasoning = [r.reasoning_tokens for r in ok if r.reasoning_tokens is not None and r.completion_tokens is not None]
    distributions = {m.summary: distribution(m.sample_s(ok), m.scale) for m in METRICS}
    return Measures(
        **_run_figures(records, ok, span_s, slos),
        **distributions,
        prompt_tokens=token_stats(prompt),
        output_tokens=token_stats(output),
        reasoning_tokens=token_stats(reasoning),
        errors=dict(Counter(r.error for r in records if r.error is not None)),
        finish_reasons=dict(Counter(r.finish_reason or "none" for r in ok)),
        token_sources=dict(Counter(r.token_source for r in ok)),
        slo=[judge_slo(slo, distributions[SLO_METRICS[slo.metric].summary], ok) for slo in slos],
    )


def breakdown(records: Sequence[RequestRecord], group_of: Callable[[RequestRecord], str | None], groups: Sequence[str],
              span_s: tuple[float, float], slos: Sequence[Slo] = ()) -> dict[str, Measures]:
    """Each group's Measures, every metric included: ``group_of`` names a record's group (its effort, say) and
    ``groups`` lists them in order, one without records too; rates are over the whole run's ``span_s``."""
    return {group: measure([r for r in records if group_of(r) == group], span_s, slos) for group in groups}


def summarize(records: Iterable[RequestRecord], config: dict[str, Any] | None = None,
              generator: GeneratorCheck | None = None, server_window: Sequence[MetricsSample] = (), *,
              slos: Sequence[Slo] = (), mix_efforts: Sequence[str] = ()) -> Summary:
    """The Summary of a run's records; ``config`` and ``generator`` are copied in as they are.

    ``server_window``: the server's /metrics scraped before the run and after it (two samples), if it has them.
    ``slos``: the run's objectives, parsed (slo.slos_of a config); ``mix_efforts``: the efforts EFFORT=mix:... named
    (efforts.mixed_efforts), each broken down even when it drew no request.
    """
    every = list(records)
    measured = [r for r in every if not r.warmup]
    span_s = run_span_s(measured)
    whole = measure(measured, span_s, slos)
    efforts = _mixed_efforts(measured, mix_efforts)
    by_effort = breakdown(measured, lambda r: r.effort, efforts, span_s, slos)
    turns = sorted({r.turn for r in measured if r.turn is not None})
    by_turn = breakdown(measured, lambda r: None if r.turn is None else str(r.turn), [str(t) for t in turns], span_s, slos)
    judged = [m for m in by_effort.values() if m.requests_ok + m.requests_failed] or [whole]
    slo_met = all(result.passed for m in judged for result in m.slo) if slos else None
    delivery = token_delivery(measured)
    failures = server_failures(measured)
    if failures is not None and failures.server_failed_the_run and generator is not None:
        generator = exonerated(generator, failures.failed_by_server, failures.requests)
    config = dict(config or {})
    served_by = served_by_of(config)
    predicted = predict_played(whole, served_by)
    cost = run_cost(config, predicted or whole, predicted.label if predicted else "measured")
    hit_rate = prefix_cache_hit_rate(server_window[0], server_window[-1]) if len(server_window) >= 2 else None
    return Summary(**{f.name: getattr(whole, f.name) for f in fields(Measures)}, by_effort=by_effort, by_turn=by_turn, predicted=predicted,
                   cost=cost, server_prefix_cache_hit_rate=hit_rate, cache=cache_account(every, config, hit_rate),
                   server_failures=failures,
                   slo_met=slo_met, arrivals=arrival_stats(measured), config=config, generator=generator,
                   # Warm-up requests included: the server served them inside the window too.
                   server_vs_client=(reconcile(server_window[0], server_window[-1], every, generator)
                                     if len(server_window) >= 2 else None),
                   delivery=delivery, warnings=_delivery_warnings(delivery),
                   tasks=task_stats(measured, int(config.get("tool_rounds") or 1)))


def _delivery_warnings(delivery: TokenDelivery) -> list[str]:
    """The metrics timed between token events (TPOT, ITL) cannot be measured on answers that came in one event:
    say so rather than report about 0."""
    if not delivery.one_event_requests:
        return []
    *others, last = [m.label for m in METRICS if m.needs_two_events]
    unmeasurable = f"{', '.join(others)} and {last}" if others else last
    if delivery.every_answer_in_one_event:
        return [f"every answer came in one event ({delivery.tokens_per_event:.1f} tokens per event): {unmeasurable} are "
                "not measurable from the stream, and TTFT is the answer's end; the server's own inter-token latency "
                "is in its account (server_vs_client)"]
    return [f"{delivery.one_event_requests} of {delivery.requests} answers came in one event: {unmeasurable} leave "
            "them out (not measurable)"]


def _mixed_efforts(records: Sequence[RequestRecord], mix_efforts: Sequence[str]) -> list[str]:
    """The efforts a run mixed: the mix's own (drawn or not) then any other recorded; [] for one effort."""
    named = list(mix_efforts)
    recorded = sorted({r.effort for r in records if r.effort is not None} - set(named))
    efforts = named + recorded
    return efforts if len(efforts) > 1 else []
