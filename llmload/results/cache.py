"""The prefix cache's account of a run: what the run intended (CACHE), what its workload declares shareable, and what
the server (and the answers' usage) reported; a hit rate above the declared one is flagged, like SUSPECT.

A run with CACHE=cold sends no prompt the server has seen in the study, so the server may only find what the
workload itself shares: the chat frame, the set's shared prefixes, a conversation's history (each request's
``declared_cached_tokens``). A higher hit rate means prompts of an earlier run (or of another tool) were cached:
its TTFT and throughput are better than a cold server's. CACHE=warm repeats prompts on purpose: nothing is flagged.
Pure: records and figures in, an account out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from llmload.results.records import RequestRecord

__all__ = ["CacheAccount", "cache_account", "SUSPECT_MARGIN"]

SUSPECT_MARGIN = 0.05
"""A hit rate this much above the declared one (as a share of prompt tokens) is flagged."""


@dataclass(frozen=True)
class CacheAccount:
    """What the run intended of the server's prefix cache and what it found."""

    intent: str
    """cold, warm, or ``not recorded`` (results from before CACHE)."""
    reset: str
    """CACHE_RESET's outcome: off, done before the run, or why the server could not."""
    declared_hit_rate: float | None
    """The share of the prompt tokens the workload declares shareable (chat frame, shared prefixes, history)."""
    server_hit_rate: float | None
    """The server's prefix-cache hits over its queries between the scrapes around the run (vLLM's counters)."""
    client_hit_rate: float | None
    """The answers' own cached prompt tokens over their prompt tokens (usage.prompt_tokens_details), where given."""
    prompts_reused: int
    """Requests whose prompt was sent before in the run (CACHE=cold: with a nonce in front, the set ran out)."""
    suspect: bool
    """CACHE=cold, and the server found more cached than the workload declares."""
    reason: str | None


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def cache_account(records: Sequence[RequestRecord], config: dict[str, Any],
                  server_hit_rate: float | None) -> CacheAccount:
    """The account of ``records`` (warm-ups included: the server cached them too)."""
    sent = [r for r in records if r.ok and r.prompt_tokens]
    declared = [r for r in sent if r.declared_cached_tokens is not None]
    declared_rate = _share(sum(min(r.declared_cached_tokens or 0, r.prompt_tokens or 0) for r in declared),
                           sum(r.prompt_tokens or 0 for r in declared))
    told = [r for r in sent if r.cached_tokens is not None]
    client_rate = _share(sum(r.cached_tokens or 0 for r in told), sum(r.prompt_tokens or 0 for r in told))
    intent = str(config.get("cache") or "not recorded")
    observed, whose = (server_hit_rate, "the server") if server_hit_rate is not None else (client_rate, "the answers' usage")
    suspect = (intent == "cold" and observed is not None and declared_rate is not None
               and observed > declared_rate + SUSPECT_MARGIN)
    reason = (f"{whose} found {observed:.1%} of the prompt tokens cached, where the workload declares at most "
              f"{declared_rate:.1%} shareable (CACHE=cold): prompts of an earlier run or another tool were in the "
              "server's prefix cache, so TTFT and throughput are better than cold") if suspect else None
    return CacheAccount(intent=intent, reset=str(config.get("cache_reset_outcome") or config.get("cache_reset") or "off"),
                        declared_hit_rate=declared_rate, server_hit_rate=server_hit_rate, client_hit_rate=client_rate,
                        prompts_reused=sum(1 for r in records if r.prompt_reused), suspect=suspect, reason=reason)
