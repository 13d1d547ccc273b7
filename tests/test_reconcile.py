"""The server's account beside the client's (llmload/results/reconcile.py), from literal numbers."""

import pytest

from llmload.results.records import RequestRecord
from llmload.results.reconcile import HIDDEN_LEAD_TOKENS, TTFT_ALLOWANCE_MS, reconcile
from llmload.results.server_metrics import MetricsSample

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it


def _record(ttft_s: float, e2e_s: float = 1.0, prompt: int = 100, completion: int = 20, error: str | None = None):
    return RequestRecord(request_id="r", prompt_id="p", start_unix_s=0.0, start_monotonic_s=0.0, e2e_s=e2e_s,
                         ttft_s=ttft_s, ttfvt_s=ttft_s, tpot_s=None, itl_s=[0.010, 0.030], prompt_tokens=prompt,
                         completion_tokens=completion, error=error)


BEFORE = MetricsSample(t_s=0.0, prompt_tokens_total=1000.0, generation_tokens_total=500.0, ttft_sum_s=3.0,
                       ttft_count=10.0, itl_sum_s=2.0, itl_count=100.0, e2e_sum_s=9.0, e2e_count=10.0,
                       queue_sum_s=0.5, queue_count=10.0)


def _after(requests: int = 2, prompt: float = 200.0, generation: float = 40.0, ttft_s: float = 0.2) -> MetricsSample:
    return MetricsSample(t_s=5.0, prompt_tokens_total=1000.0 + prompt, generation_tokens_total=500.0 + generation,
                         ttft_sum_s=3.0 + ttft_s, ttft_count=10.0 + requests, itl_sum_s=2.0 + 0.76, itl_count=138.0,
                         e2e_sum_s=9.0 + 1.9, e2e_count=10.0 + requests, queue_sum_s=0.5 + 0.02,
                         queue_count=10.0 + requests)


def test_the_windows_means_and_totals_from_two_scrapes():
    result = reconcile(BEFORE, _after(), [_record(0.11), _record(0.13)])
    assert result.server_requests == result.client_requests == 2
    assert (result.server_prompt_tokens, result.client_prompt_tokens) == (200, 200)
    assert (result.server_generation_tokens, result.client_generation_tokens) == (40, 40)
    assert result.server_mean_ttft_ms == pytest.approx(100.0) and result.client_mean_ttft_ms == pytest.approx(120.0)
    assert result.server_mean_itl_ms == pytest.approx(20.0) and result.client_mean_itl_ms == pytest.approx(20.0)
    assert result.server_mean_e2e_ms == pytest.approx(950.0) and result.server_mean_queue_ms == pytest.approx(10.0)
    assert result.ttft_allowance_ms == pytest.approx(TTFT_ALLOWANCE_MS + 100.0 + HIDDEN_LEAD_TOKENS * 20.0)
    assert not result.suspect and result.reasons == ()


def test_other_traffic_in_the_window_is_suspect():
    result = reconcile(BEFORE, _after(requests=3, generation=60.0), [_record(0.11), _record(0.13)])
    assert result.suspect
    assert any("finished 3 requests" in r for r in result.reasons)
    assert any("60 generation tokens, the client's records 40" in r for r in result.reasons)


def test_a_client_ttft_far_above_the_servers_is_suspect():
    allowance_s = (TTFT_ALLOWANCE_MS + 100.0 + HIDDEN_LEAD_TOKENS * 20.0) / 1000
    ok = reconcile(BEFORE, _after(), [_record(0.1 + allowance_s - 0.001)] * 2)
    late = reconcile(BEFORE, _after(), [_record(0.1 + allowance_s + 0.001)] * 2)
    assert not ok.suspect
    assert late.suspect and "exceeds the server's" in late.reasons[0]


def test_a_client_ttft_below_the_servers_is_suspect():
    result = reconcile(BEFORE, _after(), [_record(0.05), _record(0.05)])
    assert result.suspect and "below the server's" in result.reasons[0]


def test_failed_requests_are_named_in_the_reason():
    result = reconcile(BEFORE, _after(requests=3), [_record(0.11), _record(0.13), _record(0.1, error="disconnected")])
    assert result.suspect and "1 requests failed or were cut short" in result.reasons[0]


def test_a_server_without_request_histograms_gives_none():
    plain = MetricsSample(t_s=0.0, prompt_tokens_total=1.0, generation_tokens_total=1.0)
    assert reconcile(plain, plain, [_record(0.1)]) is None


def test_a_restarted_server_leaves_the_counts_unknown():
    restarted = MetricsSample(t_s=5.0, prompt_tokens_total=10.0, generation_tokens_total=5.0, e2e_count=12.0)
    result = reconcile(BEFORE, restarted, [_record(0.11), _record(0.13)])
    assert result.server_prompt_tokens is None and result.server_generation_tokens is None
