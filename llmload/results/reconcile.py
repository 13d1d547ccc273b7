"""Pure: the server's own account of a run (two /metrics scrapes around it) beside the client's records.

vLLM's histograms give sums and counts, so the difference of two scrapes is the server's mean over
exactly the run's window. A run is ``suspect`` when the server counted other tokens or requests than
the client sent (other traffic, lost records), or when the client's TTFT or E2E exceeds the server's
by more than the network and the server's front end explain. Each such gap names the cause the
account points to: a server that sent its tokens in bursts (several in one event, or events together
once its front end fell behind), the client's own lag, or else time spent outside the server's clock
(its front end or the network). Queueing on the server, inside its own
TTFT, is named when it takes most of that TTFT.

The account is read under the names of the engine that served (vLLM, SGLang, trtllm-serve: engine_metrics.py); a
figure that engine does not expose is said (``not_exposed``), never taken as 0, and a figure that means something
else than vLLM's is said too (``notes``: trtllm-serve's ITL is the mean of per-request TPOTs).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Sequence

from llmload.results.delivery import BURST_TOKENS_PER_EVENT, TokenDelivery, token_delivery
from llmload.results.generator import MASTER, GeneratorCheck
from llmload.results.records import RequestRecord
from llmload.results.engine_metrics import not_exposed, notes_of
from llmload.results.server_metrics import MetricsSample, prefix_cache_hit_rate, window_increase
from llmload.timescale import TimeScale

__all__ = ["TTFT_ALLOWANCE_MS", "HIDDEN_LEAD_TOKENS", "E2E_FRONT_END_SHARE", "BURST_GAP_SHARE", "QUEUE_SHARE", "ServerAccount",
           "ServerVsClient", "PLAYED_TIMES", "server_account", "reconcile", "played_account"]

TTFT_ALLOWANCE_MS = 50.0
"""Client TTFT above the server's that the network and the first chunk's way back may take; the server's
front end (HTTP, chat template, tokenizing: outside its TTFT) may add as much again as the server's TTFT, as
a busy front end slows with its engine."""
HIDDEN_LEAD_TOKENS = 4
"""Decode steps the server may count before the client sees a token: gpt-oss's harmony header
(<|channel|>analysis<|message|>) is generated first and never streamed, plus one step of slack."""
E2E_FRONT_END_SHARE = 0.05
"""Client E2E above the server's that the front end may add beyond TTFT_ALLOWANCE_MS, as a share of the
server's E2E: it detokenizes and streams every token outside the engine's clock."""
BURST_GAP_SHARE = 0.1
"""Token events less than this share of the server's mean inter-token latency apart came in one burst."""
QUEUE_SHARE = 0.5
"""Share of the server's own TTFT spent waiting in its queue from which queueing is named as a cause."""
_CLIENT_LAG_SHARE = 0.5
"""The client's lag (p99) explains a gap when it reaches this share of the gap."""


@dataclass(frozen=True)
class ServerAccount:
    """What the server counted between two scrapes of its /metrics: counter increases, histogram means."""

    requests: int
    prompt_tokens: int | None
    generation_tokens: int | None
    mean_ttft_ms: float | None
    mean_itl_ms: float | None
    """Its inter-token latency (older vLLM: time per output token); with one output length for every
    request, also the mean of its per-request TPOT."""
    mean_e2e_ms: float | None
    mean_queue_ms: float | None
    """Time requests waited in its queue (inside its TTFT): a client cannot see it."""
    prefix_cache_hit_rate: float | None = None
    """Its prefix cache's hits over its queries (prompt tokens) in the window; None without both counters."""
    engine: str | None = None
    """Whose metric names it was read under (engine_metrics.py's keys)."""
    not_exposed: tuple[str, ...] = ()
    """The figures it lacks, one sentence each ("generation tokens: not exposed by trtllm-serve (...)")."""
    notes: tuple[str, ...] = ()
    """Its figures that mean something else than vLLM's, one sentence each."""


