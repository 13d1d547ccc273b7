"""The metric tables: one row per per-request metric (METRICS) and one per run-level figure (RUN_METRICS), the
lists every view of the metrics reads.

A row says where a request's value lives on its record (a RequestRecord field, or a property that derives it
there: per-request formulas live with the record), the Distribution summary.json keeps of it, its unit and
labels, which direction is better, and where it is shown. The summary, the SLO grammar, the result block, the
web UI's table and charts, the figures, vllm_bench.json and the crosscheck read the rows; adding a metric is a
row here plus its formula on RequestRecord.

Rows are in summary.json's order. The metrics vLLM bench reports too name their key there (``vllm``): views laid
out like vLLM's (the result block, vllm_bench.json, the crosscheck) show those first, in vLLM's order, then ours.
Groupings (each effort of a mix: ``by_effort``) are not metrics: each group is measured by every row.

Every row has a kind (time, rate, share, count, money) that says how a time scale converts it: a rehearsal's
predicted figures, its cost, the decision table, the figures and the Prometheus exporter are derived from the
tables (results/predicted.py, cost.py, decision.py, plots/figures.py, run_metrics.py); adding a run-level figure
is a row of RUN_METRICS with its formula (a weight, a share's parts, a count's test, or the rate it prices).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from llmload.results.records import RequestRecord

__all__ = ["Metric", "METRICS", "BY_NAME", "VLLM_ORDER", "VLLM_METRICS", "OWN_METRICS", "VLLM_FIRST", "RunMetric", "RUN_METRICS",
           "RUN_BY_NAME", "MEASURED_RUN_METRICS", "MONEY_METRICS", "run_metric_fields"]

_SCALES = {"ms": 1000.0}
"""Records hold seconds; the summary holds each metric in its unit."""


@dataclass(frozen=True)
class Metric:
    """One per-request metric and how each view shows it."""

    name: str
    """Its key: SLO=<name>_p90<=2s, the web UI's series (``<name>_ms_p50``), the figure ``<name>_vs_users``."""
    record: str
    """The RequestRecord attribute holding a request's value in seconds (None when it has none)."""
    summary: str
    """summary.json's Distribution of it, in ``unit``."""
    label: str
    """Its short label: TTFT."""
    title: str
    """What it is, in a few words (chart and figure titles): Time to first token."""
    heading: str
    """The result block's heading over its rows (vLLM's words for vLLM's metrics)."""
    description: str
    """What llmload measures, in one line."""
    unit: str = "ms"
    better: str = "lower"
    """lower or higher: the side an SLO limit bounds (the SLO grammar's ``<=`` takes lower-is-better metrics)."""
    pooled: bool = False
    """The record holds one value per gap between token events (a list): statistics pool every request's gaps."""
    needs_two_events: bool = False
    """Timed between token events: not measurable when an answer arrives in one event (reported as such)."""
    vllm: str | None = None
    """vLLM bench's name for it (its ``mean_<vllm>_ms`` keys), when vLLM bench reports it too."""
    live: bool = True
    """A row of the web UI's Streaming metrics table (Locust's own table has E2E: its response time)."""
    chart: bool = False
    """A chart over time in the web UI; the value is drawn at the moment it ended: the request's start plus the
    value (a span from the start), or for a pooled metric each gap's closing event."""
    figure: bool = False
    """A figure ``<name>_vs_users`` of its median (band to p90) against the setting the cells vary."""
    prometheus: str = ""
    """Its histogram at METRICS_PORT, after ``llmload_``: vLLM's own name for the server's view of it."""
    per_token: bool = False
    """A time per output token: the figure's axis says ms/token."""
    validated_by: str = ""
    """The figure of a profile's validation (its held-out errors, ``make calibrate``) whose error a prediction of this
    metric carries: ttft_median_ms, tpot_median_ms or e2e_median_ms."""
    kind: str = "time"
    """How a time scale converts it (llmload/timescale.py): every per-request metric is a time."""

    @property
    def scale(self) -> float:
        """From the record's seconds to ``unit``."""
        return _SCALES[self.unit]

    def path(self, stat: str) -> str:
        """summary.json's dotted path of one statistic: ``ttft_ms.median``."""
        return f"{self.summary}.{stat}"

    def request_values_s(self, record: RequestRecord) -> list[float]:
        """The request's own values in seconds: its gaps for a pooled metric, else its value ([] when it has none)."""
        value = getattr(record, self.record)
        if self.pooled:
            return value
        return [] if value is None else [value]

    def sample_s(self, records: Iterable[RequestRecord]) -> list[float]:
        """Every value of ``records`` in seconds, in order (the caller picks the records: successful ones)."""
        name = self.record
        if self.pooled:
            return [value for record in records for value in getattr(record, name)]
        return [value for record in records if (value := getattr(record, name)) is not None]


