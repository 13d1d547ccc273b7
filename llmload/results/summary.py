"""Pure statistics: per-request TPOT, distributions, and a run's Summary from its raw records.

Percentiles are exact (numpy's linear interpolation over every sample, as vLLM's bench serve
computes them), never Locust's rounded histogram buckets. Inputs are seconds; the Summary
reports milliseconds, and its field names say so.
"""

from __future__ import annotations

import dataclasses
import typing
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from llmload.errors import ResultsError
from llmload.results.generator import GeneratorCheck
from llmload.results.reconcile import ServerVsClient, reconcile
from llmload.results.records import RequestRecord
from llmload.results.server_metrics import MetricsSample

__all__ = ["SUMMARY_SCHEMA_VERSION", "Distribution", "TokenStats", "Summary", "tpot_s", "distribution", "token_stats", "summarize", "check_metric_path"]

SUMMARY_SCHEMA_VERSION = 1


def tpot_s(e2e_s: float, ttft_s: float | None, output_tokens: int | None) -> float | None:
    """Time per output token after the first, as vLLM defines it: (E2E - TTFT) / (tokens - 1)."""
    if ttft_s is None or output_tokens is None or output_tokens < 2:
        return None
    return (e2e_s - ttft_s) / (output_tokens - 1)


@dataclass(frozen=True)
class Distribution:
    """Mean, median, p90, p99, min and max of a sample; all None when the sample is empty."""

    count: int
    mean: float | None
    median: float | None
    p90: float | None
    p99: float | None
    min: float | None
    max: float | None


@dataclass(frozen=True)
class TokenStats:
    """Total, mean, median, min and max of a per-request token count."""

    count: int
    total: int
    mean: float | None
    median: float | None
    min: int | None
    max: int | None


def distribution(values: Sequence[float], scale: float = 1.0) -> Distribution:
    """The distribution of ``values`` times ``scale`` (1000 turns seconds into ms)."""
    if len(values) == 0:
        return Distribution(0, None, None, None, None, None, None)
    a = np.asarray(values, dtype=float) * scale
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return Distribution(
        count=int(a.size), mean=float(a.mean()), median=float(p50), p90=float(p90), p99=float(p99),
        min=float(a.min()), max=float(a.max()),
    )


def token_stats(counts: Sequence[int]) -> TokenStats:
    """Statistics of per-request token counts."""
    if len(counts) == 0:
        return TokenStats(0, 0, None, None, None, None)
    a = np.asarray(counts, dtype=np.int64)
    return TokenStats(
        count=int(a.size), total=int(a.sum()), mean=float(a.mean()), median=float(np.median(a)),
        min=int(a.min()), max=int(a.max()),
    )