@dataclass(frozen=True)
class ServerVsClient:
    """Means and totals over the run's window, from the server's /metrics and from the client's records."""

    server_requests: int
    client_requests: int
    """Requests the client saw finish (warm-up included: the server served those too)."""
    server_prompt_tokens: int | None
    client_prompt_tokens: int
    server_generation_tokens: int | None
    client_generation_tokens: int
    server_mean_ttft_ms: float | None
    client_mean_ttft_ms: float | None
    server_mean_itl_ms: float | None
    client_mean_itl_ms: float | None
    server_mean_e2e_ms: float | None
    client_mean_e2e_ms: float | None
    server_mean_queue_ms: float | None
    """Time requests waited in the server's queue: the client cannot see it."""
    ttft_allowance_ms: float | None
    """How far the client's mean TTFT may exceed the server's: TTFT_ALLOWANCE_MS + the server's mean TTFT +
    HIDDEN_LEAD_TOKENS of its mean ITLs."""
    suspect: bool
    reasons: tuple[str, ...]
    """Each ends with the cause the account points to, where it is a gap in time."""
    e2e_allowance_ms: float | None = None
    """How far the client's mean E2E may exceed the server's: TTFT_ALLOWANCE_MS + E2E_FRONT_END_SHARE of it."""
    tokens_per_event: float | None = None
    """The client's output tokens per token-bearing event: about 1 token by token, the answer's length in bursts."""
    tokens_per_burst: float | None = None
    """Output tokens per burst of token events less than BURST_GAP_SHARE of the server's mean ITL apart: about 1
    when its front end keeps up, more when it falls behind its engine and sends what was made meanwhile at once."""
    client_lag_p99_ms: float | None = None
    """The load generator's own lag (the worst p99 of its event-loop and arrival-to-read lags); None unobserved."""
    causes: tuple[str, ...] = ()
    """What the account shows behind the times, one sentence each, named first (bursts, queueing on the server,
    the client's own lag, outside the server's clock)."""
    engine: str | None = None
    """Whose metric names the server's figures were read under (engine_metrics.py's keys: vllm, sglang, trtllm, ...)."""
    not_exposed: tuple[str, ...] = ()
    """The server's figures its engine does not expose (or its metrics lacked), one sentence each: None above, not 0."""
    notes: tuple[str, ...] = ()
    """The server's figures that mean something else than vLLM's, one sentence each."""


def _window_increase(before: MetricsSample, after: MetricsSample, name: str) -> float | None:
    """The counter's increase over the window; None when a scrape lacks it or the server restarted inside
    the window: what it counted before the restart is gone, so there is nothing to set beside the client's."""
    increase = window_increase(before, after, name)
    return None if increase is None or increase.restarted else increase.total


def _mean_ms(before: MetricsSample, after: MetricsSample, histogram: str) -> float | None:
    total_s, count = _window_increase(before, after, f"{histogram}_sum_s"), _window_increase(before, after, f"{histogram}_count")
    return 1000.0 * total_s / count if total_s is not None and count else None


def _count(before: MetricsSample, after: MetricsSample, name: str) -> int | None:
    value = _window_increase(before, after, name)
    return None if value is None else int(value)


def server_account(before: MetricsSample, after: MetricsSample) -> ServerAccount | None:
    """The server's account of the window between two scrapes; None when it keeps no request histograms."""
    requests = _count(before, after, "e2e_count")
    if requests is None:
        return None
    return ServerAccount(requests=requests, prompt_tokens=_count(before, after, "prompt_tokens_total"),
                         generation_tokens=_count(before, after, "generation_tokens_total"),
                         mean_ttft_ms=_mean_ms(before, after, "ttft"), mean_itl_ms=_mean_ms(before, after, "itl"),
                         mean_e2e_ms=_mean_ms(before, after, "e2e"), mean_queue_ms=_mean_ms(before, after, "queue"),
                         prefix_cache_hit_rate=prefix_cache_hit_rate(before, after), engine=after.engine,
                         not_exposed=not_exposed(after.engine, lambda name: getattr(after, name) is not None, _FIGURES),
                         notes=notes_of(after.engine, _FIGURES))


_FIGURES = ("requests finished", "prompt tokens", "generation tokens", "TTFT", "ITL", "E2E", "queue time",
            "prefix-cache hit rate", "preemptions", "KV-cache usage")
"""The figures of the account, and the two the suite's other summaries read from the same metrics (sweep, capacity):
engine_metrics.ACCOUNT_FIGURES' names."""


