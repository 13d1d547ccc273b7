"""The server's account beside the client's (llmload/results/reconcile.py), from literal numbers."""

import pytest

from factories import make_record
from llmload.results.generator import GeneratorCheck, LagMs, ProcessCheck
from llmload.results.reconcile import E2E_FRONT_END_SHARE, HIDDEN_LEAD_TOKENS, QUEUE_SHARE, TTFT_ALLOWANCE_MS, reconcile
from llmload.results.server_metrics import MetricsSample

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it


def _record(ttft_s: float, e2e_s: float = 1.0, prompt: int = 100, completion: int = 20, error: str | None = None,
            itl_s=(0.010, 0.030)):
    return make_record(e2e_s=e2e_s, ttft_s=ttft_s, ttfvt_s=ttft_s, tpot_s=None, itl_s=list(itl_s), prompt_tokens=prompt,
                       completion_tokens=completion, error=error)


BEFORE = MetricsSample(t_s=0.0, prompt_tokens_total=1000.0, generation_tokens_total=500.0, ttft_sum_s=3.0,
                       ttft_count=10.0, itl_sum_s=2.0, itl_count=100.0, e2e_sum_s=9.0, e2e_count=10.0,
                       queue_sum_s=0.5, queue_count=10.0)


def _after(requests: int = 2, prompt: float = 200.0, generation: float = 40.0, ttft_s: float = 0.2,
           queue_s: float = 0.02) -> MetricsSample:
    return MetricsSample(t_s=5.0, prompt_tokens_total=1000.0 + prompt, generation_tokens_total=500.0 + generation,
                         ttft_sum_s=3.0 + ttft_s, ttft_count=10.0 + requests, itl_sum_s=2.0 + 0.76, itl_count=138.0,
                         e2e_sum_s=9.0 + 1.9, e2e_count=10.0 + requests, queue_sum_s=0.5 + queue_s,
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
    assert result.e2e_allowance_ms == pytest.approx(TTFT_ALLOWANCE_MS + E2E_FRONT_END_SHARE * 950.0)
    assert result.tokens_per_event == pytest.approx(20 / 3) and result.client_lag_p99_ms is None
    assert not result.suspect and result.reasons == () and result.causes == ()


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


def _generator(lag_p99_ms: float, limited: bool = False) -> GeneratorCheck:
    lag = LagMs(count=100, p50=0.1, p99=lag_p99_ms, max=lag_p99_ms)
    return GeneratorCheck(limited, [ProcessCheck("load process", 0.2, 1.0, 1, 0, LagMs(0, None, None, None), lag,
                                                 ["event-loop lag"] if limited else [], False)])


def test_a_ttft_gap_from_answers_sent_whole_names_bursts():
    # Each answer's 20 tokens in one event: the client's first token is the answer's end.
    records = [_record(0.9, e2e_s=0.9, itl_s=())] * 2
    result = reconcile(BEFORE, _after(), records)
    assert result.tokens_per_event == 20.0
    assert result.suspect and result.reasons[0].endswith("cause: bursts")
    assert result.causes[0].startswith("bursts: the server sent its tokens in bursts (20.0 tokens per event, "
                                       "every answer in one event)")


def test_an_e2e_gap_beyond_the_allowance_is_flagged_with_its_cause():
    allowance_s = (TTFT_ALLOWANCE_MS + E2E_FRONT_END_SHARE * 950.0) / 1000
    ok = reconcile(BEFORE, _after(), [_record(0.11, e2e_s=0.95 + allowance_s - 0.001)] * 2, _generator(1.0))
    late = reconcile(BEFORE, _after(), [_record(0.11, e2e_s=0.95 + allowance_s + 0.001)] * 2, _generator(1.0))
    assert not ok.suspect
    assert late.suspect and late.reasons[0].startswith("the client's mean E2E exceeds the server's by")
    assert late.reasons[0].endswith("cause: outside the server's clock") and late.client_lag_p99_ms == 1.0
    assert late.causes[0].startswith("outside the server's clock: the client's lag p99 1.0 ms, 6.7 tokens per event")


def test_a_ttft_gap_from_events_sent_together_names_the_front_ends_bursts():
    # Token by token in events, but the first ten came at once (gaps under a tenth of the server's 20 ms ITL).
    records = [_record(0.9, e2e_s=1.0, itl_s=[0.0005] * 9 + [0.01] * 10)] * 2
    result = reconcile(BEFORE, _after(), records, _generator(1.0))
    assert result.tokens_per_event == pytest.approx(1.0) and result.tokens_per_burst == pytest.approx(20 / 11)
    assert result.reasons[0].endswith("cause: outside the server's clock")  # under 2 tokens per burst: not bursts
    bursty = [_record(0.9, e2e_s=1.0, itl_s=[0.0005] * 14 + [0.01] * 5)] * 2
    result = reconcile(BEFORE, _after(), bursty, _generator(1.0))
    assert result.tokens_per_burst == pytest.approx(20 / 6) and result.reasons[0].endswith("cause: bursts")
    assert result.causes[0].startswith("bursts: the server's front end fell behind its engine")
    # A client that kept nothing waiting could not have merged them; one that lagged could have.
    lagged = reconcile(BEFORE, _after(), bursty, _generator(2.0, limited=True))
    assert lagged.reasons[0].endswith("cause: the client's own lag")


@pytest.mark.parametrize("generator", [_generator(60.0), _generator(2.0, limited=True)])
def test_a_gap_the_clients_own_lag_explains_names_it(generator):
    late = reconcile(BEFORE, _after(), [_record(0.11, e2e_s=1.05)] * 2, generator)  # 100 ms above the server's E2E
    assert late.reasons[0].endswith("cause: the client's own lag")
    assert late.causes[0].startswith("the client's own lag: the load generator's lag p99")


def test_queueing_on_the_server_is_named_when_it_takes_most_of_its_ttft():
    # The server's mean TTFT is 100 ms: a mean wait of 60 ms in its queue is more than QUEUE_SHARE of it.
    queued = reconcile(BEFORE, _after(queue_s=0.12), [_record(0.11), _record(0.13)])
    assert not queued.suspect  # the queue is inside the server's own TTFT: no gap to the client's
    assert queued.causes == ("queueing on the server: requests waited 60.0 ms in its queue, 60% of its own mean TTFT: "
                             "more requests came than it runs at once",)
    assert QUEUE_SHARE == 0.5 and reconcile(BEFORE, _after(queue_s=0.09), [_record(0.11), _record(0.13)]).causes == ()


def test_a_rehearsals_account_is_predicted_for_the_gpu_played_with_the_raw_beside_it():
    from llmload.results.reconcile import PLAYED_TIMES, played_account
    from llmload.results.report import format_result
    from llmload.results.summary import summarize
    from llmload.timescale import REAL_TIME, TimeScale

    raw = reconcile(BEFORE, _after(), [_record(0.11), _record(0.13)], _generator(1.5))
    played = played_account(raw, TimeScale(20.0))
    # Times x20 (server TTFT 100 ms on the target: 2 s on the GPU played); counts, tokens and the generator's lag stay.
    assert played.server_mean_ttft_ms == pytest.approx(2000.0) and played.client_mean_ttft_ms == pytest.approx(2400.0)
    assert (played.server_mean_itl_ms, played.client_mean_itl_ms) == (pytest.approx(400.0), pytest.approx(400.0))
    assert played.server_mean_e2e_ms == pytest.approx(19000.0) and played.server_mean_queue_ms == pytest.approx(200.0)
    assert played.ttft_allowance_ms == pytest.approx(20 * raw.ttft_allowance_ms)
    assert all(getattr(played, name) == pytest.approx(20 * getattr(raw, name)) for name in PLAYED_TIMES)
    assert len(PLAYED_TIMES) == 9
    assert (played.server_requests, played.client_generation_tokens, played.client_lag_p99_ms) == (2, 40, 1.5)
    assert played_account(raw, REAL_TIME) == raw

    served_by = {"name": "llmload.sim", "rehearsal": True, "gpu_profile": "a100", "speedup": 20.0}
    records = [_record(0.11), _record(0.13)]
    block = format_result(summarize(records, {"served_by": served_by}, server_window=(BEFORE, _after())))
    account = block.split("Server's own account (/metrics): predicted server / client")[1]
    assert "Times predicted for the GPU played (times x20, rates /20); raw: the target's (SPEEDUP 20x)" in account
    assert "Mean TTFT (ms):" in account and "2000.00 / 2400.00  raw: 100.00 / 120.00" in account
    assert "Mean E2EL (ms):" in account and "19000.00 / 20000.00  raw: 950.00 / 1000.00" in account
    lines = {line.split(":")[0]: line for line in account.splitlines()}
    assert lines["Requests finished"].split() == ["Requests", "finished:", "2", "/", "2"]  # counts: no raw beside them
    real = format_result(summarize(records, {}, server_window=(BEFORE, _after())))
    assert "Server's own account (/metrics): server / client" in real and "raw:" not in real.split("own account")[1]
    assert "100.00 / 120.00" in real
