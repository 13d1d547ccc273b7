"""The server's view of a run: its Prometheus metrics (vLLM's names, >= 0.10 or older; SGLang's; trtllm-serve's: see
engine_metrics.py) parsed into samples, and a series of samples summarised. Pure: llmload.sweep.sampler does the
fetching.

server_window.jsonl's versions (``schema_version``): 1, vLLM's names only; 2 (2026-12-06), ``engine``: whose names
the sample was read under.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Sequence

import orjson
from prometheus_client.parser import text_string_to_metric_families

from llmload.results.engine_metrics import detect_engine, engine_names
from llmload.results.jsonl import iter_json_lines

__all__ = ["METRICS_SCHEMA_VERSION", "MetricsSample", "MetricsSummary", "Increase",
           "parse_prometheus", "read_samples", "sample_from", "counter_increase", "window_increase",
           "prefix_cache_hit_rate", "summarize_samples"]

METRICS_SCHEMA_VERSION = 2


def parse_prometheus(text: str) -> dict[str, float]:
    """Each sample name's value summed over its label sets, by prometheus_client's parser (vLLM writes its
    /metrics with prometheus_client); _bucket and _created samples and NaN are left out. Text that is not
    Prometheus's (an HTML page) gives {}."""
    out: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if not sample.name.endswith(("_bucket", "_created")) and not math.isnan(sample.value):
                    out[sample.name] = out.get(sample.name, 0.0) + float(sample.value)
    except ValueError:  # the parser's word for a line that is not Prometheus text
        return {}
    return out


@dataclass(frozen=True)
class MetricsSample:
    """One scrape: engine gauges and cumulative counters; None where the server lacks the metric."""

    t_s: float
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    preemptions_total: float | None = None
    prefix_cache_queries_total: float | None = None
    prefix_cache_hits_total: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    prefix_cache_hit_rate: float | None = None  # old vLLM's gpu_prefix_cache_hit_rate gauge (0..1) only
    # Request histograms' cumulative sums (seconds) and counts: two scrapes give the mean between them.
    ttft_sum_s: float | None = None
    ttft_count: float | None = None
    itl_sum_s: float | None = None
    itl_count: float | None = None
    e2e_sum_s: float | None = None
    e2e_count: float | None = None
    queue_sum_s: float | None = None
    queue_count: float | None = None
    engine: str | None = None
    """Whose names it was read under (engine_metrics.py's keys: vllm, sglang, trtllm, trtllm-1.0); None: no engine's."""

    def to_json_line(self) -> bytes:
        """The sample as one line of a metrics JSONL file (``read_samples`` reads it back)."""
        return orjson.dumps({"schema_version": METRICS_SCHEMA_VERSION, **asdict(self)}) + b"\n"


def _pick(values: dict[str, float], *names: str) -> float | None:
    """The first of ``names`` present (a counter also without/with ``_total``); None if absent."""
    for name in names:
        alt = name[:-6] if name.endswith("_total") else name + "_total"
        for key in (name, alt):
            if key in values and math.isfinite(values[key]):
                return values[key]
    return None


def sample_from(values: dict[str, float], t_s: float) -> MetricsSample:
    """Map parsed Prometheus values onto a MetricsSample under the names of the engine they are (vLLM's new names
    first, then its older ones; SGLang's; trtllm-serve's: engine_metrics.py); an engine's cached-token counter absent
    from a version that has it reads 0 (it moves only when a request found cached tokens)."""
    names = detect_engine(values)
    if names is None:
        return MetricsSample(t_s=t_s)
    picked = {name: _pick(values, *aliases) for name, aliases in names.names.items()}
    if names.hits_zero_with and picked.get("prefix_cache_hits_total") is None and _pick(values, names.hits_zero_with) is not None:
        picked["prefix_cache_hits_total"] = 0.0
    return MetricsSample(t_s=t_s, engine=names.key, **picked)


def read_samples(path: Path) -> list[MetricsSample]:
    """The samples of a metrics JSONL file, skipping a torn last line; a version-1 line that holds a figure was read
    under vLLM's names (the only ones that version read)."""
    known = {f.name for f in fields(MetricsSample)}
    samples = []
    for row in iter_json_lines(path):
        sample = MetricsSample(**{k: v for k, v in row.items() if k in known})
        if row.get("schema_version", 1) == 1 and any(v is not None for k, v in row.items() if k in known - {"t_s"}):
            sample = replace(sample, engine="vllm")
        samples.append(sample)
    return samples