PLAYED_TIMES = ("server_mean_ttft_ms", "client_mean_ttft_ms", "server_mean_itl_ms", "client_mean_itl_ms",
                "server_mean_e2e_ms", "client_mean_e2e_ms", "server_mean_queue_ms", "ttft_allowance_ms", "e2e_allowance_ms")
"""The account's times of the requests served, each of kind "time": a rehearsal's are the target's, sped up. The load
generator's own lag (client_lag_p99_ms) is the load machine's, and stays as it is."""


def played_account(account: ServerVsClient, scale: TimeScale) -> ServerVsClient:
    """The account as the GPU a rehearsal played would show it: every time in PLAYED_TIMES by the run's time scale
    (x SPEEDUP); counts and tokens per event as they are. The reasons keep the target's clock they were judged on."""
    return replace(account, **{name: scale.played(getattr(account, name), "time") for name in PLAYED_TIMES})


def _client_mean_ms(values_s: Sequence[float]) -> float | None:
    return 1000.0 * statistics.fmean(values_s) if values_s else None


def _client_lag_p99_ms(generator: GeneratorCheck | None) -> float | None:
    """The worst p99 lag of the processes that send and read (a master's lag delays no measurement)."""
    lags = [lag.p99 for p in generator.processes if p.name != MASTER
            for lag in (p.event_loop_lag_ms, p.arrival_to_read_lag_ms) if lag.p99 is not None] if generator else []
    return max(lags, default=None)


def _tokens_per_burst(records: Sequence[RequestRecord], min_gap_s: float) -> float | None:
    """Output tokens per run of token events less than ``min_gap_s`` apart (successful requests of 2+ tokens)."""
    counted = [r for r in records if r.ok and (r.completion_tokens or 0) >= 2 and r.token_events]
    bursts = sum(1 + sum(1 for gap in r.itl_s if gap >= min_gap_s) for r in counted)
    return sum(r.completion_tokens or 0 for r in counted) / bursts if bursts else None


def _gap_cause(gap_ms: float, first_token: bool, delivery: TokenDelivery, tokens_per_burst: float | None,
               generator: GeneratorCheck | None, lag_ms: float | None) -> tuple[str, str]:
    """(name, evidence) of what explains a client time ``gap_ms`` above the server's."""
    if first_token and delivery.bursts:  # several tokens in one event: the server's doing, whatever the client's lag
        return "bursts", (f"bursts: the server sent its tokens in bursts ({delivery.describe()}): the client sees "
                          "the first token only when its burst arrives, after the server counted it")
    limited = generator is not None and generator.generator_limited
    if limited or (lag_ms is not None and lag_ms >= _CLIENT_LAG_SHARE * gap_ms):
        why = f": {generator.cause}" if generator is not None and limited and generator.cause else ""
        return "the client's own lag", (f"the client's own lag: the load generator's lag p99 {lag_ms or 0:.1f} ms"
                                        + (f" (it limited the run{why})" if limited else ""))
    if first_token and tokens_per_burst is not None and tokens_per_burst >= BURST_TOKENS_PER_EVENT:
        return "bursts", (f"bursts: the server's front end fell behind its engine and sent the token events made "
                          f"meanwhile together ({tokens_per_burst:.1f} tokens per burst of events under "
                          f"{BURST_GAP_SHARE:.0%} of its inter-token latency apart): the first token came with later ones")
    lag = f"the client's lag p99 {lag_ms:.1f} ms" if lag_ms is not None else "the client's lag unobserved"
    return "outside the server's clock", (
        f"outside the server's clock: {lag}, {delivery.tokens_per_event or 0:.1f} tokens per event; the time "
        "lies in the server's front end (HTTP, chat template and tokenizing before its clock starts; detokenizing "
        "and streaming after it stops) or on the network")