METRICS: tuple[Metric, ...] = (
    Metric("e2e", "e2e_s", "response_time_ms", "E2EL", "End-to-end latency", "End-to-end Latency",
           "to [DONE], after the usage chunk", vllm="e2el", live=False, prometheus="e2e_request_latency_seconds", validated_by="e2e_median_ms"),
    Metric("ttft", "ttft_s", "ttft_ms", "TTFT", "Time to first token", "Time to First Token",
           "to the first chunk carrying a token, reasoning or answer", vllm="ttft", chart=True, figure=True,
           prometheus="time_to_first_token_seconds", validated_by="ttft_median_ms"),
    Metric("ttfvt", "ttfvt_s", "ttfvt_ms", "TTFVT", "Time to first visible token", "Time to First Visible Token",
           "to the first answer (final-channel) token, after the reasoning", chart=True, figure=True,
           prometheus="time_to_first_visible_token_seconds", validated_by="e2e_median_ms"),
    Metric("tpot", "tpot_s", "tpot_ms", "TPOT", "Time per output token", "Time per Output Token (excl. 1st token)",
           "(E2E - TTFT) / (output tokens - 1)", needs_two_events=True, vllm="tpot", figure=True, per_token=True,
           prometheus="time_per_output_token_seconds", validated_by="tpot_median_ms"),
    Metric("itl", "itl_s", "itl_ms", "ITL", "Inter-token latency", "Inter-token Latency",
           "gaps between chunks carrying tokens", pooled=True, needs_two_events=True, vllm="itl", chart=True,
           prometheus="inter_token_latency_seconds", validated_by="tpot_median_ms"),
    Metric("decode", "decode_s", "decode_ms", "decode time", "Decode time", "Decode Time (E2E - TTFT)",
           "E2E - TTFT: the stream after its first token (vLLM's server times it as request_decode_time_seconds)",
           needs_two_events=True, figure=True, prometheus="request_decode_time_seconds", validated_by="tpot_median_ms"),
)
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
VLLM_ORDER = ("ttft", "tpot", "itl", "e2el")
"""vLLM bench's latency metrics in the order it reports them (its ``--percentile-metrics`` default)."""
VLLM_METRICS: tuple[Metric, ...] = tuple(sorted((m for m in METRICS if m.vllm),
                                                key=lambda m: VLLM_ORDER.index(m.vllm or "")))
"""The metrics vLLM bench reports too, in its order."""
OWN_METRICS: tuple[Metric, ...] = tuple(m for m in METRICS if not m.vllm)
"""The metrics only llmload reports, in the table's order."""
VLLM_FIRST: tuple[Metric, ...] = VLLM_METRICS + OWN_METRICS
"""Every metric as a view laid out like vLLM's shows them."""


@dataclass(frozen=True)
class RunMetric:
    """One figure of a whole run (or of one group's part of it): a rate, share, count, time or cost.

    Its ``kind`` says how a time scale converts it (llmload/timescale.py). A rate adds up each successful request's
    ``weight`` over the run's span (its 95% interval from batch means); a share divides its ``numerator``'s sum by its
    ``denominator``'s over successful requests (a whole-number share gets Wilson's interval); a count counts the
    records ``counted`` accepts; money prices a rate row (``prices``) per ``per`` of its units at the run's price.
    """

    name: str
    """summary.json's field (in the run's Measures, or under ``cost``)."""
    label: str
    """The result block's label, with its unit: Request throughput (req/s)."""
    kind: str
    interval: bool = False
    """A 95% interval is kept beside it as ``<name>_ci95``."""
    weight: Callable[[RequestRecord], float] | None = None
    good_only: bool = False
    """A rate of the requests that met every SLO (goodput): None without SLO."""
    numerator: Callable[[RequestRecord], float] | None = None
    denominator: Callable[[RequestRecord], float] | None = None
    counted: Callable[[RequestRecord], bool] | None = None
    prices: str = ""
    per: float = 1.0
    vllm: str | None = None
    """vLLM bench's key for it (vllm_bench.json, the crosscheck)."""
    validated_by: str = ""
    """The figure of a profile's validation whose held-out error a prediction of it carries (rates: rps)."""
    decision: bool = False
    """A column of the decision table (per GPU x model, at the capacity found)."""
    figure: str = ""
    """The name of its figure against the setting the cells vary; empty: none."""
    figure_scale: float = 1.0
    """From the summary's value to the figure's axis (a share as a percentage: 100)."""
    figure_label: str = ""
    """The figure's axis label (its title is the label)."""
    prometheus: str = ""
    """Its counter at METRICS_PORT, ``llmload_<prometheus>_total``, whose rate over a window is the figure there: a
    rate's weights summed, a count's records; a share's numerator, its base in ``llmload_<prometheus>_base_total``.
    Empty: not exported (the request counts are llmload_requests_total's outcomes; time and money are not counters)."""

    @property
    def home(self) -> str:
        """Where summary.json holds it: ``measures`` (the run's figures, each group's too) or ``cost``."""
        return "cost" if self.kind == "money" else "measures"


def _answered(record: RequestRecord) -> float:
    return 1.0 if record.answered else 0.0


def _reasoning_counted(record: RequestRecord) -> bool:
    return record.reasoning_tokens is not None and record.completion_tokens is not None


