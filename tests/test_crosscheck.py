"""vLLM bench's figures beside llmload's (llmload/crosscheck/compare.py), from literal numbers."""

from dataclasses import replace

import pytest

from llmload.crosscheck.compare import METRICS, SERVER_KEYS, SERVER_TOLERANCE_PCT, bench_metrics, compare, format_table, suite_metrics
from llmload.crosscheck.runner import random_workload
from llmload.errors import ConfigError
from llmload.results.summary import Distribution, TokenStats, summarize

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

BENCH_RESULT = {"completed": 2, "total_input_tokens": 512, "total_output_tokens": 64, "request_throughput": 2.0, "output_throughput": 64.0, "total_token_throughput": 320.0,
                **{f"{stat}_{name}_ms": value for name, value in (("ttft", 50.0), ("tpot", 10.0), ("itl", 9.0),
                                                                 ("e2el", 360.0)) for stat in ("mean", "median", "p99")},
                # --save-detailed: per request, seconds; the failed request (error text, no gaps) is left out.
                "ttfts": [0.040, 0.060, 0.0], "itls": [[0.012, 0.009], [0.008], []], "errors": ["", "", "timeout"]}


def _distribution(value: float) -> Distribution:
    return Distribution(count=4, mean=value, median=value, median_ci95=None, p90=value, p90_ci95=None, p99=value,
                        p99_ci95=None, min=value, max=value)


SUMMARY = replace(summarize([]), rps=2.1, output_throughput_tok_s=66.0, total_throughput_tok_s=330.0,
                  ttft_ms=_distribution(55.0), tpot_ms=_distribution(10.0), itl_ms=_distribution(10.0),
                  response_time_ms=_distribution(365.0), ttfvt_ms=_distribution(120.0),
                  reasoning_tokens=TokenStats(count=4, total=96, mean=24.0, median=None, min=None, max=None))


def test_both_tools_give_every_metric_under_one_name():
    bench, suite = bench_metrics(BENCH_RESULT), suite_metrics(SUMMARY)
    assert set(bench) | set(suite) == set(METRICS)
    assert (bench["request_throughput_rps"], bench["mean_e2e_ms"], bench["p99_itl_ms"]) == (2.0, 360.0, 9.0)
    assert (suite["request_throughput_rps"], suite["mean_e2e_ms"], suite["median_ttft_ms"]) == (2.1, 365.0, 55.0)
    assert (bench["requests_completed"], bench["total_input_tokens"], bench["total_output_tokens"]) == (2, 512, 64)
    assert (suite["requests_completed"], suite["total_input_tokens"], suite["total_output_tokens"]) == (0, 0, 0)
    # Each tool's own figures: vLLM bench's role-only chunk gap, llmload's first answer token and reasoning.
    assert "mean_ttfvt_ms" not in bench and "median_first_itl_ms" not in suite
    assert (suite["p99_ttfvt_ms"], suite["mean_reasoning_tokens"]) == (120.0, 24.0)


def test_the_time_to_the_first_token_is_read_from_vllm_benchs_own_stamps():
    bench = bench_metrics(BENCH_RESULT)
    assert bench["mean_first_itl_ms"] == bench["median_first_itl_ms"] == pytest.approx(10.0)  # (12 + 8) / 2
    assert bench["mean_first_token_ms"] == pytest.approx(60.0)  # (40 + 12 + 60 + 8) / 2
    assert bench["first_itl_under_1ms_share"] == 0.0
    merged = {**BENCH_RESULT, "itls": [[0.0004, 0.009], [0.008], []]}  # the first token read with the role-only chunk
    assert bench_metrics(merged)["first_itl_under_1ms_share"] == 0.5
    assert suite_metrics(SUMMARY)["mean_first_token_ms"] == 55.0  # llmload's TTFT is that time already
    without_details = {k: v for k, v in BENCH_RESULT.items() if k not in ("ttfts", "itls", "errors")}
    assert "mean_first_token_ms" not in bench_metrics(without_details)


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


def test_each_tools_definition_is_named_and_reasoning_adds_what_it_changes():
    plain = {r.metric: r for r in compare({}, {}, reasoning=False)}
    reasoning = {r.metric: r for r in compare({}, {}, reasoning=True)}
    bench_ttft, suite_ttft = plain["mean_ttft_ms"].definitions
    assert "role-only chunk" in bench_ttft and "first chunk carrying a token" in suite_ttft
    assert "[DONE]" in plain["p99_e2e_ms"].definitions[1] and plain["p99_e2e_ms"].differs
    assert not plain["median_tpot_ms"].differs  # one formula, over each tool's own E2E and TTFT
    assert plain["mean_ttfvt_ms"].definitions[0] == "none" and plain["mean_first_itl_ms"].definitions[1].startswith("none")
    assert not any(row.reasoning for row in plain.values())
    assert "<|channel|>" in reasoning["mean_ttft_ms"].reasoning and not reasoning["mean_e2e_ms"].reasoning


