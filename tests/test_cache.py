"""The prefix cache as a controlled setting (CACHE, PROMPT_START, CACHE_RESET): what a workload declares shareable,
fresh prompts within a run and across a study, the account and its flag, and the server's failures said first."""

import json
import random

import pytest

from conftest import run_cli
from factories import make_record
from llmload.loadtest.conversations import ConversationDraw
from llmload.loadtest.plan import Plan
from llmload.loadtest.efforts import EffortDraw
from llmload.loadtest.turns import TurnPlan
from llmload.loadtest.workload import Workload
from llmload.promptsets.catalog import Prompt
from llmload.promptsets.sharing import common_prefix_chars, frame_tokens, shared_tokens
from llmload.results.cache import cache_account
from llmload.results.failures import server_failures
from llmload.results.generator import ProcessLoad, check
from llmload.results.histogram import LogHistogram
from llmload.results.report import format_result
from llmload.results.slo import parse_slos
from llmload.results.summary import summarize
from llmload.sim.prefix_cache import PrefixCache
from llmload.sweep.capacity import unmeasurable_cause
from llmload.sweep.fresh import next_prompt_start


def _prompt(i: int, text: str) -> Prompt:
    return Prompt(f"p{i}", [{"role": "user", "content": text}])


@pytest.mark.pure
def test_a_set_declares_the_prefix_its_prompts_share_and_the_frame_of_every_request():
    template = "Read the following document carefully and answer the question at its end. " * 20
    prompts = [_prompt(0, template + "first document about ships"), _prompt(1, template + "second one about trains"),
               _prompt(2, "something else entirely")]
    shared = shared_tokens(prompts)
    assert shared["p2"] == frame_tokens()  # shares nothing but the frame
    assert shared["p0"] == shared["p1"] > frame_tokens() + 200  # the template's ~300 tokens, both ways
    assert common_prefix_chars("abcdef", "abcxyz") == 3 and common_prefix_chars("", "a") == 0


def _draw(prompts, cold=True, sequence=False, start=0):
    workload = Workload(tuple(prompts), {}, shared_tokens=shared_tokens(prompts), first_fresh=start)
    return ConversationDraw(workload, Plan(), TurnPlan.of("1", "0"), EffortDraw({"medium": 1.0}, 0), sequence, False,
                            1, cold=cold, seed=0)


@pytest.mark.pure
def test_cold_never_sends_a_prompt_twice_as_it_is():
    """CACHE=cold draws the set's shuffled order without repeating; once it runs out, a prompt sent again leads with
    a nonce and declares only the frame shareable. CACHE=warm repeats on purpose (a random prompt per request)."""
    prompts = [_prompt(i, f"prompt number {i} " * 10) for i in range(12)]
    draw, rng = _draw(prompts), random.Random(1)
    conversations = [draw.new_conversation(rng)[0] for _ in range(30)]
    first = [c.prompt.id for c in conversations[:12]]
    assert sorted(first) == sorted(p.id for p in prompts) and first != [p.id for p in prompts]  # a shuffle of all 12
    assert not any(c.reused for c in conversations[:12]) and all(c.reused for c in conversations[12:])
    again = conversations[12]
    assert again.messages[0]["content"].split("\n", 1)[0].isdigit()  # the nonce, on its own line, in front
    assert again.declared_cached_tokens == frame_tokens() and conversations[0].declared_cached_tokens >= frame_tokens()
    later = _draw(prompts, start=5)
    assert later.new_conversation(rng)[0].prompt.id == first[5]  # PROMPT_START: position 5 of the same order
    warm, rng = _draw(prompts, cold=False), random.Random(2)
    drawn = [warm.new_conversation(rng)[0] for _ in range(40)]
    assert len({c.prompt.id for c in drawn}) < 12 or any(c.reused for c in drawn)  # repeats, as they come
    assert not any(c.messages[0]["content"].split("\n", 1)[0].isdigit() for c in drawn)  # and no nonce: warm on purpose


@pytest.mark.pure
def test_the_account_flags_a_cold_run_whose_hit_rate_exceeds_what_its_workload_declares():
    records = [make_record(prompt_tokens=1000, completion_tokens=10, declared_cached_tokens=80, cached_tokens=996)
               for _ in range(10)]
    cold = cache_account(records, {"cache": "cold"}, 0.974)
    assert cold.declared_hit_rate == pytest.approx(0.08) and cold.client_hit_rate == pytest.approx(0.996)
    assert cold.suspect and "found 97.4% of the prompt tokens cached" in cold.reason and "at most 8.0%" in cold.reason
    assert not cache_account(records, {"cache": "cold"}, 0.07).suspect  # the frame only: what it declares
    assert not cache_account(records, {"cache": "warm"}, 0.974).suspect  # repeated on purpose
    assert cache_account(records, {"cache": "cold"}, None).suspect  # the answers' own count when the server has none
    block = format_result(summarize(records, {"cache": "cold", "served_by": {"rehearsal": False}}))
    assert "CACHE SUSPECT:" in block and "Hit rate declared by the workload:      8.0%" in block


