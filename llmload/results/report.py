"""The result block printed after a run, laid out like vLLM's ``bench serve`` (its metrics first, then ours), plus
reasoning figures.

A figure with a 95% interval in summary.json has it printed after it as ``[lo, hi]``; a figure
without one (too few samples, or an older summary) prints alone. An SLO's verdict reads PASS or FAIL, with a ``?``
when its interval straddles the limit.
"""

from __future__ import annotations

from typing import Any, Sequence

from llmload.results.generator import GeneratorCheck, LagMs, ProcessCheck, limit_warning
from llmload.results.metrics import MONEY_METRICS, VLLM_FIRST, Metric
from llmload.results.predicted import PREDICTED_RUN_METRICS
from llmload.results.slo import verdict_word
from llmload.timescale import REAL_TIME, TimeScale, time_scale_of
from llmload.results.provenance import is_rehearsal, served_by_of, served_by_text
from llmload.results.engine_metrics import title_of
from llmload.results.reconcile import ServerVsClient, played_account
from llmload.results.summary import ArrivalStats, Distribution, Measures, Summary

__all__ = ["format_result", "fail_ratio_line", "figure_text"]

_WIDTH = 50


def _rule(title: str = "", fill: str = "-") -> str:
    return f"{title:{fill}^{_WIDTH}}" if title else fill * _WIDTH


def _number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _row(label: str, value: Any, digits: int = 2) -> str:
    return f"{label:<40}{_number(value, digits):<10}"


def _interval(ci: Sequence[float] | None) -> str:
    return f" [{_number(ci[0])}, {_number(ci[1])}]" if ci else ""


def figure_text(value: float | None, ci: Sequence[float | None] | None = None, model_error: float | None = None,
                digits: int = 4) -> str:
    """``v [lo, hi]``: a figure and its sampling interval, and for a prediction ``model ±e%``, its profile's own error."""
    if value is None:
        return "n/a"
    text = f"{value:.{digits}g}"
    if ci and ci[0] is not None:
        text += f" [{ci[0]:.{digits}g}, {'n/a' if ci[1] is None else f'{ci[1]:.{digits}g}'}]"
    return text + (f" model ±{model_error:.0%}" if model_error is not None else "")


def _with_ci(label: str, record: Any, name: str) -> str:
    """A row for ``record.<name>`` followed by its interval ``record.<name>_ci95`` when it has one."""
    return _row(label, getattr(record, name)) + _interval(getattr(record, f"{name}_ci95"))


def _latency(part: Measures, metric: Metric, one_event: bool) -> list[str]:
    """A metric's rows; ``one_event``: every answer came in one event, so one timed between events has nothing to time."""
    d: Distribution = getattr(part, metric.summary)
    name = f"{metric.label} ({metric.unit})"
    if one_event and metric.needs_two_events:
        return [_rule(metric.heading), _row(f"Mean {name}:", "not measurable (every answer came in one event)")]
    return [
        _rule(metric.heading),
        _row(f"Mean {name}:", d.mean),
        _with_ci(f"Median {name}:", d, "median"),
        _with_ci(f"P90 {name}:", d, "p90"),
        _with_ci(f"P99 {name}:", d, "p99"),
    ]


def _server_failed(summary: Summary) -> list[str]:
    """The requests the server refused or broke, said first, with its most frequent messages as it wrote them."""
    failures = summary.server_failures
    if failures is None:
        return []
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(failures.by_category.items()))
    head = "THE SERVER FAILED THIS RUN" if failures.server_failed_the_run else "The server failed some requests"
    lines = [f"{head}: {failures.failed_by_server} of {failures.requests} requests refused or broken ({kinds}); its "
             "messages, most frequent first:"]
    lines += [f"  {m.count} x {m.category}: {m.message}" for m in failures.messages]
    return lines


def _status(summary: Summary) -> list[str]:
    """Lines saying the run did not reach its end: stopped by a signal, or rebuilt after it died."""
    lines = []
    if summary.interrupted_by:
        lines.append(_row("Stopped early by:", f"{summary.interrupted_by} (streams in flight were finished or cut)"))
    if summary.partial:
        lines.append(_row("PARTIAL, rebuilt from samples.jsonl:", "missing " + "; ".join(summary.missing)))
    return lines