def reconcile(before: MetricsSample, after: MetricsSample, records: Sequence[RequestRecord],
              generator: GeneratorCheck | None = None) -> ServerVsClient | None:
    """The server's account against the client's, or None when the server keeps no request histograms.

    ``generator``: the load generator's own state, which tells whether the client's lag explains a gap.
    """
    server = server_account(before, after)
    if server is None:
        return None
    ok = [r for r in records if r.ok]
    delivery = token_delivery(ok)
    lag_ms = _client_lag_p99_ms(generator)
    tokens_per_burst = (None if server.mean_itl_ms is None
                        else _tokens_per_burst(ok, BURST_GAP_SHARE * server.mean_itl_ms / 1000.0))
    client = {"prompt": sum(r.prompt_tokens or 0 for r in ok), "generation": sum(r.completion_tokens or 0 for r in ok)}
    counted = {"prompt": server.prompt_tokens, "generation": server.generation_tokens}
    client_ttft_ms = _client_mean_ms([r.ttft_s for r in ok if r.ttft_s is not None])
    client_e2e_ms = _client_mean_ms([r.e2e_s for r in ok])
    ttft_allowance_ms = (None if server.mean_itl_ms is None or server.mean_ttft_ms is None
                         else TTFT_ALLOWANCE_MS + server.mean_ttft_ms + HIDDEN_LEAD_TOKENS * server.mean_itl_ms)
    e2e_allowance_ms = None if server.mean_e2e_ms is None else TTFT_ALLOWANCE_MS + E2E_FRONT_END_SHARE * server.mean_e2e_ms
    reasons, causes = [], []

    def gap(what: str, client_ms: float | None, server_ms: float | None, allowance_ms: float | None) -> None:
        if client_ms is None or server_ms is None or allowance_ms is None or client_ms - server_ms <= allowance_ms:
            return
        name, evidence = _gap_cause(client_ms - server_ms, what == "TTFT", delivery, tokens_per_burst, generator, lag_ms)
        reasons.append(f"the client's mean {what} exceeds the server's by {client_ms - server_ms:.1f} ms, more than "
                       f"the network and the server's front end explain ({allowance_ms:.1f} ms): cause: {name}")
        if evidence not in causes:
            causes.append(evidence)

    if server.requests != len(ok):
        reasons.append(f"the server finished {server.requests} requests in the run's window, the client {len(ok)}")
    for kind in ("prompt", "generation"):
        if counted[kind] is not None and counted[kind] != client[kind]:
            reasons.append(f"the server counted {counted[kind]} {kind} tokens, the client's records {client[kind]}")
    gap("TTFT", client_ttft_ms, server.mean_ttft_ms, ttft_allowance_ms)
    if server.mean_ttft_ms is not None and client_ttft_ms is not None and client_ttft_ms < server.mean_ttft_ms:
        reasons.append(f"the client's mean TTFT is {server.mean_ttft_ms - client_ttft_ms:.1f} ms below the server's, "
                       "which no client can see: the server's window holds other requests")
    gap("E2E", client_e2e_ms, server.mean_e2e_ms, e2e_allowance_ms)
    if server.mean_queue_ms is not None and server.mean_ttft_ms and server.mean_queue_ms >= QUEUE_SHARE * server.mean_ttft_ms:
        causes.append(f"queueing on the server: requests waited {server.mean_queue_ms:.1f} ms in its queue, "
                      f"{server.mean_queue_ms / server.mean_ttft_ms:.0%} of its own mean TTFT: more requests came "
                      "than it runs at once")
    if len(ok) < len(records):
        reasons = [f"{reason} ({len(records) - len(ok)} requests failed or were cut short: the server may have "
                   "counted them)" for reason in reasons]
    return ServerVsClient(
        server_requests=server.requests, client_requests=len(ok),
        server_prompt_tokens=server.prompt_tokens, client_prompt_tokens=client["prompt"],
        server_generation_tokens=server.generation_tokens, client_generation_tokens=client["generation"],
        server_mean_ttft_ms=server.mean_ttft_ms, client_mean_ttft_ms=client_ttft_ms,
        server_mean_itl_ms=server.mean_itl_ms, client_mean_itl_ms=_client_mean_ms([g for r in ok for g in r.itl_s]),
        server_mean_e2e_ms=server.mean_e2e_ms, client_mean_e2e_ms=client_e2e_ms,
        server_mean_queue_ms=server.mean_queue_ms, ttft_allowance_ms=ttft_allowance_ms,
        suspect=bool(reasons), reasons=tuple(reasons), e2e_allowance_ms=e2e_allowance_ms,
        tokens_per_event=delivery.tokens_per_event, tokens_per_burst=tokens_per_burst, client_lag_p99_ms=lag_ms,
        causes=tuple(causes), engine=server.engine, not_exposed=server.not_exposed, notes=server.notes)
