"""The metric table (llmload/results/metrics.py): each row is whole, and the views that read it agree with it."""

import dataclasses
import re

import pytest

from factories import make_record
from llmload.results.metrics import (BY_NAME, MEASURED_RUN_METRICS, METRICS, OWN_METRICS, VLLM_FIRST, VLLM_METRICS,
                                     VLLM_ORDER, run_metric_fields)
from llmload.results.records import RequestRecord
from llmload.results.slo import SLO_METRICS
from llmload.results.summary import Distribution, Measures, summarize

pytestmark = pytest.mark.pure


def test_each_row_names_a_record_value_and_a_key_the_slo_grammar_takes():
    record = make_record(completion_tokens=5, itl_s=[0.01] * 4)
    for m in METRICS:
        assert re.fullmatch(r"[a-z0-9]+", m.name), m.name  # SLO=<name>_<stat><=<limit>: no underscore in a name
        assert hasattr(RequestRecord, m.record), f"{m.name}: RequestRecord has no {m.record}"
        assert isinstance(getattr(record, m.record), list) == m.pooled, m.name
        assert m.better in ("lower", "higher") and m.unit == "ms" and m.summary.endswith(f"_{m.unit}")
    assert len(BY_NAME) == len(METRICS) and len({m.summary for m in METRICS}) == len(METRICS)


def test_measures_holds_one_distribution_per_row_in_the_table_order():
    distributions = [f.name for f in dataclasses.fields(Measures) if f.type == "Distribution"]
    assert distributions == [m.summary for m in METRICS]
    summary = summarize([make_record(completion_tokens=5, itl_s=[0.01] * 4)])
    assert all(isinstance(getattr(summary, m.summary), Distribution) for m in METRICS)
    keys = list(summary.to_dict())
    run_level = list(run_metric_fields(MEASURED_RUN_METRICS))
    assert keys[:len(run_level)] == run_level  # the run-level figures first, in the table's order
    assert keys[len(run_level):len(run_level) + len(METRICS)] == [m.summary for m in METRICS]


def test_vllm_first_order():
    assert [m.vllm for m in VLLM_METRICS] == list(VLLM_ORDER)
    assert VLLM_FIRST == VLLM_METRICS + OWN_METRICS and set(VLLM_FIRST) == set(METRICS)


def test_an_slo_bounds_only_a_metric_where_lower_is_better():
    assert list(SLO_METRICS) == [m.name for m in METRICS if m.better == "lower"]


def test_a_pooled_metric_gives_every_gap_and_others_one_value_or_none():
    itl, ttfvt = BY_NAME["itl"], BY_NAME["ttfvt"]
    answered = make_record(ttfvt_s=0.3, completion_tokens=3, itl_s=[0.01, 0.02])
    unanswered = make_record(ttfvt_s=None, completion_tokens=1, itl_s=[])
    assert itl.sample_s([answered, unanswered]) == [0.01, 0.02]
    assert ttfvt.request_values_s(answered) == [0.3] and ttfvt.request_values_s(unanswered) == []
    assert ttfvt.path("p90") == "ttfvt_ms.p90" and ttfvt.scale == 1000.0


def test_a_row_reaches_every_view():
    """The decode row (added as a row and RequestRecord.decode_s, nothing else): summary, SLO, result block,
    web UI table, figure, crosscheck; not vllm_bench.json (vLLM bench has no such figure)."""
    from llmload.crosscheck.compare import METRICS as CROSSCHECK_METRICS, compare, suite_metrics
    from llmload.loadtest.live import LiveStats
    from llmload.results.report import format_result
    from llmload.results.slo import parse_slos
    from llmload.results.vllm_bench import vllm_bench_result
    from plots.figures import BEYOND_FIGURES, METRIC_FIGURES

    records = [make_record(request_id=f"r{i}", e2e_s=1.0 + i, ttft_s=0.2, itl_s=[0.4 + i], completion_tokens=2,
                           answered=True) for i in range(3)]
    summary = summarize(records, slos=parse_slos("decode_p90<=2s"))
    assert summary.decode_ms.median == pytest.approx(1800.0)  # E2E - TTFT: 0.8, 1.8, 2.8 s
    (verdict,) = summary.slo
    assert (verdict.slo, verdict.passed, verdict.value_ms) == ("decode_p90<=2s", False, pytest.approx(2600.0))
    assert summary.goodput_rps == pytest.approx(2 / summary.duration_s)  # the third request's 2.8 s is over 2 s
    block = format_result(summary)
    assert "Decode Time (E2E - TTFT)" in block and "Median decode time (ms):                1800.00" in block
    live = LiveStats()
    for r in records:
        live.add(r)
    assert {row["metric"]: row for row in live.rows()}["decode time (ms)"]["count"] == 3
    assert METRIC_FIGURES["decode_vs_users"] in BEYOND_FIGURES
    assert suite_metrics(summary)["median_decode_ms"] == pytest.approx(1800.0)
    row = next(r for r in compare({}, {"median_decode_ms": [1800.0]}, reasoning=False) if r.metric == "median_decode_ms")
    assert "median_decode_ms" in CROSSCHECK_METRICS and row.definitions == ("none", BY_NAME["decode"].description)
    assert not any("decode" in key for key in vllm_bench_result(records, {}))
