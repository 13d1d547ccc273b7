"""Metric math against hand-computed cases."""

import pytest

from factories import make_record
from llmload.results.records import tpot_s
from llmload.results.summary import distribution, summarize, token_stats

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it


def rec(start, e2e, ttft, itl, out, prompt=10, reasoning=None, answered=True, finish="stop", error=None, ttfvt=None):
    return make_record(start_monotonic_s=start, e2e_s=e2e, ttft_s=ttft, ttfvt_s=ttfvt, itl_s=itl, prompt_tokens=prompt,
                       completion_tokens=out, reasoning_tokens=reasoning, finish_reason=finish, answered=answered, error=error)


def test_tpot_follows_vllm():
    assert tpot_s(1.0, 0.1, 10, 10) == pytest.approx(0.1)
    assert tpot_s(1.0, 0.1, 1, 1) is None and tpot_s(1.0, None, 5, 0) is None


def test_an_answer_sent_in_one_event_has_no_tpot():
    # 10 tokens in one event: nothing to time between them (the formula would give the wait for [DONE] / 9).
    assert tpot_s(1.0, 0.999, 10, 1) is None and tpot_s(1.0, 0.1, 10, 2) == pytest.approx(0.1)


def test_distribution_is_exact_linear_interpolation():
    d = distribution([0.001, 0.002, 0.003, 0.004], 1000.0)
    assert (d.count, d.mean, d.median, d.min, d.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert d.p90 == pytest.approx(3.7) and d.p99 == pytest.approx(3.97)
    assert distribution([]).median is None


def test_token_stats():
    t = token_stats([1, 2, 3, 10])
    assert (t.total, t.mean, t.median, t.min, t.max) == (16, 4.0, 2.5, 1, 10)


def test_summary_of_a_small_run():
    records = [
        rec(0.0, 2.0, 0.5, [0.5, 0.5, 0.5], 4, reasoning=2, ttfvt=1.0),
        rec(1.0, 3.0, 1.0, [1.0, 1.0], 3, reasoning=3, answered=False, finish="length"),
        rec(2.0, 0.1, None, [], None, error="http_500"),
        rec(3.0, 0.5, 0.2, [], 1, error="interrupted"),
    ]
    s = summarize(records, {"users": 2})
    assert (s.requests_ok, s.requests_failed, s.requests_interrupted) == (2, 1, 1)
    assert s.duration_s == 4.0  # first start 0.0, last end 1.0 + 3.0
    assert s.rps == 0.5
    assert s.output_throughput_tok_s == 7 / 4
    assert s.total_throughput_tok_s == (7 + 20) / 4
    assert s.answered_ratio == 0.5 and s.lost_to_max_tokens == 1
    assert s.reasoning_ratio == 5 / 7
    assert s.response_time_ms.median == 2500.0
    assert s.ttft_ms.mean == 750.0
    assert s.ttfvt_ms.count == 1 and s.ttfvt_ms.max == 1000.0
    assert s.tpot_ms.mean == pytest.approx((500.0 + 1000.0) / 2)
    assert s.itl_ms.count == 5 and s.itl_ms.median == 500.0
    assert s.output_tokens.total == 7 and s.prompt_tokens.total == 20
    assert s.errors == {"http_500": 1, "interrupted": 1}
    assert s.finish_reasons == {"stop": 1, "length": 1}
    assert s.config == {"users": 2}


def test_summary_of_nothing():
    s = summarize([])
    assert s.requests_ok == 0 and s.rps == 0.0 and s.answered_ratio is None and s.ttft_ms.mean is None


def test_decode_time_is_e2e_after_the_first_token():
    first, second = rec(0.0, 1.0, 0.2, [0.4, 0.4], 3), rec(1.0, 2.0, 0.5, [1.5], 2)
    assert first.decode_s == pytest.approx(0.8) and second.decode_s == pytest.approx(1.5)
    assert rec(0.0, 1.0, 0.99, [], 10).decode_s is None  # one event: decoded before the client saw a token
    summary = summarize([first, second])
    assert summary.decode_ms.count == 2 and summary.decode_ms.mean == pytest.approx((800 + 1500) / 2)
