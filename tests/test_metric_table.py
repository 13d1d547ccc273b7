"""The metric table (llmload/results/metrics.py): each row is whole, and the views that read it agree with it."""

import dataclasses
import re

import pytest

from factories import make_record
from llmload.results.metrics import BY_NAME, METRICS, OWN_METRICS, VLLM_FIRST, VLLM_METRICS, VLLM_ORDER
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
    assert list(summary.to_dict())[13:13 + len(METRICS)] == [m.summary for m in METRICS]  # after reasoning_ratio


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