def _load(config: dict[str, Any]) -> str:
    """users=N (closed loop), with RATE the arrival process, with TRACE the trace and its speed, and any
    MAX_CONCURRENCY cap; then the conversations' turns and think time, and the shared prefixes, when the run had them."""
    cap = f" max_concurrency={config['max_concurrency']}" if config.get("max_concurrency") else ""
    if config.get("trace"):
        limit = f" first {config['trace_limit']} rows" if config.get("trace_limit") else ""
        return f"trace={config['trace']}{limit} at {config.get('trace_speed') or 1:g}x{cap}"
    if config.get("rate"):
        shape = f" burstiness={config.get('burstiness'):g}" if config.get("arrivals") == "gamma" else ""
        load = f"rate={config['rate']:g}/s {config.get('arrivals')}{shape}{cap}"
    else:
        load = f"users={config.get('users')}"
    if str(config.get("turns") or "1") != "1":
        load += f" turns={config['turns']} think_time={config.get('think_time')}"
    if config.get("prefix_tokens"):
        load += f" prefix_tokens={config['prefix_tokens']}x{config.get('prefix_groups') or 1}"
    return load


def _arrival_rows(arrivals: ArrivalStats) -> list[str]:
    """RATE runs: the schedule kept, the dispatch lag, late requests and slot waits."""
    a = arrivals
    return [
        _rule("Open-loop arrivals"),
        _row("Scheduled rate (req/s):", a.scheduled_rate_rps),
        _row("Send rate (req/s):", a.send_rate_rps),
        _row("Send gaps' coefficient of variation:", a.send_interval_cv),
        _row("Median dispatch lag (ms):", a.dispatch_lag_ms.median),
        _row("P99 dispatch lag (ms):", a.dispatch_lag_ms.p99),
        _row(f"Sent over {a.late_after_ms:g} ms late:", f"{a.late_requests} of {a.requests_scheduled}"),
        _row("P99 wait for a free slot (ms):", a.slot_wait_ms.p99),
    ]


def _slo_rows(part: Measures, scale: TimeScale = REAL_TIME) -> list[str]:
    """Goodput and each SLO's verdict, value and interval (nothing for a run without SLO); a sped-up rehearsal's
    values as the played GPU's (its time scale's), the clock the limits were given on."""
    if not part.slo:
        return []
    rows = [_with_ci("Goodput (req/s):", part, "goodput_rps")]
    for result in part.slo:
        verdict = verdict_word(result)
        value = "" if result.value_ms is None else (f"{_number(scale.played(result.value_ms, 'time'))} ms"
                                                    f"{_interval(scale.played_interval(result.value_ms_ci95, 'time'))}")
        missing = (f" ({result.requests_unmeasurable} of {part.requests_ok} requests not measurable: no {result.slo.split('_')[0]}"
                   " value, counted against the limit)") if result.requests_unmeasurable else ""
        rows.append(f"{'SLO ' + result.slo + ':':<40}{verdict:<6}{value}{missing}")
    return rows


def _group_part(title: str, part: Measures, requests_ok: int, scale: TimeScale) -> list[str]:
    """One group's rows (an effort of a mixed run): its share, rate, and each per-request metric's median and p90."""
    share = f" ({part.requests_ok / requests_ok:.1%})" if requests_ok else ""
    rows = [_rule(f"{title}{share}"), _row("Successful requests:", part.requests_ok),
            _row("Failed requests:", part.requests_failed), _with_ci("Request throughput (req/s):", part, "rps")]
    for metric in (m for m in VLLM_FIRST if not m.pooled):
        d, name = getattr(part, metric.summary), f"{metric.label} ({metric.unit})"
        rows += [_with_ci(f"Median {name}:", d, "median"), _with_ci(f"P90 {name}:", d, "p90")]
    return rows + _slo_rows(part, scale)


def _cache_rows(summary: Summary) -> list[str]:
    """CACHE's intent and reset, the hit rates the workload declares, the server and the answers report, the prompts
    sent again; a cold run's hit rate above the declared one is flagged first."""
    cache = summary.cache
    if cache is None:
        rate = summary.server_prefix_cache_hit_rate
        return [] if rate is None else [_rule("Prefix cache"), _row("Server's prefix-cache hit rate:", _share(rate))]
    rows = [_rule("Prefix cache"), _row("CACHE (intent), reset:", f"{cache.intent}, {cache.reset}"),
            _row("Hit rate declared by the workload:", _share(cache.declared_hit_rate)),
            _row("Server's prefix-cache hit rate:", _share(cache.server_hit_rate)),
            _row("Answers' cached prompt tokens:", _share(cache.client_hit_rate))]
    if cache.prompts_reused:
        again = "each with a nonce in front: the set ran out of fresh prompts" if cache.intent == "cold" else "on purpose"
        rows.append(_row("Prompts sent again:", f"{cache.prompts_reused} ({again})"))
    if cache.suspect:
        rows.append(f"CACHE SUSPECT: {cache.reason}")
    return rows