@pytest.mark.pure
def test_a_study_gives_each_run_prompts_past_every_earlier_runs(tmp_path):
    assert next_prompt_start(tmp_path / "none") == 0
    for name, start, requests in (("a", 0, 40), ("b", 40, 25), ("cut", 65, 3)):  # "cut": killed, no summary
        run = tmp_path / "cells" / name
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"prompt_start": start}))
        (run / "samples.jsonl").write_text("{}\n" * requests)
    assert next_prompt_start(tmp_path) == 68 and next_prompt_start(tmp_path, first=100) == 100


@pytest.mark.pure
def test_the_server_failing_every_request_is_said_first_and_never_blamed_on_the_generator():
    message = "Internal Server Error: ModuleNotFoundError: No module named 'pycountry' " + "x" * 300
    records = [make_record(request_id=f"r{i}", error="http_500", error_detail=message, ttft_s=None) for i in range(22)]
    failures = server_failures(records)
    assert failures.server_failed_the_run and failures.failed_by_server == 22 and failures.by_category == {"http_500": 22}
    (only,) = failures.messages
    assert only.count == 22 and only.message == message[:200]
    loop_lag = LogHistogram()
    for lag_s in [0.0005] * 95 + [0.040] * 5:  # bursts of 40 ms: what a run of instant 500s showed
        loop_lag.add(lag_s)
    stalled = check([ProcessLoad(name="load process", wall_s=10.0, cpu_s=0.5, events=100, wakeups=100,
                                 loop_lag=loop_lag)])
    assert stalled.generator_limited and stalled.cause == "own_stalls"  # what the self-check said of the 500s
    summary = summarize(records, {}, stalled)
    assert not summary.generator.generator_limited and summary.generator.cause == "server_failed"
    block = format_result(summary)
    assert block.splitlines()[1].startswith("THE SERVER FAILED THIS RUN: 22 of 22 requests refused or broken (http_500 22)")
    assert f"22 x http_500: {message[:200]}" in block and "WORKERS=" not in block


@pytest.mark.pure
def test_capacity_ends_at_the_first_step_when_an_slo_cannot_be_measured():
    """Answers sent in one event have no TPOT: the search ends, naming the cause, never "USERS=none" unexplained."""
    one_event = [make_record(request_id=f"r{i}", ttft_s=0.5, itl_s=[], completion_tokens=100, answered=True)
                 for i in range(20)]
    summary = summarize(one_event, slos=parse_slos("tpot_p90<=50ms"))
    (verdict,) = summary.slo
    assert verdict.value_ms is None and verdict.requests_unmeasurable == 20 and not verdict.passed
    assert summary.goodput_rps == 0.0  # not measurable is not good
    cause = unmeasurable_cause(summary)
    assert cause.startswith("SLO tpot_p90<=50ms is not measurable on this server: none of the 20 answers")
    assert "every answer came in one event" in cause
    assert "NOT MEASURABLE" in format_result(summary)
    assert unmeasurable_cause(summarize(one_event, slos=parse_slos("e2e_p90<=2s"))) is None


@pytest.mark.pure
def test_the_built_in_targets_reset_forgets_free_blocks_and_refuses_while_requests_hold_them():
    cache = PrefixCache(16)
    cache.add("a", [1, 2, 3])
    assert not cache.reset()  # "a" still holds its blocks: refused, as vLLM answers 409
    cache.release("a")
    assert cache.match([1, 2, 3], 64)[0] == 3 and cache.reset() and cache.match([1, 2, 3], 64)[0] == 0


@pytest.mark.integration
def test_a_second_run_on_the_same_prompts_is_flagged_and_a_fresh_one_is_not(tmp_path):
    """Against one built-in target (prefix caching on): a cold run, the same prompts again (what crosscheck's second
    tool did), then the next PROMPT_START; CACHE_RESET=on empties the cache before a run."""
    from llmload.sim import start_sim, stop_sim

    process, url = start_sim(["--fixed-ttft-ms", "5", "--fixed-itl-ms", "1"])
    try:
        def run(name, *settings):
            done = run_cli("load", f"HOST={url}", "PROMPTS=random:512:8:40", "REQUESTS=40", "USERS=4", f"OUT={tmp_path / name}",
                           *settings)
            assert done.returncode == 0, done.stderr[-2000:]
            return json.loads((tmp_path / name / "summary.json").read_text())["cache"], done.stdout

        first, _ = run("first")
        again, shown = run("again")
        fresh, _ = run("fresh", "PROMPT_START=40")
        reset, reset_shown = run("reset", "CACHE_RESET=on")
    finally:
        stop_sim(process)
    assert not first["suspect"] and first["server_hit_rate"] < first["declared_hit_rate"] + 0.05
    assert again["suspect"] and again["server_hit_rate"] > 0.9 and "CACHE SUSPECT" in shown
    assert not fresh["suspect"] and fresh["server_hit_rate"] < 0.2
    assert reset["reset"].startswith("done before the run") and not reset["suspect"]
    assert "emptied first (CACHE_RESET=on)" in reset_shown
