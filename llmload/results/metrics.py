"""The metric table: one row per per-request metric, the one list every view of the metrics reads.

A row says where a request's value lives on its record (a RequestRecord field, or a property that derives it
there: per-request formulas live with the record), the Distribution summary.json keeps of it, its unit and
labels, which direction is better, and where it is shown. The summary, the SLO grammar, the result block, the
web UI's table and charts, the figures, vllm_bench.json and the crosscheck read the rows; adding a metric is a
row here plus its formula on RequestRecord.

Rows are in summary.json's order. The metrics vLLM bench reports too name their key there (``vllm``): views laid
out like vLLM's (the result block, vllm_bench.json, the crosscheck) show those first, in vLLM's order, then ours.
Groupings (each effort of a mix: ``by_effort``) are not metrics: each group is measured by every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from llmload.results.records import RequestRecord

__all__ = ["Metric", "METRICS", "BY_NAME", "VLLM_ORDER", "VLLM_METRICS", "OWN_METRICS", "VLLM_FIRST"]

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
           "to [DONE], after the usage chunk", vllm="e2el", live=False, prometheus="e2e_request_latency_seconds"),
    Metric("ttft", "ttft_s", "ttft_ms", "TTFT", "Time to first token", "Time to First Token",
           "to the first chunk carrying a token, reasoning or answer", vllm="ttft", chart=True, figure=True,
           prometheus="time_to_first_token_seconds"),
    Metric("ttfvt", "ttfvt_s", "ttfvt_ms", "TTFVT", "Time to first visible token", "Time to First Visible Token",
           "to the first answer (final-channel) token, after the reasoning", chart=True, figure=True,
           prometheus="time_to_first_visible_token_seconds"),
    Metric("tpot", "tpot_s", "tpot_ms", "TPOT", "Time per output token", "Time per Output Token (excl. 1st token)",
           "(E2E - TTFT) / (output tokens - 1)", needs_two_events=True, vllm="tpot", figure=True, per_token=True,
           prometheus="time_per_output_token_seconds"),
    Metric("itl", "itl_s", "itl_ms", "ITL", "Inter-token latency", "Inter-token Latency",
           "gaps between chunks carrying tokens", pooled=True, needs_two_events=True, vllm="itl", chart=True,
           prometheus="inter_token_latency_seconds"),
    Metric("decode", "decode_s", "decode_ms", "decode time", "Decode time", "Decode Time (E2E - TTFT)",
           "E2E - TTFT: the stream after its first token (vLLM's server times it as request_decode_time_seconds)",
           needs_two_events=True, figure=True, prometheus="request_decode_time_seconds"),
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
