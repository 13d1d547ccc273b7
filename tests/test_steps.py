"""The step scheduler and its offline replay: vLLM V1's batching rules, and runs of decode steps taken at once."""

import random

import pytest

from llmload.sim import scheduler
from llmload.sim.profiles import lookup_profile
from llmload.sim.replay import replay_closed_loop
from llmload.sim.scheduler import DECODE, FINISHED, StepScheduler, Work
from llmload.sim.stepmodel import EngineLimits, Frontend, experts_read, prefill_pairs, step_time_s

pytestmark = pytest.mark.pure

TIMES = lookup_profile("a100", "gpt-oss-120b").step
NO_FRONTEND = Frontend(0.0, 0.0, 0.0)


def _run_until_done(sched: StepScheduler, works: list[Work], limit: int = 100000) -> list[int]:
    """Step until every work finished; the step count at which each sampled its first token."""
    first: dict[Work, int] = {}
    for step in range(1, limit):
        if sched.plan() is None:
            break
        sampled, _ = sched.finish()
        for w in sampled:
            first.setdefault(w, step)
    assert all(w.state == FINISHED for w in works)
    return [first[w] for w in works]


def test_a_prompt_longer_than_the_budget_is_prefilled_in_chunks():
    sched = StepScheduler(EngineLimits(256, 2048, 10**6), TIMES)
    long, short = Work(None, 5000, 3), Work(None, 100, 3)
    sched.add(long)
    sched.add(short)
    assert sched.plan() == pytest.approx(step_time_s(TIMES, 2048, 0, prefill_pairs(0, 2048)))
    sched.finish()
    # the running prompt's next chunk first, then the waiting one takes what the budget leaves
    assert sched.plan() == pytest.approx(step_time_s(TIMES, 2048, 0, prefill_pairs(2048, 2048)))
    sched.finish()
    assert _run_until_done(sched, [long, short]) == [1, 1]  # both finish their prefill in the third step


def test_decoders_take_their_tokens_first_and_share_the_budget_with_prefill():
    sched = StepScheduler(EngineLimits(256, 2048, 10**6), TIMES)
    first = Work(None, 10, 50)
    sched.add(first)
    sched.plan()
    sched.finish()  # first is decoding now
    sched.add(Work(None, 5000, 5))
    assert first.state == DECODE
    # one decode token and 2047 prompt tokens; the decoder attends its 10 prompt tokens
    assert sched.plan() == pytest.approx(step_time_s(TIMES, 2048, 10, prefill_pairs(0, 2047)))


def test_max_num_seqs_caps_the_batch():
    sched = StepScheduler(EngineLimits(3, 2048, 10**6), TIMES)
    works = [Work(None, 20, 10) for _ in range(7)]
    for w in works:
        sched.add(w)
    most = 0
    while sched.plan() is not None:
        most = max(most, len(sched.running))
        sched.finish()
    assert most == 3 and all(w.state == FINISHED and w.gen == 10 for w in works)


def test_a_full_kv_cache_preempts_the_newest_which_recomputes_and_finishes():
    sched = StepScheduler(EngineLimits(8, 2048, 700), TIMES)
    works = [Work(None, 200, 150) for _ in range(3)]  # 3 x 200 fits; 3 x 350 does not
    for w in works:
        sched.add(w)
    _run_until_done(sched, works)
    assert sched.preemptions > 0
    assert [w.gen for w in works] == [150, 150, 150] and sched.kv_used == 0 and sched.decode_context == 0


def test_the_expert_share_grows_from_k_of_e_toward_all():
    assert experts_read(TIMES, 1) == pytest.approx(TIMES.experts_per_token / TIMES.experts)
    assert experts_read(TIMES, 10) < experts_read(TIMES, 100) < experts_read(TIMES, 10000) <= 1.0


@pytest.mark.parametrize("limits", [EngineLimits(256, 2048, 129_000), EngineLimits(16, 512, 6_000)])
@pytest.mark.parametrize("users", [1, 7, 120])
def test_decode_runs_taken_at_once_equal_step_by_step(limits, users, monkeypatch):
    rng = random.Random(users)
    prompts = [rng.randint(20, 2500) for _ in range(120)]
    outputs = [rng.randint(1, 300) for _ in range(120)]
    frontend = Frontend(0.004, 0.002, 0.0002)
    fast = replay_closed_loop(limits, TIMES, frontend, users, prompts, outputs)
    monkeypatch.setattr(scheduler.StepScheduler, "pure_decode_steps", lambda self: 0)
    slow = replay_closed_loop(limits, TIMES, frontend, users, prompts, outputs)
    assert len(fast) == len(slow) == 120  # every request replayed both ways: zip below would stop at the shorter
    for a, b in zip(fast, slow):
        assert (a.first_delivered_s, a.last_delivered_s, a.last_engine_s) == pytest.approx(
            (b.first_delivered_s, b.last_delivered_s, b.last_engine_s), rel=1e-9, abs=1e-9)