@dataclass(frozen=True)
class MetricsSummary:
    """Means and maxima of gauges, counter deltas and rates over a series; None where unknown."""

    samples: int
    running_mean: float | None = None
    running_max: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    kv_cache_usage_mean: float | None = None
    kv_cache_usage_max: float | None = None
    preemptions: float | None = None
    prefix_cache_hit_rate: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    generation_tok_s: float | None = None


def _gauge(samples: Sequence[MetricsSample], name: str) -> tuple[float | None, float | None]:
    xs = [x for s in samples if (x := getattr(s, name)) is not None]
    return (sum(xs) / len(xs), max(xs)) if xs else (None, None)


@dataclass(frozen=True)
class Increase:
    """How much a counter grew over a series of scrapes."""

    total: float
    """A drop between two scrapes means the server restarted: its counter started again from 0."""
    span_s: float
    """From the first scrape that has the counter to the last."""
    restarted: bool
    """The counter dropped somewhere: what the old server counted after the scrape before the drop is lost."""


def counter_increase(samples: Sequence[MetricsSample], name: str) -> Increase | None:
    """The increase of counter ``name`` over ``samples`` (in time order); None with fewer than two that have it."""
    pts = [(s.t_s, x) for s in samples if (x := getattr(s, name)) is not None]
    if len(pts) < 2:
        return None
    steps = [b - a if b >= a else b for (_, a), (_, b) in zip(pts, pts[1:])]
    return Increase(sum(steps), pts[-1][0] - pts[0][0], any(b < a for (_, a), (_, b) in zip(pts, pts[1:])))


def window_increase(before: MetricsSample, after: MetricsSample, name: str) -> Increase | None:
    """counter_increase over two scrapes, where an engine whose request families appear only once written
    (engine_metrics.py: SGLang, trtllm-serve) had ``name`` at 0 before when only the scrape after has it."""
    names = engine_names(after.engine)
    if getattr(before, name) is None and getattr(after, name) is not None and names is not None and names.lazy_families:
        before = replace(before, **{name: 0.0})
    return counter_increase((before, after), name)


def prefix_cache_hit_rate(before: MetricsSample, after: MetricsSample) -> float | None:
    """The prefix cache's hits over its queries (in tokens) between two scrapes; None without both counters, without
    a query between them, or across a server restart (what it counted before is gone)."""
    hits, queries = window_increase(before, after, "prefix_cache_hits_total"), window_increase(before, after, "prefix_cache_queries_total")
    if hits is None or queries is None or hits.restarted or queries.restarted or not queries.total:
        return None
    return hits.total / queries.total


def _total(samples: Sequence[MetricsSample], name: str) -> float | None:
    increase = counter_increase(samples, name)
    return None if increase is None else increase.total


def summarize_samples(samples: Sequence[MetricsSample]) -> MetricsSummary:
    """Summarise a series: gauge means/maxima, counter deltas, prefix hit rate, generation tok/s."""
    samples = sorted(samples, key=lambda s: s.t_s)
    run, wait, kv = (_gauge(samples, n) for n in ("running", "waiting", "kv_cache_usage"))
    hits, queries = _total(samples, "prefix_cache_hits_total"), _total(samples, "prefix_cache_queries_total")
    hit_rate = hits / queries if hits is not None and queries else None
    if hit_rate is None and queries is None:
        hit_rate = _gauge(samples, "prefix_cache_hit_rate")[0]  # old vLLM: only the gauge
    generated = counter_increase(samples, "generation_tokens_total")
    return MetricsSummary(
        samples=len(samples), running_mean=run[0], running_max=run[1], waiting_mean=wait[0],
        waiting_max=wait[1], kv_cache_usage_mean=kv[0], kv_cache_usage_max=kv[1],
        preemptions=_total(samples, "preemptions_total"), prefix_cache_hit_rate=hit_rate,
        prompt_tokens=_total(samples, "prompt_tokens_total"), generation_tokens=None if generated is None else generated.total,
        generation_tok_s=generated.total / generated.span_s if generated is not None and generated.span_s > 0 else None,
    )