def _turn_rows(summary: Summary) -> list[str]:
    """With TURNS: a row per turn, its requests, mean prompt tokens (the history grows), TTFT and TTFVT (the prefix
    cache, above, decides the later turns' TTFT)."""
    if not summary.by_turn:
        return []
    rows = [_rule("Conversations, by turn")]
    if summary.by_turn:
        rows.append(f"{'Turn':<6}{'Requests':<10}{'Prompt tok':<12}{'TTFT p50/p90 ms':<20}TTFVT p50/p90 ms")
    for turn, part in summary.by_turn.items():
        ttft, ttfvt = (f"{_number(d.median)} / {_number(d.p90)}" for d in (part.ttft_ms, part.ttfvt_ms))
        rows.append(f"{turn:<6}{part.requests_ok:<10}{_number(part.prompt_tokens.mean, 0):<12}{ttft:<20}{ttfvt}")
    return rows


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _structured_rows(summary: Summary) -> list[str]:
    """With RESPONSE_FORMAT: the share of answers that were what it asks, with its interval, and that parsed as JSON."""
    if summary.answer_valid_ratio is None and not summary.config.get("response_format"):
        return []
    ci = summary.answer_valid_ratio_ci95
    return [_rule(f"Structured output ({summary.config.get('response_format') or '?'})"),
            _row("Answers valid (RESPONSE_FORMAT):", _share(summary.answer_valid_ratio))
            + (f" [{_share(ci[0])}, {_share(ci[1])}]" if ci else ""),
            _row("Answers that parsed as JSON:", _share(summary.answer_json_ratio))]


def _max_tokens(config: dict[str, Any]) -> str:
    """What was sent: a prompt set such as random:IN:OUT sets max_tokens per prompt, over MAX_TOKENS."""
    by_prompt = (config.get("prompt_overrides") or {}).get("max_tokens")
    if by_prompt:
        return f"{by_prompt} (set by each prompt" + (f"; MAX_TOKENS={config['max_tokens']} not sent)" if config.get("max_tokens") else ")")
    return str(config.get("max_tokens") or "server default")


def _pair(server: Any, client: Any) -> str:
    return f"{_number(server)} / {_number(client)}"


def _server_account(account: ServerVsClient | None, scale: TimeScale = REAL_TIME,
                    missing: str | None = None) -> list[str]:
    """The server's own metrics over the run's window beside the client's figures, and the verdict; a rehearsal's
    times predicted for the GPU it played, like every other figure, with the raw (the target's) beside them. A figure
    the engine does not expose reads "not exposed", and each is said below; no account at all says why (``missing``)."""
    if account is None:
        return [_rule("Server's own account"), f"None: {missing}"] if missing else []
    a = played_account(account, scale)
    unexposed = {line.split(":", 1)[0]: "not exposed" if "not exposed" in line else "absent" for line in a.not_exposed}

    def pair(figure: str, server: Any, client: Any) -> str:
        return f"{unexposed[figure]} / {_number(client)}" if server is None and figure in unexposed else _pair(server, client)

    def times(label: str, figure: str, server: str, client: str) -> str:
        row = _row(label, pair(figure, getattr(a, server), getattr(a, client)))
        return row + (f"  raw: {pair(figure, getattr(account, server), getattr(account, client))}" if scale.sped_up else "")

    verdict = "SUSPECT: " + "; ".join(a.reasons) if a.suspect else "no (counts equal, TTFT and E2E within reach)"
    whose = f"{title_of(a.engine)}'s metrics" if a.engine else "/metrics"
    title = f"Server's own account ({whose}): predicted server / client" if scale.sped_up else \
        f"Server's own account ({whose}): server / client"
    queue = _row("Mean queue time, server only (ms):", unexposed.get("queue time") if a.server_mean_queue_ms is None
                 else a.server_mean_queue_ms) + (
        f"  raw: {_number(account.server_mean_queue_ms)}" if scale.sped_up else "")
    return [
        _rule(title),
        *([f"Times predicted for the GPU played ({scale.conversion_text()}); raw: the target's ({scale.text()})"]
          if scale.sped_up else []),
        _row("Requests finished:", pair("requests finished", a.server_requests, a.client_requests)),
        _row("Prompt tokens:", pair("prompt tokens", a.server_prompt_tokens, a.client_prompt_tokens)),
        _row("Generation tokens:", pair("generation tokens", a.server_generation_tokens, a.client_generation_tokens)),
        times("Mean TTFT (ms):", "TTFT", "server_mean_ttft_ms", "client_mean_ttft_ms"),
        times("Mean ITL (ms):", "ITL", "server_mean_itl_ms", "client_mean_itl_ms"),
        times("Mean E2EL (ms):", "E2E", "server_mean_e2e_ms", "client_mean_e2e_ms"),
        queue,
        _row("Tokens per event / per burst, client:", f"{_number(a.tokens_per_event, 1)} / {_number(a.tokens_per_burst, 1)}"),
        f"Suspect: {verdict}" + (" (judged on the target's clock)" if a.suspect and scale.sped_up else ""),
        *(f"Cause found: {cause}" for cause in a.causes),
        *(f"Not exposed: {line}" for line in a.not_exposed),
        *(f"Note: {line}" for line in a.notes),
    ]


