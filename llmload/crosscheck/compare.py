"""Pure: one metric table from vLLM bench's result JSON and llmload's summary.json, side by side.

Metric names carry their unit (``mean_ttft_ms``, ``output_throughput_tok_s``); each tool gives one
value per repeat. Two tools agree on a metric when the gap between their means is no wider than
their run-to-run spreads (max - min over repeats) added together.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["METRICS", "Row", "bench_metrics", "suite_metrics", "compare", "format_table"]

_LATENCIES = ("ttft", "tpot", "itl", "e2e")
_STATS = ("mean", "median", "p99")
METRICS: tuple[str, ...] = ("request_throughput_rps", "output_throughput_tok_s", "total_throughput_tok_s",
                            *(f"{stat}_{latency}_ms" for latency in _LATENCIES for stat in _STATS))
"""Every metric compared, in the table's order."""

# vLLM bench's own key for each metric (its E2E is "e2el").
_BENCH_KEYS = {"request_throughput_rps": "request_throughput", "output_throughput_tok_s": "output_throughput",
               "total_throughput_tok_s": "total_token_throughput",
               **{f"{stat}_{latency}_ms": f"{stat}_{'e2el' if latency == 'e2e' else latency}_ms"
                  for latency in _LATENCIES for stat in _STATS}}
# llmload's summary.json: (distribution, statistic) for latencies, a field for throughputs.
_SUITE_LATENCIES = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2e": "response_time_ms"}
_SUITE_THROUGHPUTS = {"request_throughput_rps": "rps", "output_throughput_tok_s": "output_throughput_tok_s",
                      "total_throughput_tok_s": "total_throughput_tok_s"}

# Where the two tools' definitions differ (vLLM 0.32's benchmarks/lib/endpoint_request_func.py, openai-chat).
_DEFINITIONS = {
    "throughput": "vLLM bench divides by its whole benchmark's wall time; llmload by first request start to last end",
    "ttft": "vLLM bench: first chunk with choices, the role-only chunk included; llmload: first token on any channel",
    "tpot": "both (E2E - TTFT) / (output tokens - 1): differs as their TTFT and E2E differ",
    "itl": "vLLM bench: a gap per chunk with choices after the first (the role-only and the empty finish chunk "
           "too); llmload: token chunks only",
    "e2e": "vLLM bench ends at the last chunk with choices (the finish chunk); llmload at [DONE], after usage",
}
# What the definitions above do on a reasoning model (gpt-oss on vLLM), where the role-only chunk is sent with the
# first generated token, harmony's hidden <|channel|>, three tokens before the first reasoning text.
_REASONING = {
    "ttft": "reasoning: vLLM bench stops at the role-only chunk, sent with the hidden <|channel|> header, ~3 tokens "
            "before the first reasoning token llmload waits for",
    "itl": "reasoning: vLLM bench's first gap spans the hidden header; it ignores delta.reasoning only in its text, "
           "not in its timing",
    "tpot": "reasoning: vLLM bench's earlier TTFT leaves more time to share among the tokens",
}


@dataclass(frozen=True)
class Row:
    """One metric: each tool's values per repeat, and what sets them apart."""

    metric: str
    vllm_bench: tuple[float, ...]
    llmload: tuple[float, ...]
    definition: str
    """Empty when both tools define the metric alike."""

    @property
    def difference(self) -> float | None:
        """llmload's mean minus vLLM bench's."""
        if not self.vllm_bench or not self.llmload:
            return None
        return statistics.fmean(self.llmload) - statistics.fmean(self.vllm_bench)

    @property
    def within_spread(self) -> bool | None:
        """The gap is no wider than both tools' spreads together (None with one repeat: no spread to judge by)."""
        if self.difference is None or min(len(self.vllm_bench), len(self.llmload)) < 2:
            return None
        return abs(self.difference) <= _spread(self.vllm_bench) + _spread(self.llmload)


def _spread(values: Sequence[float]) -> float:
    return max(values) - min(values)


def bench_metrics(result: Mapping[str, Any]) -> dict[str, float | None]:
    """The metrics of one `vllm bench serve --save-result` JSON file (run with E2EL percentiles)."""
    return {metric: result.get(key) for metric, key in _BENCH_KEYS.items()}


def suite_metrics(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """The metrics of one llmload summary.json."""
    metrics: dict[str, float | None] = {metric: summary[key] for metric, key in _SUITE_THROUGHPUTS.items()}
    for latency, key in _SUITE_LATENCIES.items():
        for stat in _STATS:
            metrics[f"{stat}_{latency}_ms"] = summary[key][stat]
    return metrics


def _family(metric: str) -> str:
    return "throughput" if "throughput" in metric else metric.split("_")[1]


def compare(vllm_bench: Mapping[str, Sequence[float | None]], llmload: Mapping[str, Sequence[float | None]],
            reasoning: bool) -> list[Row]:
    """One Row per metric; ``reasoning``: the model reasoned, which adds what that changes to the definitions."""
    rows = []
    for metric in METRICS:
        family = _family(metric)
        notes = [_DEFINITIONS.get(family, "")] + ([_REASONING[family]] if reasoning and family in _REASONING else [])
        rows.append(Row(metric, tuple(v for v in vllm_bench.get(metric, ()) if v is not None),
                        tuple(v for v in llmload.get(metric, ()) if v is not None), "; ".join(n for n in notes if n)))
    return rows


def _cell(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    mean = statistics.fmean(values)
    return f"{mean:.2f}" if len(values) < 2 else f"{mean:.2f} ({min(values):.2f}-{max(values):.2f})"


def format_table(rows: Sequence[Row]) -> str:
    """A Markdown table: each tool's mean (min-max over repeats), the difference, agreement, definitions."""
    lines = ["| metric | vLLM bench | llmload | llmload - vLLM | within spread | where the definitions differ |",
             "|---|---:|---:|---:|:---:|---|"]
    previous = ""
    for row in rows:
        agree = {True: "yes", False: "NO", None: "n/a"}[row.within_spread]
        difference = "n/a" if row.difference is None else f"{row.difference:+.2f}"
        definition = "" if row.definition == previous else row.definition  # said once per metric family
        previous = row.definition
        lines.append(f"| {row.metric} | {_cell(row.vllm_bench)} | {_cell(row.llmload)} | {difference} | {agree} "
                     f"| {definition} |")
    return "\n".join(lines)
