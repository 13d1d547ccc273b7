"""Pure: the server's own account of a run (two /metrics scrapes around it) beside the client's records.

vLLM's histograms give sums and counts, so the difference of two scrapes is the server's mean over
exactly the run's window. A run is ``suspect`` when the server counted other tokens or requests than
the client sent (other traffic, lost records), or when the client's TTFT exceeds the server's by more
than the network and the chunks before the first token explain.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

from llmload.results.records import RequestRecord
from llmload.results.server_metrics import MetricsSample, counter_increase

__all__ = ["TTFT_ALLOWANCE_MS", "HIDDEN_LEAD_TOKENS", "ServerVsClient", "reconcile"]

TTFT_ALLOWANCE_MS = 50.0
"""Client TTFT above the server's that the network and the first chunk's way back may take; the server's
front end (HTTP, chat template, tokenizing: outside its TTFT) may add as much again as the server's TTFT, as
a busy front end slows with its engine."""
HIDDEN_LEAD_TOKENS = 4
"""Decode steps the server may count before the client sees a token: gpt-oss's harmony header
(<|channel|>analysis<|message|>) is generated first and never streamed, plus one step of slack."""


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


def _window_increase(before: MetricsSample, after: MetricsSample, name: str) -> float | None:
    """The counter's increase over the window; None when a scrape lacks it or the server restarted inside
    the window: what it counted before the restart is gone, so there is nothing to set beside the client's."""
    increase = counter_increase((before, after), name)
    return None if increase is None or increase.restarted else increase.total


def _mean_ms(before: MetricsSample, after: MetricsSample, histogram: str) -> float | None:
    total_s, count = _window_increase(before, after, f"{histogram}_sum_s"), _window_increase(before, after, f"{histogram}_count")
    return 1000.0 * total_s / count if total_s is not None and count else None


def _client_mean_ms(values_s: Sequence[float]) -> float | None:
    return 1000.0 * statistics.fmean(values_s) if values_s else None


def reconcile(before: MetricsSample, after: MetricsSample, records: Sequence[RequestRecord]) -> ServerVsClient | None:
    """The server's account against the client's, or None when the server keeps no request histograms."""
    server_requests = _window_increase(before, after, "e2e_count")
    if server_requests is None:
        return None
    ok = [r for r in records if r.ok]
    client = {"prompt": sum(r.prompt_tokens or 0 for r in ok), "generation": sum(r.completion_tokens or 0 for r in ok)}
    server = {"prompt": _window_increase(before, after, "prompt_tokens_total"),
              "generation": _window_increase(before, after, "generation_tokens_total")}
    server_ttft_ms, server_itl_ms = _mean_ms(before, after, "ttft"), _mean_ms(before, after, "itl")
    client_ttft_ms = _client_mean_ms([r.ttft_s for r in ok if r.ttft_s is not None])
    allowance_ms = (None if server_itl_ms is None or server_ttft_ms is None
                    else TTFT_ALLOWANCE_MS + server_ttft_ms + HIDDEN_LEAD_TOKENS * server_itl_ms)
    reasons = []
    if server_requests != len(ok):
        reasons.append(f"the server finished {server_requests:.0f} requests in the run's window, the client {len(ok)}")
    for kind in ("prompt", "generation"):
        if server[kind] is not None and server[kind] != client[kind]:
            reasons.append(f"the server counted {server[kind]:.0f} {kind} tokens, the client's records {client[kind]}")
    if server_ttft_ms is not None and client_ttft_ms is not None and allowance_ms is not None:
        if client_ttft_ms - server_ttft_ms > allowance_ms:
            reasons.append(f"the client's mean TTFT exceeds the server's by {client_ttft_ms - server_ttft_ms:.1f} ms, "
                           f"more than network and scheduling explain ({allowance_ms:.1f} ms)")
        elif client_ttft_ms < server_ttft_ms:
            reasons.append(f"the client's mean TTFT is {server_ttft_ms - client_ttft_ms:.1f} ms below the server's, "
                           "which no client can see: the server's window holds other requests")
    if len(ok) < len(records):
        reasons = [f"{reason} ({len(records) - len(ok)} requests failed or were cut short: the server may have "
                   "counted them)" for reason in reasons]
    return ServerVsClient(
        server_requests=int(server_requests), client_requests=len(ok),
        server_prompt_tokens=None if server["prompt"] is None else int(server["prompt"]), client_prompt_tokens=client["prompt"],
        server_generation_tokens=None if server["generation"] is None else int(server["generation"]),
        client_generation_tokens=client["generation"],
        server_mean_ttft_ms=server_ttft_ms, client_mean_ttft_ms=client_ttft_ms,
        server_mean_itl_ms=server_itl_ms, client_mean_itl_ms=_client_mean_ms([g for r in ok for g in r.itl_s]),
        server_mean_e2e_ms=_mean_ms(before, after, "e2e"), client_mean_e2e_ms=_client_mean_ms([r.e2e_s for r in ok]),
        server_mean_queue_ms=_mean_ms(before, after, "queue"), ttft_allowance_ms=allowance_ms,
        suspect=bool(reasons), reasons=tuple(reasons))