def format_result(summary: Summary) -> str:
    """The block for a run's summary."""
    config = summary.config
    answered = summary.answered_ratio
    reasoning_share = summary.reasoning_ratio
    served_by = served_by_of(config)
    rehearsal = is_rehearsal(served_by)
    one_event = summary.delivery is not None and summary.delivery.every_answer_in_one_event
    lines = [
        _rule(" REHEARSAL: Serving Benchmark Result " if rehearsal else " Serving Benchmark Result ", "="),
        *_server_failed(summary),
        *_status(summary),
        f"{'':<50}[95% interval]",
        _row("Target:", f"{config.get('host', '')} ({config.get('model', '')})"),
        "Served by: " + served_by_text(served_by),
        *([f"Prediction: {summary.predicted.validation}"] if summary.predicted and not summary.predicted.validated else []),
        _row("Options:", f"gpu={config.get('gpu')} effort={config.get('effort')} {_load(config)} "
             f"max_tokens={_max_tokens(config)} client={config.get('client')} api={config.get('api') or 'chat'}"),
        _row("Successful requests:", summary.requests_ok),
        _row("Failed requests:", summary.requests_failed),
        _row("Interrupted at the end:", summary.requests_interrupted),
        _row("Benchmark duration (s):", summary.duration_s),
        _row("Total input tokens:", summary.prompt_tokens.total),
        _row("Total generated tokens:", summary.output_tokens.total),
        _with_ci("Request throughput (req/s):", summary, "rps"),
        _with_ci("Output token throughput (tok/s):", summary, "output_throughput_tok_s"),
        _with_ci("Total token throughput (tok/s):", summary, "total_throughput_tok_s"),
        *(line for metric in VLLM_FIRST for line in _latency(summary, metric, one_event)),
        _rule("Reasoning"),
        _row("Mean reasoning tokens:", summary.reasoning_tokens.mean, 1),
        _row("Reasoning share of output:", None if reasoning_share is None else f"{reasoning_share:.1%}"),
        _row("Requests with a visible answer:", None if answered is None else f"{answered:.1%}"),
        _row("Answers lost to max_tokens:", summary.lost_to_max_tokens),
        *_structured_rows(summary),
    ]
    if summary.arrivals:
        lines += _arrival_rows(summary.arrivals)
    if summary.slo:
        lines += [_rule("Service-level objectives"), *_slo_rows(summary, time_scale_of(config)),
                  _row("SLOs met" + (" by every effort:" if summary.by_effort else ":"), "yes" if summary.slo_met else "no")]
        if (scale := time_scale_of(config)).sped_up:
            lines.append(f"Values above are predicted for the GPU played ({scale.conversion_text()}); each limit was "
                         f"judged on the target's clock ({scale.text()})")
        if summary.stopped_early:
            lines.append(f"Ended before DURATION: {summary.stopped_early}")
    lines += _predicted_rows(summary) + _cost_rows(summary)
    for effort, part in summary.by_effort.items():
        lines += _group_part(f"Effort {effort}", part, summary.requests_ok, time_scale_of(config))
    lines += _cache_rows(summary) + _turn_rows(summary)
    lines += _server_account(summary.server_vs_client, time_scale_of(config),
                             (config.get("server_metrics") or {}).get("missing"))
    if summary.errors:
        lines.append(_row("Errors:", ", ".join(f"{k}={v}" for k, v in sorted(summary.errors.items()))))
    generator = summary.generator
    if generator:
        lines += _generator(generator)
    lines.append(_rule(fill="="))
    warning = limit_warning(generator) if generator else None
    if warning:
        lines.append(warning)
    lines += [f"warning: {text}" for text in summary.warnings]
    if summary.cache is not None and summary.cache.suspect:
        lines.append(f"warning: CACHE SUSPECT: {summary.cache.reason}")
    return "\n".join(lines)


