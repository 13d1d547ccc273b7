"""Pure: one metric table from vLLM bench's result JSON and llmload's summary.json, side by side.

Metric names carry their unit (``mean_ttft_ms``, ``output_throughput_tok_s``); each tool gives one
value per repeat. The server referees what it counts itself: its /metrics over each tool's own runs
give requests, tokens and mean TTFT, inter-token latency and E2E, and each tool's deviation from
that account is its error in that run, whatever the server's speed then (on a small machine each
tool's own CPU slows the server it measures). Two tools agree on such a metric when their deviations
differ by at most SERVER_TOLERANCE_PCT points (counts: when both equal the server's); on any other,
when the gap between their means is no wider than their run-to-run spreads (max - min over repeats)
added together. Each row says what each tool measures; the rows after the shared ones (first token,
first ITL gap, TTFVT, reasoning) show what a reasoning model sets apart, each from the tool that can
measure it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from llmload.results.metrics import OWN_METRICS, VLLM_FIRST, VLLM_METRICS
from llmload.results.summary import Summary, metric_value

__all__ = ["METRICS", "SERVER_KEYS", "SERVER_TOLERANCE_PCT", "Row", "bench_metrics", "suite_metrics", "compare",
           "format_table"]

_STATS = ("mean", "median", "p99")
# (metric, family): the family names the definitions the metric is measured by (a latency's: its name).
_ROWS: tuple[tuple[str, str], ...] = (
    *((m, "counts") for m in ("requests_completed", "total_input_tokens", "total_output_tokens")),
    *((m, "throughput") for m in ("request_throughput_rps", "output_throughput_tok_s", "total_throughput_tok_s")),
    *((f"{stat}_{latency.name}_{latency.unit}", latency.name) for latency in VLLM_METRICS for stat in _STATS),
    # What a reasoning model changes, each tool's own figure beside the other's where it has one.
    ("mean_first_token_ms", "first_token"), ("mean_first_itl_ms", "first_itl"), ("median_first_itl_ms", "first_itl"),
    ("first_itl_under_1ms_share", "merged"),
    *((f"{stat}_{latency.name}_{latency.unit}", latency.name) for latency in OWN_METRICS for stat in _STATS),
    ("mean_reasoning_tokens", "reasoning"),
)
METRICS: tuple[str, ...] = tuple(metric for metric, _ in _ROWS)
_COUNTS = tuple(metric for metric, family in _ROWS if family == "counts")
"""Every metric, in the table's order; a tool without a metric gives none (``n/a``)."""
SERVER_KEYS = {"requests_completed": "requests", "total_input_tokens": "prompt_tokens",
               "total_output_tokens": "generation_tokens", "mean_ttft_ms": "mean_ttft_ms",
               "mean_tpot_ms": "mean_itl_ms", "mean_itl_ms": "mean_itl_ms", "mean_e2e_ms": "mean_e2e_ms"}
"""The metrics the server counts itself: each one's field of results.reconcile.ServerAccount. Its inter-token
latency referees TPOT too: with one output length for every request its mean is the mean per-request TPOT."""
SERVER_TOLERANCE_PCT = 10.0
"""Two tools agree on a metric the server counts when their deviations from its account differ by at most this."""

# vLLM bench's own key for each metric it reports (its E2E is "e2el").
_BENCH_KEYS = {"requests_completed": "completed", "total_input_tokens": "total_input_tokens",
               "total_output_tokens": "total_output_tokens",
               "request_throughput_rps": "request_throughput", "output_throughput_tok_s": "output_throughput",
               "total_throughput_tok_s": "total_token_throughput",
               **{f"{stat}_{latency.name}_{latency.unit}": f"{stat}_{latency.vllm}_{latency.unit}"
                  for latency in VLLM_METRICS for stat in _STATS}}
# llmload's Summary: a field for throughputs (latencies: each metric's distribution, its statistic appended).
_SUITE_FIELDS = {"requests_completed": "requests_ok", "total_input_tokens": "prompt_tokens.total",
                 "total_output_tokens": "output_tokens.total", "request_throughput_rps": "rps",
                 "output_throughput_tok_s": "output_throughput_tok_s", "total_throughput_tok_s": "total_throughput_tok_s"}