def test_the_table_has_a_row_per_metric_and_names_each_definition_once():
    rows = compare({m: [1.0, 2.0] for m in METRICS}, {m: [1.5, 2.5] for m in METRICS}, reasoning=False)
    table = format_table(rows)
    assert len([line for line in table.splitlines() if line.startswith("| ")]) == 1 + len(METRICS)
    assert table.count("role-only chunk") == 4  # once each for TTFT, ITL, the first ITL gap and its under-1-ms share
    assert table.count("[DONE]") == 1 and table.count("| the same |") == 2  # E2E once; counts and TPOT: one definition
    assert "| mean_ttft_ms | 1.50 (1.00-2.00) | 2.00 (1.50-2.50) | +0.50 | n/a | n/a | yes (spread) |" in table


def test_on_a_reasoning_model_the_table_says_what_reasoning_changes():
    rows = compare({"mean_ttft_ms": [40.0, 41.0], "mean_first_token_ms": [52.0, 53.0]},
                   {"mean_ttft_ms": [52.5, 53.0], "mean_first_token_ms": [52.5, 53.0], "mean_ttfvt_ms": [90.0, 91.0]},
                   reasoning=True)
    table = format_table(rows)
    assert "| mean_ttft_ms | 40.50 (40.00-41.00) | 52.75 (52.50-53.00) | +12.25 | n/a | n/a | NO (spread) |" in table
    assert "| mean_first_token_ms | 52.50 (52.00-53.00) | 52.75 (52.50-53.00) | +0.25 | n/a | n/a | yes (spread) |" in table
    assert "| mean_ttfvt_ms | n/a | 90.50 (90.00-91.00) | n/a | n/a | n/a | n/a |" in table
    notes = table.split("On a reasoning model:")[1]
    assert "- mean_ttft_ms:" in notes and "<|channel|>" in notes and "- mean_ttfvt_ms:" in notes


def test_the_server_referees_what_it_counts():
    # The server ran slower during llmload's repeats (its own mean TPOT 5.0 ms against 4.1 ms in vLLM bench's): the
    # tools' TPOTs differ by ~20% and lie outside their spreads, but each is within 2% of the server it measured.
    server = {"vllm_bench": {"mean_tpot_ms": [4.1, 4.2, 4.0], "requests_completed": [100, 100, 100]},
              "llmload": {"mean_tpot_ms": [5.0, 5.1, 4.9], "requests_completed": [100, 100, 99]}}
    rows = {r.metric: r for r in compare(
        {"mean_tpot_ms": [4.15, 4.25, 4.05], "requests_completed": [100, 100, 100], "mean_ttft_ms": [50.0, 51.0, 52.0]},
        {"mean_tpot_ms": [5.05, 5.15, 4.95], "requests_completed": [100, 100, 100], "mean_ttft_ms": [50.5, 51.5, 52.5]},
        reasoning=False, server=server)}
    tpot = rows["mean_tpot_ms"]
    assert tpot.within_spread is False and tpot.refereed and tpot.agree_by_server and tpot.agree
    assert tpot.vllm_bench_deviation_pct[0] == pytest.approx(100 * 0.05 / 4.1)
    assert all(abs(d) < 2 for d in tpot.vllm_bench_deviation_pct + tpot.llmload_deviation_pct)
    # Counts agree only when equal to the server's: llmload's 100 against the server's 99 in its third repeat.
    requests = rows["requests_completed"]
    assert requests.refereed and requests.agree is False and requests.llmload_deviation_pct[2] == pytest.approx(100 / 99)
    ttft = rows["mean_ttft_ms"]  # the server gave no TTFT here: judged by the spreads
    assert not ttft.refereed and ttft.agree_by_server is None and ttft.agree is True
    table = format_table(list(rows.values()))
    assert table.startswith("Agreement: where the server counts a metric, its /metrics over each tool's own runs")
    assert "| mean_tpot_ms | 4.15 (4.05-4.25) | 5.05 (4.95-5.15) | +0.90 | +1.2% (+1.2 to +1.2) |" in table
    assert "| yes (server) |" in table and "| NO (server) |" in table


def test_tools_that_read_the_server_differently_disagree():
    server = {tool: {"mean_e2e_ms": [100.0, 100.0]} for tool in ("vllm_bench", "llmload")}
    gap = SERVER_TOLERANCE_PCT + 1.0
    (row,) = [r for r in compare({"mean_e2e_ms": [100.0, 100.0]}, {"mean_e2e_ms": [100.0 + gap, 100.0 + gap]},
                                 reasoning=False, server=server) if r.metric == "mean_e2e_ms"]
    assert row.within_spread is False and row.agree_by_server is False
    assert set(SERVER_KEYS) == {"requests_completed", "total_input_tokens", "total_output_tokens", "mean_ttft_ms",
                                "mean_tpot_ms", "mean_itl_ms", "mean_e2e_ms"}


def test_the_workload_is_random_in_out():
    assert random_workload("random:512:128") == (512, 128)
    assert random_workload("builtin") == (256, 128)
    for bad in ("2k", "random:512", "random:0:10", "sharegpt:x.json"):
        with pytest.raises(ConfigError, match="random:IN:OUT"):
            random_workload(bad)