def _predicted_rows(summary: Summary) -> list[str]:
    """A rehearsal: its figures for the GPU it played, each with its sampling interval, its model's error and the raw
    figure beside it; first, in words, how far the model was validated."""
    p = summary.predicted
    if p is None:
        return []
    rows = [_rule(f"Predicted for {p.gpu}"), f"Figures {p.label}", f"Model: {p.validation}",
            f"{'':<40}predicted [95% sampling interval] model error  raw"]

    def row(label: str, value: float | None, ci: Sequence[float] | None, error: float | None, raw: float | None) -> str:
        model = "UNVALIDATED" if not p.validated else "n/a" if error is None else f"±{error:.0%}"
        return f"{label:<40}{_number(value)}{_interval(ci)}  model {model}  raw: {_number(raw)}"

    for m in PREDICTED_RUN_METRICS:
        if m.interval:
            rows.append(row(f"{m.label}:", getattr(p, m.name), getattr(p, f"{m.name}_ci95"), p.model_error.get(m.name),
                            getattr(summary, m.name)))
    for metric in VLLM_FIRST:
        played, measured = getattr(p, metric.summary), getattr(summary, metric.summary)
        for stat in ("median", "p90"):
            rows.append(row(f"{stat.capitalize()} {metric.label} ({metric.unit}):", getattr(played, stat),
                            getattr(played, f"{stat}_ci95"), p.model_error.get(metric.summary), getattr(measured, stat)))
    return rows


def _cost_rows(summary: Summary) -> list[str]:
    """Each money row of the metric table, with its interval (and a prediction's model error), and where the price
    came from."""
    cost, p = summary.cost, summary.predicted
    if cost is None:
        return []
    if cost.usd_per_gpu_hour is None:
        return [_rule("Cost"), f"No cost: {cost.price_source}"]
    rows = [_rule("Cost"), _row("USD per GPU-hour x GPUs:", f"{cost.usd_per_gpu_hour:g} x {cost.gpus}"),
            f"Price: {cost.price_source}", f"Priced at the rates {cost.basis}"]
    for m in MONEY_METRICS:
        if getattr(cost, m.name) is not None:
            error = p.model_error.get(m.prices) if p is not None and p.validated else None
            unvalidated = "  model UNVALIDATED" if p is not None and not p.validated else ""
            rows.append(_with_ci(f"{m.label}:", cost, m.name) + (f"  model ±{error:.0%}" if error is not None else "")
                        + unvalidated)
    return rows


def _lag(lag: LagMs) -> str:
    if lag.count == 0:
        return "n/a"
    return f"{lag.p50:.2f} / {lag.p99:.2f} / {lag.max:.2f}"


def _generator(generator: GeneratorCheck) -> list[str]:
    """The generator's own figures, one group per process."""
    lines = []
    several = len(generator.processes) > 1
    for p in generator.processes:
        lines += [
            _rule(f"Load generator: {p.name}" if several else "Load generator"),
            _row("CPU (cores):", p.cpu_cores),
            _row("CPU per event read (us):", p.cpu_per_event_us),
            _row("Machine cores busy, all / others:", _machine(p)),
            _row("Events per read (mean/max):", f"{p.events_per_read or 0:.2f} / {p.max_events_per_read}"),
            _row("Arrival-to-read lag p50/p99/max (ms):", _lag(p.arrival_to_read_lag_ms)),
            _row("Event-loop lag p50/p99/max (ms):", _lag(p.event_loop_lag_ms)),
        ]
    limited = f"yes ({generator.cause})" if generator.generator_limited and generator.cause else (
        "yes" if generator.generator_limited else "no")
    lines.append(_row("Generator limited the run:", limited))
    return lines


def _machine(p: ProcessCheck) -> str:
    if p.machine_busy_cores is None or not p.machine_cores:
        return "n/a"
    return f"{p.machine_busy_cores:.2f} of {p.machine_cores} / {p.others_cores or 0.0:.2f}"


def fail_ratio_line(summary: Summary, limit: float) -> str | None:
    """One line when the run's failed share passed MAX_FAIL_RATIO (or it stopped for that), else None."""
    ok, failed = summary.requests_ok, summary.requests_failed
    stopped = summary.config.get("stopped_by") == "MAX_FAIL_RATIO"
    if not (stopped or (limit and failed and failed / (ok + failed) > limit)):
        return None
    when = "the run was stopped early" if stopped else "the run's results are mostly failures"
    kinds = ", ".join(f"{kind} {n}" for kind, n in summary.errors.items() if kind != "interrupted")
    return (f"MAX_FAIL_RATIO={limit:g} passed: {failed} of {ok + failed} requests failed ({kinds}); "
            f"{when}. Fix the server or raise MAX_FAIL_RATIO (0: never stop)")