# What each tool measures: (vLLM bench, llmload), from vLLM 0.32's benchmarks/lib/endpoint_request_func.py
# (openai-chat) and llmload/client/accumulator.py. Equal strings: the same definition.
_DEFINITIONS = {
    "counts": ("requests completed; prompt and completion tokens from the server's usage",
               "requests completed; prompt and completion tokens from the server's usage"),
    "throughput": ("over its whole benchmark's wall time", "from the first request's start to the last one's end"),
    "ttft": ("to the first chunk with choices: the role-only chunk", "to the first chunk carrying a token, "
             "reasoning or answer"),
    "tpot": ("(E2E - TTFT) / (output tokens - 1), its E2E and TTFT", "(E2E - TTFT) / (output tokens - 1), its E2E "
             "and TTFT"),
    "itl": ("a gap per chunk with choices after the first: the role-only chunk's gap and the empty finish "
            "chunk's too", "gaps between chunks carrying tokens"),
    "e2e": ("to the last chunk with choices (the finish chunk)", "to [DONE], after the usage chunk"),
    "first_token": ("to the first chunk carrying a token: its TTFT plus its first ITL gap, per request",
                    "to the first chunk carrying a token (its TTFT)"),
    "first_itl": ("its first ITL gap: the role-only chunk to the first chunk carrying a token",
                  "none: it counts no gap before the first token"),
    "merged": ("the share of requests whose role-only chunk and first token came within 1 ms (in one read)", "none"),
    **{latency.name: ("none", latency.description) for latency in OWN_METRICS},
    "reasoning": ("none: it leaves delta.reasoning out of its text", "the server's reasoning_tokens per request"),
}
# What the definitions above do on a reasoning model (gpt-oss on vLLM), where the role-only chunk is sent with the
# first generated token, harmony's hidden <|channel|>, three tokens before the first reasoning text.
_REASONING = {
    "ttft": "vLLM bench stops at the role-only chunk, sent with the hidden <|channel|> header, ~3 tokens before the "
            "first reasoning token llmload waits for (mean_first_itl_ms is that gap)",
    "itl": "vLLM bench's first gap spans the hidden header",
    "tpot": "vLLM bench's earlier TTFT leaves more time to share among the tokens",
    "first_token": "one definition for both tools: the TTFT gap left once the role-only chunk is set aside",
    "merged": "when vLLM's API server falls behind its engine it sends the tokens made meanwhile in one burst, the "
              "role-only chunk with them: for these requests the two TTFTs meet",
    "ttfvt": "what a reader waits for: the reasoning comes first; vLLM bench has no such figure",
}


@dataclass(frozen=True)
class Row:
    """One metric: each tool's values per repeat, the server's account beside them, and what each tool measures."""

    metric: str
    vllm_bench: tuple[float, ...]
    llmload: tuple[float, ...]
    definitions: tuple[str, str]
    """(vLLM bench's, llmload's) definition; "none" for a tool without the metric."""
    reasoning: str
    """What a reasoning model changes in this metric; empty without reasoning."""
    vllm_bench_deviation_pct: tuple[float, ...] = ()
    """Per repeat where the server counted the metric: 100 * (the tool's value - the server's) / the server's."""
    llmload_deviation_pct: tuple[float, ...] = ()

    @property
    def differs(self) -> bool:
        """The two tools define the metric differently."""
        return self.definitions[0] != self.definitions[1]

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

    @property
    def refereed(self) -> bool:
        """The server counted the metric in both tools' runs."""
        return bool(self.vllm_bench_deviation_pct and self.llmload_deviation_pct)

    @property
    def agree_by_server(self) -> bool | None:
        """Both tools read the server alike: their mean deviations from its account differ by at most
        SERVER_TOLERANCE_PCT points (counts: every one equals the server's); None when the server did not count it."""
        if not self.refereed:
            return None
        if self.metric in _COUNTS:
            return not any(self.vllm_bench_deviation_pct) and not any(self.llmload_deviation_pct)
        gap = statistics.fmean(self.llmload_deviation_pct) - statistics.fmean(self.vllm_bench_deviation_pct)
        return abs(gap) <= SERVER_TOLERANCE_PCT

    @property
    def agree(self) -> bool | None:
        """By the server where it counts the metric, else by both tools' spreads."""
        return self.agree_by_server if self.refereed else self.within_spread


def _spread(values: Sequence[float]) -> float:
    return max(values) - min(values)


def bench_metrics(result: Mapping[str, Any]) -> dict[str, float | None]:
    """The metrics of one `vllm bench serve --save-result --save-detailed` JSON file (run with E2EL percentiles).

    The per-request ``ttfts`` and ``itls`` (seconds) give the time to the first chunk carrying a token.
    """
    metrics: dict[str, float | None] = {metric: result.get(key) for metric, key in _BENCH_KEYS.items()}
    answered = [(ttft, itls) for ttft, itls, error in zip(result.get("ttfts", ()), result.get("itls", ()),
                                                          result.get("errors", ())) if not error and itls]
    if answered:
        metrics["mean_first_itl_ms"] = statistics.fmean(itls[0] for _, itls in answered) * 1000.0
        metrics["median_first_itl_ms"] = statistics.median(itls[0] for _, itls in answered) * 1000.0
        metrics["first_itl_under_1ms_share"] = sum(itls[0] < 0.001 for _, itls in answered) / len(answered)
        metrics["mean_first_token_ms"] = statistics.fmean(ttft + itls[0] for ttft, itls in answered) * 1000.0
    return metrics


