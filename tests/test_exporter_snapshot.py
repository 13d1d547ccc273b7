"""METRICS_PORT's scrape is a snapshot: every line of one scrape holds the figures of the instant it began, however
many records the run adds while its chunks go out (the exporter lets the streams run between two chunks)."""

import copy

import pytest
from prometheus_client.parser import text_string_to_metric_families

from factories import make_record
from llmload.results.run_metrics import LATENCIES, RunMetrics, render

pytestmark = pytest.mark.pure

GAPS = 90


def _record(i: int, effort: str, ok: bool = True):
    """Request ``i``: 91 output tokens in 91 events 20 ms apart, or a timeout."""
    if not ok:
        return make_record(request_id=f"r{i}", effort=effort, error="timeout", ttft_s=None, itl_s=[])
    return make_record(request_id=f"r{i}", effort=effort, ttft_s=0.2, ttfvt_s=0.9, itl_s=[0.02] * GAPS,
                       prompt_tokens=100, completion_tokens=91, reasoning_tokens=40)


def _scrape_while_the_run_goes_on(metrics: RunMetrics, adds_per_chunk: int) -> tuple[bytes, int]:
    """One scrape's text and its chunks, the run adding ``adds_per_chunk`` records (a new effort among them) after
    each chunk."""
    chunks, added = [], 0
    for chunk in render(metrics.families(users=4, in_flight=3)):
        chunks.append(chunk)
        for _ in range(adds_per_chunk):
            effort = ("low", "high", "medium")[added % 3]  # medium: an effort the scrape's instant did not have
            metrics.add(_record(1000 + added, effort, ok=added % 5 != 4))
            added += 1
    return b"".join(chunks), len(chunks)


def _series(text: bytes) -> dict:
    """(sample name, effort or None, outcome or le or None) -> value."""
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[(s.name, s.labels.get("effort"), s.labels.get("outcome") or s.labels.get("le"))] = s.value
    return out


def _started(ok_low: int, ok_high: int, failed_low: int) -> RunMetrics:
    metrics = RunMetrics("results/r1", "h100", ["low", "high"], api="responses", scheduled_rps=2.0)
    records = [_record(i, "low") for i in range(ok_low)] + [_record(100 + i, "high") for i in range(ok_high)]
    records += [_record(200 + i, "low", ok=False) for i in range(failed_low)]
    for record in records:
        metrics.add(record)
    return metrics


def test_a_scrape_is_the_text_of_the_instant_it_began():
    metrics = _started(ok_low=7, ok_high=3, failed_low=2)
    at_start = b"".join(render(copy.deepcopy(metrics).families(users=4, in_flight=3)))
    text, chunks = _scrape_while_the_run_goes_on(metrics, adds_per_chunk=5)
    assert chunks >= 4  # records went in between the chunks of this scrape
    assert text == at_start


def test_every_family_of_one_scrape_counts_the_same_requests():
    metrics = _started(ok_low=7, ok_high=3, failed_low=2)
    text, _ = _scrape_while_the_run_goes_on(metrics, adds_per_chunk=3)
    series = _series(text)
    assert ("llmload_requests_total", "medium", "ok") not in series  # the new effort came after the instant
    for effort, ok, failed in (("low", 7, 2), ("high", 3, 0)):
        assert series["llmload_requests_total", effort, "ok"] == ok
        assert series["llmload_requests_total", effort, "timeout"] == failed
        assert series["llmload_output_tokens_total", effort, None] == 91 * ok
        assert series["llmload_reasoning_tokens_total", effort, None] == 40 * ok
        for name in LATENCIES:
            count = GAPS * ok if name == "inter_token_latency_seconds" else ok
            assert series[f"llmload_{name}_count", effort, None] == count, name
            assert series[f"llmload_{name}_bucket", effort, "+Inf"] == count, name
        assert series["llmload_inter_token_latency_seconds_sum", effort, None] == pytest.approx(0.02 * GAPS * ok)
        assert series["llmload_time_to_first_token_seconds_sum", effort, None] == pytest.approx(0.2 * ok)


def test_the_gauges_are_the_callers_at_the_instant():
    series = _series(_scrape_while_the_run_goes_on(_started(1, 1, 0), adds_per_chunk=1)[0])
    assert series["llmload_users", None, None] == 4 and series["llmload_requests_in_flight", None, None] == 3
    assert series["llmload_scheduled_requests_per_second", None, None] == 2.0


def test_every_series_carries_the_api():
    text = b"".join(render(_started(1, 1, 1).families(users=1, in_flight=0)))
    for family in text_string_to_metric_families(text.decode()):
        assert all(s.labels.get("api") == "responses" for s in family.samples), family.name