@dataclass(frozen=True)
class Summary:
    """What a run measured, computed from its raw records only."""

    requests_ok: int
    requests_failed: int
    requests_interrupted: int
    """Cut off by the end of the run (not failures, not successes)."""
    duration_s: float
    """First request start to last request end."""
    rps: float
    """Successful requests per second."""
    output_throughput_tok_s: float
    total_throughput_tok_s: float
    answered_ratio: float | None
    """Share of successful requests that got a visible answer."""
    lost_to_max_tokens: int
    """Successful requests that ended (finish_reason length) before any visible answer."""
    reasoning_ratio: float | None
    """Reasoning tokens over output tokens, where reasoning was counted."""
    response_time_ms: Distribution
    ttft_ms: Distribution
    ttfvt_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    prompt_tokens: TokenStats
    output_tokens: TokenStats
    reasoning_tokens: TokenStats
    errors: dict[str, int]
    finish_reasons: dict[str, int]
    token_sources: dict[str, int]
    """How many requests took their counts from server usage or from counting the stream."""
    interrupted_by: str | None = None
    """The first SIGINT or SIGTERM the run got ("SIGINT", "SIGTERM"): no request was sent after it. None: none came."""
    partial: bool = False
    """Rebuilt from samples.jsonl after the run died without writing its summary (``llmload report``)."""
    missing: list[str] = field(default_factory=list)
    """With ``partial``: what the run did not leave behind."""
    config: dict[str, Any] = field(default_factory=dict)
    generator: GeneratorCheck | None = None
    """The load generator's own state (CPU, read and event-loop lag); None when not observed."""
    server_vs_client: ServerVsClient | None = None
    """The server's own account of the run's window (its /metrics) beside the client's; None without one."""
    schema_version: int = SUMMARY_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_metric_path(path: str) -> None:
    """Raise ResultsError unless ``path`` (``ttft_ms.median``) names a Summary field, or one inside it."""
    owner: Any = Summary
    for part in path.split("."):
        hints = typing.get_type_hints(owner) if dataclasses.is_dataclass(owner) else {}
        if part not in hints:
            known = ", ".join(f.name for f in dataclasses.fields(owner)) if dataclasses.is_dataclass(owner) else "nothing"
            raise ResultsError(f"unknown metric {path!r}: {part!r} is not one of {known}")
        owner = hints[part]


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def summarize(records: Iterable[RequestRecord], config: dict[str, Any] | None = None,
              generator: GeneratorCheck | None = None, server_window: Sequence[MetricsSample] = ()) -> Summary:
    """The Summary of a run's records; ``config`` and ``generator`` are copied in as they are.

    ``server_window``: the server's /metrics scraped before the run and after it (two samples), if it has them.
    """
    every = list(records)
    records = [r for r in every if not r.warmup]
    ok = [r for r in records if r.ok]
    interrupted = sum(1 for r in records if r.error == "interrupted")
    failed = len(records) - len(ok) - interrupted
    if records:
        duration = max(r.start_monotonic_s + r.e2e_s for r in records) - min(r.start_monotonic_s for r in records)
    else:
        duration = 0.0
    prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    output = [r.completion_tokens for r in ok if r.completion_tokens is not None]
    reasoning_counted = [r for r in ok if r.reasoning_tokens is not None and r.completion_tokens is not None]
    reasoning = [r.reasoning_tokens for r in reasoning_counted]
    itl = [gap for r in ok for gap in r.itl_s]
    return Summary(
        requests_ok=len(ok),
        requests_failed=failed,
        requests_interrupted=interrupted,
        duration_s=duration,
        rps=_ratio(len(ok), duration) or 0.0,
        output_throughput_tok_s=_ratio(sum(output), duration) or 0.0,
        total_throughput_tok_s=_ratio(sum(output) + sum(prompt), duration) or 0.0,
        answered_ratio=_ratio(sum(1 for r in ok if r.answered), len(ok)),
        lost_to_max_tokens=sum(1 for r in ok if r.finish_reason == "length" and not r.answered),
        reasoning_ratio=_ratio(sum(reasoning), sum(r.completion_tokens for r in reasoning_counted)),
        response_time_ms=distribution([r.e2e_s for r in ok], 1000.0),
        ttft_ms=distribution([r.ttft_s for r in ok if r.ttft_s is not None], 1000.0),
        ttfvt_ms=distribution([r.ttfvt_s for r in ok if r.ttfvt_s is not None], 1000.0),
        tpot_ms=distribution([r.tpot_s for r in ok if r.tpot_s is not None], 1000.0),
        itl_ms=distribution(itl, 1000.0),
        prompt_tokens=token_stats(prompt),
        output_tokens=token_stats(output),
        reasoning_tokens=token_stats(reasoning),
        errors=dict(Counter(r.error for r in records if r.error is not None)),
        finish_reasons=dict(Counter(r.finish_reason or "none" for r in ok)),
        token_sources=dict(Counter(r.token_source for r in ok)),
        config=dict(config or {}),
        generator=generator,
        # Warm-up requests included: the server served them inside the window too.
        server_vs_client=reconcile(server_window[0], server_window[-1], every) if len(server_window) >= 2 else None,
    )
