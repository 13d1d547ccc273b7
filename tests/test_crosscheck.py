"""vLLM bench's figures beside llmload's (llmload/crosscheck/compare.py), from literal numbers."""

from dataclasses import replace
from pathlib import Path

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


def _options(**changes):
    from llmload.settings import parse_settings
    from llmload.options import CROSSCHECK_OPTIONS

    return parse_settings([f"{k}={v}" for k, v in {"HOST": "http://127.0.0.1:9", "PROMPTS": "random:24:4", **changes}.items()],
                          CROSSCHECK_OPTIONS)


def test_each_tool_of_each_repeat_draws_its_own_fresh_prompts_in_the_order_they_run():
    from llmload.crosscheck.runner import _suite_settings, bench_prompts
    from llmload.crosscheck.runs import plan_runs
    from llmload.loadtest.runconfig import parse_run_args
    from llmload.loadtest.workload import workload_of

    runs = plan_runs(3, first_start=10)
    assert [(r.index, r.repeat, r.tool, r.prompt_start) for r in runs] == [
        (0, 0, "vllm_bench", 10), (1, 0, "llmload", 11), (2, 1, "llmload", 12), (3, 1, "vllm_bench", 13),
        (4, 2, "vllm_bench", 14), (5, 2, "llmload", 15)]
    options = _options(PROMPT_START=10, GPU="a100", CACHE_RESET="on", USERS=2)
    texts = {}
    for run in runs[:2]:
        settings = _suite_settings(options, "http://127.0.0.1:9", "m", run.prompt_start, 5, Path("out"))
        assert {"GPU=a100", f"PROMPT_START={run.prompt_start}", "ORDER=sequence", "CACHE_RESET=on", "SEED=0",
                "PROMPTS=random:24:4:5"} <= set(settings)
        # The suite's run draws, in order, the texts a bench run at the same start would send: one workload for both.
        workload = workload_of(parse_run_args(settings))
        suite = [p.messages[-1]["content"] for p in workload.prompts[workload.first_fresh:][:5]]
        assert suite == bench_prompts("random:24:4:5", 0, run.prompt_start, 5)
        texts[run.tool] = suite
    # Each tool of a repeat its own prompts (nothing in common for the server's cache to find), of the same lengths.
    assert not set(texts["vllm_bench"]) & set(texts["llmload"]) and len(texts["llmload"]) == 5
    assert bench_prompts("random:24:4:5", 0, 12, 5) != bench_prompts("random:24:4:5", 0, 11, 5)


def test_crosscheck_takes_gpu_and_refuses_a_warm_cache_before_sending(cli, tmp_path):
    assert _options(GPU="a100").gpu == "a100" and _options().gpu == "h100"
    done = cli("crosscheck", "HOST=http://127.0.0.1:9", "PROMPTS=random:64:8", "CACHE=warm", f"OUT={tmp_path / 'cc'}")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "CACHE=warm" in done.stderr
    assert not (tmp_path / "cc").exists()


def _account(index, repeat, tool, hit_rate, completed=4, server=4, **more):
    from llmload.crosscheck.runs import PlannedRun, RunAccount

    return RunAccount(PlannedRun(index, repeat, tool, index), "off", hit_rate, completed, 0, server, 256, **more)


def test_a_run_whose_hit_rate_exceeds_the_other_tools_by_more_than_5_points_is_flagged():
    from llmload.crosscheck.runs import format_runs, hit_rate_excess

    # The H100's crosscheck on the old code: the second tool of each repeat found the first's prompts cached.
    runs = [_account(0, 0, "vllm_bench", 0.059), _account(1, 0, "llmload", 0.997),
            _account(2, 1, "llmload", 0.00), _account(3, 1, "vllm_bench", 0.974),
            _account(4, 2, "vllm_bench", 0.10), _account(5, 2, "llmload", 0.149),  # 4.9 points: not flagged
            _account(6, 3, "vllm_bench", None), _account(7, 3, "llmload", 0.9)]  # no counters: nothing to compare
    excess = hit_rate_excess(runs)
    assert set(excess) == {1, 3} and excess[1] == pytest.approx(93.8) and excess[3] == pytest.approx(97.4)
    table = format_runs(runs)
    assert "| 2 | 1 | llmload | 1 | off | 99.7% CACHED +93.8 pts | 4 / 4 | n/a / n/a |" in table
    assert "| 1 | 1 | vllm_bench | 0 | off | 5.9% | 4 / 4 | n/a / n/a |" in table
    assert "| 6 | 3 | llmload | 5 | off | 14.9% |" in table
    assert table.count("warning: run") == 2
    assert ("warning: run 4 (repeat 2, vllm_bench): the server found 97.4% of its prompt tokens cached, 97.4 points "
            "more than in llmload's run (0.0%)") in table


def test_the_streams_vllm_bench_counted_completed_but_the_server_did_not_are_named():
    from llmload.crosscheck.runs import count_note, format_runs, short_streams

    # --save-detailed: request 1's stream ended in the server's error event after 130 of 256 tokens (no usage: its text
    # tokenized again); request 3 failed outright (an error, 0 tokens): the bench counts 3 completed, the server 2.
    result = {"completed": 3, "failed": 1, "errors": ["", "", "", "Bad Request"], "output_lens": [256, 130, 256, 0]}
    short = short_streams(result, 256)
    assert [(s.request, s.output_tokens) for s in short] == [(1, 130)]
    assert short_streams({"completed": 3}, 256) == ()  # without --save-detailed: nothing to read
    bench = _account(0, 0, "vllm_bench", 0.0, completed=3, server=2, short=short)
    assert bench.counted_differently
    note = count_note(bench)
    assert note.startswith("run 1 (repeat 1, vllm_bench): vllm_bench counted 3 completed and 0 failed, the server "
                           "finished 2 (its E2E histogram's count over the run's window)")
    assert "once a chunk with choices came" in note
    assert note.endswith("1 of its completed streams ended short of the 256 tokens every request forces (an error "
                         "ends a stream without its usage): request 1 (130 tokens)")
    suite = _account(1, 0, "llmload", 0.0, completed=2, server=2, failures=("stream_error: HarmonyError (1)",))
    assert not suite.counted_differently and count_note(suite) is None
    table = format_runs([bench, suite])
    assert "| 3 / 2 DIFFER |" in table and "Counted differently:\n- run 1 (repeat 1, vllm_bench)" in table
    unexplained = count_note(_account(0, 0, "vllm_bench", 0.0, completed=3, server=2))
    assert unexplained.endswith("none of its completed streams ended short of the tokens forced")
    counted_by_suite = count_note(_account(1, 0, "llmload", 0.0, completed=3, server=2, failures=("timeout (1)",)))
    assert counted_by_suite.endswith("its failures: timeout (1)")