def _judged(record: RequestRecord) -> float:
    return 1.0 if record.answer_valid is not None else 0.0


RUN_METRICS: tuple[RunMetric, ...] = (
    RunMetric("requests_ok", "Successful requests", "count", counted=lambda r: r.ok),
    RunMetric("requests_failed", "Failed requests", "count", counted=lambda r: not r.ok and r.error != "interrupted"),
    RunMetric("requests_interrupted", "Interrupted at the end", "count", counted=lambda r: r.error == "interrupted"),
    RunMetric("duration_s", "Benchmark duration (s)", "time"),
    RunMetric("rps", "Request throughput (req/s)", "rate", interval=True, weight=lambda r: 1.0,
              vllm="request_throughput", validated_by="rps", figure="fig2_requests_per_s", figure_label="requests/s"),
    RunMetric("output_throughput_tok_s", "Output token throughput (tok/s)", "rate", interval=True,
              weight=lambda r: float(r.completion_tokens or 0), vllm="output_throughput", validated_by="rps",
              decision=True, prometheus="output_tokens"),
    RunMetric("total_throughput_tok_s", "Total token throughput (tok/s)", "rate", interval=True,
              weight=lambda r: float((r.completion_tokens or 0) + (r.prompt_tokens or 0)), vllm="total_token_throughput",
              validated_by="rps", prometheus="total_tokens"),
    RunMetric("goodput_rps", "Goodput (req/s)", "rate", interval=True, weight=lambda r: 1.0, good_only=True,
              validated_by="rps", prometheus="good_requests"),
    RunMetric("goodput_output_tok_s", "Goodput output tokens (tok/s)", "rate", interval=True,
              weight=lambda r: float(r.completion_tokens or 0), good_only=True, validated_by="rps",
              prometheus="good_output_tokens"),
    RunMetric("answered_ratio", "Requests with a visible answer", "share", numerator=_answered,
              denominator=lambda r: 1.0, figure="answered_share", figure_scale=100.0,
              figure_label="answered requests (%)", prometheus="answered_requests"),
    RunMetric("lost_to_max_tokens", "Answers lost to max_tokens", "count",
              counted=lambda r: r.ok and r.finish_reason == "length" and not r.answered,
              prometheus="answers_lost_to_max_tokens"),
    RunMetric("reasoning_ratio", "Reasoning share of output", "share",
              numerator=lambda r: float(r.reasoning_tokens or 0) if _reasoning_counted(r) else 0.0,
              denominator=lambda r: float(r.completion_tokens or 0) if _reasoning_counted(r) else 0.0,
              figure="reasoning_share", figure_scale=100.0, figure_label="reasoning tokens (% of output)",
              prometheus="reasoning_tokens"),
    RunMetric("answer_json_ratio", "Answers that parsed as JSON", "share", numerator=lambda r: 1.0 if r.answer_json else 0.0,
              denominator=_judged, prometheus="json_answers"),
    RunMetric("answer_valid_ratio", "Answers valid (RESPONSE_FORMAT)", "share", interval=True,
              numerator=lambda r: 1.0 if r.answer_valid else 0.0, denominator=_judged, figure="valid_answer_share",
              figure_scale=100.0, figure_label="valid answers (%)", prometheus="valid_answers"),
    RunMetric("usd_per_million_output_tokens", "USD per million output tokens", "money", interval=True,
              prices="output_throughput_tok_s", per=1e6, validated_by="rps", decision=True),
    RunMetric("usd_per_million_total_tokens", "USD per million total tokens", "money", interval=True,
              prices="total_throughput_tok_s", per=1e6, validated_by="rps"),
    RunMetric("usd_per_thousand_requests", "USD per thousand requests", "money", interval=True, prices="rps", per=1e3,
              validated_by="rps"),
    RunMetric("usd_per_million_goodput_tokens", "USD per million goodput tokens", "money", interval=True,
              prices="goodput_output_tok_s", per=1e6, validated_by="rps", decision=True),
)
"""Every run-level figure, in summary.json's order; adding one is a row here (its Measures or Cost field follows)."""
RUN_BY_NAME: dict[str, RunMetric] = {m.name: m for m in RUN_METRICS}
MEASURED_RUN_METRICS: tuple[RunMetric, ...] = tuple(m for m in RUN_METRICS if m.home == "measures")
MONEY_METRICS: tuple[RunMetric, ...] = tuple(m for m in RUN_METRICS if m.kind == "money")


def run_metric_fields(rows: Iterable[RunMetric]) -> dict[str, str]:
    """The dataclass fields that hold ``rows``: each its value (float, int for a count) and its interval if kept."""
    hints: dict[str, str] = {}
    for m in rows:
        always = m.kind == "time" or (m.kind == "rate" and not m.good_only)  # 0.0 where nothing was measured
        hints[m.name] = "int" if m.kind == "count" else "float" if always else "float | None"
        if m.interval:
            hints[f"{m.name}_ci95"] = "list[float] | None"
    return hints
