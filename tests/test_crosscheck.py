"""vLLM bench's figures beside llmload's (llmload/crosscheck/compare.py), from literal numbers."""

import pytest

from llmload.crosscheck.compare import METRICS, bench_metrics, compare, format_table, suite_metrics
from llmload.crosscheck.runner import random_workload
from llmload.errors import ConfigError

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

BENCH_RESULT = {"request_throughput": 2.0, "output_throughput": 64.0, "total_token_throughput": 320.0,
                **{f"{stat}_{name}_ms": value for name, value in (("ttft", 50.0), ("tpot", 10.0), ("itl", 9.0),
                                                                 ("e2el", 360.0)) for stat in ("mean", "median", "p99")}}


def _distribution(value: float) -> dict:
    return {"count": 4, "mean": value, "median": value, "p90": value, "p99": value, "min": value, "max": value}


SUMMARY = {"rps": 2.1, "output_throughput_tok_s": 66.0, "total_throughput_tok_s": 330.0, "ttft_ms": _distribution(55.0),
           "tpot_ms": _distribution(10.0), "itl_ms": _distribution(10.0), "response_time_ms": _distribution(365.0)}


def test_both_tools_give_every_metric_under_one_name():
    bench, suite = bench_metrics(BENCH_RESULT), suite_metrics(SUMMARY)
    assert set(bench) == set(suite) == set(METRICS)
    assert (bench["request_throughput_rps"], bench["mean_e2e_ms"], bench["p99_itl_ms"]) == (2.0, 360.0, 9.0)
    assert (suite["request_throughput_rps"], suite["mean_e2e_ms"], suite["median_ttft_ms"]) == (2.1, 365.0, 55.0)


def test_agreement_is_judged_by_both_spreads():
    rows = {r.metric: r for r in compare({"mean_ttft_ms": [50.0, 54.0, 52.0], "mean_itl_ms": [9.0, 9.1, 9.0]},
                                         {"mean_ttft_ms": [55.0, 57.0, 56.0], "mean_itl_ms": [10.0, 10.1, 10.0]},
                                         reasoning=False)}
    ttft, itl = rows["mean_ttft_ms"], rows["mean_itl_ms"]
    assert ttft.difference == pytest.approx(4.0) and ttft.within_spread  # 4.0 <= 4.0 + 2.0
    assert itl.difference == pytest.approx(1.0) and itl.within_spread is False  # 1.0 > 0.1 + 0.1


def test_one_repeat_cannot_judge_agreement():
    (row,) = [r for r in compare({"mean_ttft_ms": [50.0]}, {"mean_ttft_ms": [50.0]}, False) if r.metric == "mean_ttft_ms"]
    assert row.within_spread is None


def test_definitions_are_named_and_reasoning_adds_what_it_changes():
    plain = {r.metric: r.definition for r in compare({}, {}, reasoning=False)}
    reasoning = {r.metric: r.definition for r in compare({}, {}, reasoning=True)}
    assert "role-only chunk" in plain["mean_ttft_ms"] and "[DONE]" in plain["p99_e2e_ms"]
    assert "<|channel|>" not in plain["mean_ttft_ms"] and "<|channel|>" in reasoning["mean_ttft_ms"]
    assert reasoning["mean_e2e_ms"] == plain["mean_e2e_ms"]


def test_the_table_has_a_row_per_metric_and_names_each_definition_once():
    rows = compare({m: [1.0, 2.0] for m in METRICS}, {m: [1.5, 2.5] for m in METRICS}, reasoning=False)
    table = format_table(rows)
    assert len(table.splitlines()) == 2 + len(METRICS)
    assert table.count("role-only") == 2 and table.count("[DONE]") == 1  # once for TTFT and ITL each, once for E2E
    assert "| mean_ttft_ms | 1.50 (1.00-2.00) | 2.00 (1.50-2.50) | +0.50 | yes |" in table


def test_the_workload_is_random_in_out():
    assert random_workload("random:512:128") == (512, 128)
    assert random_workload("builtin") == (256, 128)
    for bad in ("2k", "random:512", "random:0:10", "sharegpt:x.json"):
        with pytest.raises(ConfigError, match="random:IN:OUT"):
            random_workload(bad)