def test_a_replay_of_one_user_is_prefill_then_one_decode_step_per_token():
    runs = replay_closed_loop(EngineLimits(256, 2048, 10**6), TIMES, NO_FRONTEND, 1, [100, 100], [4, 4])
    prefill = step_time_s(TIMES, 100, 0, prefill_pairs(0, 100))
    decode = sum(step_time_s(TIMES, 1, 100 + i, 0) for i in range(3))
    assert runs[0].ttft_s == pytest.approx(prefill) and runs[0].e2e_s == pytest.approx(prefill + decode)
    assert runs[1].sent_s == pytest.approx(runs[0].last_delivered_s)  # closed loop: the next is sent at once


def test_the_api_server_queue_delays_tokens_once_it_is_the_bottleneck():
    limits = EngineLimits(256, 8192, 10**6)
    idle = replay_closed_loop(limits, TIMES, NO_FRONTEND, 64, [500] * 256, [100] * 256)
    busy = replay_closed_loop(limits, TIMES, Frontend(0.0, 0.0, 0.002), 64, [500] * 256, [100] * 256)
    span = lambda runs: max(r.last_delivered_s for r in runs)  # noqa: E731
    # 64 streams x 2 ms per token outrun the engine's ~0.1 s steps: the API server sets the pace
    assert span(busy) > 1.5 * span(idle)
    assert span(busy) >= 256 * 100 * 0.002


def test_a_request_on_its_way_does_not_delay_tokens_the_api_server_had_before_it():
    # User A's one-token request ends at once and sends the next, which reaches the API server a second later;
    # user B decodes meanwhile: first come, first served, its tokens go out as their steps end.
    frontend = Frontend(latency_s=1.0, request_s=0.5, output_token_s=0.0)
    runs = replay_closed_loop(EngineLimits(256, 2048, 10**6), TIMES, frontend, 2, [10, 10, 10], [1, 50, 1])
    b = runs[1]
    assert runs[2].sent_s < b.last_engine_s < runs[2].sent_s + frontend.latency_s
    assert b.last_delivered_s == pytest.approx(b.last_engine_s)



def test_an_asynchronous_engine_takes_a_request_that_came_while_a_step_ran_into_the_step_after_the_next():
    # User B's one-token request ends with the first step and sends the next, which reaches the engine at once while
    # user A decodes. vLLM's --async-scheduling (0.25's default) scheduled the step after the first when the first
    # started, before the new request came: that step decodes A alone, the new prompt is prefilled in the one after.
    sync, lag = EngineLimits(256, 2048, 10**6), EngineLimits(256, 2048, 10**6, async_scheduling=True)
    prefill_with_decode = step_time_s(TIMES, 11, 10, prefill_pairs(0, 10))  # A's decode token and the 10-token prompt
    late = {limits.async_scheduling: replay_closed_loop(limits, TIMES, NO_FRONTEND, 2, [10, 10, 10], [50, 1, 5])[2]
            for limits in (sync, lag)}
    assert late[False].server_ttft_s == pytest.approx(prefill_with_decode)
    assert late[True].server_ttft_s == pytest.approx(step_time_s(TIMES, 1, 10, 0) + step_time_s(TIMES, 11, 11, prefill_pairs(0, 10)))
    # an idle asynchronous engine schedules a request at once: one user sees no lag
    alone = {limits.async_scheduling: replay_closed_loop(limits, TIMES, NO_FRONTEND, 1, [100, 100], [4, 4])
             for limits in (sync, lag)}
    assert [r.server_ttft_s for r in alone[True]] == pytest.approx([r.server_ttft_s for r in alone[False]])


@pytest.mark.parametrize("users", [1, 7, 120])
def test_decode_runs_taken_at_once_equal_step_by_step_on_an_asynchronous_engine(users, monkeypatch):
    limits = EngineLimits(256, 2048, 129_000, async_scheduling=True)
    rng = random.Random(users)
    prompts = [rng.randint(20, 2500) for _ in range(120)]
    outputs = [rng.randint(1, 300) for _ in range(120)]
    frontend = Frontend(0.004, 0.002, 0.0002, 2e-6)
    fast = replay_closed_loop(limits, TIMES, frontend, users, prompts, outputs)
    monkeypatch.setattr(scheduler.StepScheduler, "pure_decode_steps", lambda self: 0)
    slow = replay_closed_loop(limits, TIMES, frontend, users, prompts, outputs)
    assert len(fast) == len(slow) == 120
    for a, b in zip(fast, slow):
        assert (a.first_delivered_s, a.last_delivered_s, a.last_engine_s) == pytest.approx(
            (b.first_delivered_s, b.last_delivered_s, b.last_engine_s), rel=1e-9, abs=1e-9)


def test_the_api_servers_work_on_a_request_grows_with_its_prompt():
    # Rendering and tokenizing a prompt's text: the H100 grid's 4k-token requests spent 2-3x the 1k ones' time outside
    # the server's own clock at every load (client E2E - server E2E: 16 vs 8 ms at one user)
    frontend = Frontend(latency_s=0.001, request_s=0.002, output_token_s=0.0, prompt_token_s=3e-6)
    short, long = replay_closed_loop(EngineLimits(256, 8192, 10**6), TIMES, frontend, 1, [1000, 4000], [2, 2])
    assert short.engine_arrival_s - short.sent_s == pytest.approx(0.001 + 0.002 + 1000 * 3e-6)
    assert long.engine_arrival_s - long.sent_s == pytest.approx(0.001 + 0.002 + 4000 * 3e-6)