def suite_metrics(summary: Summary) -> dict[str, float | None]:
    """The metrics of one llmload summary."""
    metrics: dict[str, float | None] = {metric: metric_value(summary, key) for metric, key in _SUITE_FIELDS.items()}
    for latency in VLLM_FIRST:
        for stat in _STATS:
            metrics[f"{stat}_{latency.name}_{latency.unit}"] = metric_value(summary, latency.path(stat))
    metrics["mean_first_token_ms"] = metrics["mean_ttft_ms"]
    metrics["mean_reasoning_tokens"] = summary.reasoning_tokens.mean
    return metrics


def _deviations_pct(values: Sequence[float | None], server: Sequence[float | None]) -> tuple[float, ...]:
    """Per repeat where both are known: 100 * (value - server's) / server's."""
    return tuple(100.0 * (value - by_server) / by_server for value, by_server in zip(values, server)
                 if value is not None and by_server)


def compare(vllm_bench: Mapping[str, Sequence[float | None]], llmload: Mapping[str, Sequence[float | None]],
            reasoning: bool, server: Mapping[str, Mapping[str, Sequence[float | None]]] | None = None) -> list[Row]:
    """One Row per metric; ``reasoning``: the model reasoned, which adds what that changes to the definitions;
    ``server``: per tool ("vllm_bench", "llmload"), the server's account of each metric in SERVER_KEYS, one value
    per repeat, paired with the tool's."""
    server = server or {}

    def deviations(tool: str, values: Mapping[str, Sequence[float | None]], metric: str) -> tuple[float, ...]:
        return _deviations_pct(values.get(metric, ()), server.get(tool, {}).get(metric, ()))

    return [Row(metric, tuple(v for v in vllm_bench.get(metric, ()) if v is not None),
                tuple(v for v in llmload.get(metric, ()) if v is not None), _DEFINITIONS[family],
                _REASONING.get(family, "") if reasoning else "",
                deviations("vllm_bench", vllm_bench, metric), deviations("llmload", llmload, metric))
            for metric, family in _ROWS]


def _cell(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    mean = statistics.fmean(values)
    return f"{mean:.2f}" if len(values) < 2 else f"{mean:.2f} ({min(values):.2f}-{max(values):.2f})"


def _deviation_cell(deviations_pct: Sequence[float]) -> str:
    if not deviations_pct:
        return "n/a"
    mean = statistics.fmean(deviations_pct)
    spread = f" ({min(deviations_pct):+.1f} to {max(deviations_pct):+.1f})" if len(deviations_pct) > 1 else ""
    return f"{mean:+.1f}%{spread}"


AGREEMENT = (f"Agreement: where the server counts a metric, its /metrics over each tool's own runs referee it: the "
             f"tools agree when their deviations from the server's account differ by at most {SERVER_TOLERANCE_PCT:g} "
             "points (counts: when both equal the server's), whatever speed the server had in each run; elsewhere, "
             "when the gap between the tools is no wider than both tools' run-to-run spreads together.")
"""The line before the table: how agreement is judged."""


def format_table(rows: Sequence[Row]) -> str:
    """How agreement is judged, then a Markdown table (each tool's mean (min-max over repeats), the difference, each
    tool's deviation from the server's account, agreement and what decided it, what each tool measures, said once
    per family), then what reasoning changes, one line per family."""
    lines = [AGREEMENT, "",
             "| metric | vLLM bench | llmload | llmload - vLLM | vLLM bench - server | llmload - server | agree "
             "| vLLM bench measures | llmload measures |",
             "|---|---:|---:|---:|---:|---:|:---:|---|---|"]
    previous: tuple[str, str] | None = None
    notes: list[str] = []
    for row in rows:
        agree = {True: "yes", False: "NO", None: "n/a"}[row.agree]
        if row.agree is not None:
            agree += " (server)" if row.refereed else " (spread)"
        difference = "n/a" if row.difference is None else f"{row.difference:+.2f}"
        bench, suite = "", ""
        if row.definitions != previous:
            bench, suite = row.definitions[0], row.definitions[1] if row.differs else "the same"
            if row.reasoning:
                notes.append(f"- {row.metric}: {row.reasoning}")
        previous = row.definitions
        lines.append(f"| {row.metric} | {_cell(row.vllm_bench)} | {_cell(row.llmload)} | {difference} "
                     f"| {_deviation_cell(row.vllm_bench_deviation_pct)} | {_deviation_cell(row.llmload_deviation_pct)} "
                     f"| {agree} | {bench} | {suite} |")
    if notes:
        lines += ["", "On a reasoning model:", *notes]
    return "\n".join(lines)
