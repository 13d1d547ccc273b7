"""The built-in target's prefix cache (llmload/sim/prefix_cache.py): vLLM's blocks, chained hashes and LRU within the
KV capacity. On the engine with a fake clock: a cached prefix shortens TTFT by exactly its prefill, the least recently
used blocks go first, shared blocks count once, fixed timing keeps its exact TTFT; end to end: a conversation against
the target finds its history cached (records, summary.json, /metrics and the send log agree)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict

import orjson
import pytest

from conftest import run_cli
from llmload.errors import ProfileError
from llmload.promptsets.tokens import prompt_tokens
from llmload.results.records import read_records
from llmload.sim import lookup_profile, start_sim, stop_sim
from llmload.sim.engine import DONE, Engine
from llmload.sim.profiles import profile_from_dict, profile_to_dict
from llmload.sim.stepmodel import Frontend, prefill_pairs, step_time_s
from llmload.sim.tokens import prompt_blocks, prompt_token_ids

PROFILE = dataclasses.replace(lookup_profile("h100", "gpt-oss-20b"), frontend=Frontend(0.0, 0.0, 0.0))
"""Token times are the engine's step ends (an API server that costs nothing)."""


def _engine(kv_capacity_tokens: int | None = None, **kw) -> Engine:
    profile = PROFILE
    if kv_capacity_tokens is not None:
        profile = dataclasses.replace(profile, engine=dataclasses.replace(profile.engine, kv_capacity_tokens=kv_capacity_tokens))
    return Engine(profile, clock=lambda: 0.0, **kw)


class FirstToken:
    def __init__(self) -> None:
        self.due_s: float | None = None

    def on_token(self, seq, due_s: float) -> None:
        if self.due_s is None:
            self.due_s = due_s


def _alone(engine: Engine, tokens: int, blocks: tuple[int, ...], max_tokens: int = 4, at_s: float = 0.0):
    """One request on its own, run to its end: (its sequence, its TTFT)."""
    sink = FirstToken()
    seq = engine.submit(tokens, max_tokens=max_tokens, ignore_eos=True, sink=sink, now_s=at_s, prompt_blocks=blocks)
    engine.advance(math.inf)
    assert seq.state == DONE
    return seq, sink.due_s - at_s


def _blocks(name: str, tokens: int) -> tuple[int, ...]:
    """Stand-in hashes of a prompt's full blocks of 16 (distinct per name)."""
    return tuple(hash((name, i)) for i in range(tokens // 16))


@pytest.mark.pure
def test_a_cached_prefix_shortens_ttft_by_exactly_its_prefill():
    engine = _engine()
    blocks = _blocks("a", 1000)  # 62 full blocks: 992 tokens
    first, cold_s = _alone(engine, 1000, blocks)
    second, warm_s = _alone(engine, 1000, blocks, at_s=10.0)
    assert (first.cached_tokens, second.cached_tokens) == (0, 992)
    step = PROFILE.step
    assert cold_s == pytest.approx(step_time_s(step, 1000, 0, prefill_pairs(0, 1000)))
    # Only the 8 uncached tokens are prefilled; they still attend the 992 cached ones.
    assert warm_s == pytest.approx(step_time_s(step, 8, 0, prefill_pairs(992, 8)))
    assert (engine.prefix_cache_queries_total, engine.prefix_cache_hits_total) == (2000, 992)
    other, other_s = _alone(engine, 1000, _blocks("b", 1000), at_s=20.0)
    assert other.cached_tokens == 0 and other_s == pytest.approx(cold_s)


@pytest.mark.pure
def test_a_fully_cached_prompt_still_computes_its_last_block():
    engine = _engine()
    blocks = _blocks("a", 64)  # 64 tokens: 4 full blocks
    _alone(engine, 64, blocks)
    again, ttft_s = _alone(engine, 64, blocks, at_s=10.0)
    assert again.cached_tokens == 48  # at most 63 tokens may hit, in whole blocks: 3
    assert ttft_s == pytest.approx(step_time_s(PROFILE.step, 16, 0, prefill_pairs(48, 16)))


@pytest.mark.pure
def test_a_prefix_matches_only_up_to_the_first_block_that_differs():
    engine = _engine()
    _alone(engine, 800, _blocks("a", 800))
    forked = _blocks("a", 320) + _blocks("b", 800)[20:]  # the same first 20 blocks, then another text
    seq, _ = _alone(engine, 800, forked, at_s=10.0)
    assert seq.cached_tokens == 320


@pytest.mark.pure
def test_the_least_recently_used_blocks_are_evicted_first_and_a_prompts_tail_before_its_head():
    # 1,100 tokens of KV: while a 500-token prompt runs, 600 tokens (37 blocks) stay for blocks nobody holds.
    engine = _engine(kv_capacity_tokens=1100)
    a, b, c = (_blocks(name, 500) for name in "abc")  # 31 full blocks each
    cached = [_alone(engine, 500, blocks, max_tokens=1, at_s=10.0 * i)[0].cached_tokens
              for i, blocks in enumerate((a, b, c, b, a))]
    # c's 31 new blocks evicted 25 of a's (the oldest, its tail first); b, used more recently, kept all 31.
    assert cached == [0, 0, 0, 31 * 16, 6 * 16]
    assert engine.prefix_cache_queries_total == 5 * 500 and engine.prefix_cache_hits_total == 37 * 16
    assert engine.kv_used_tokens == 0  # free cached blocks are free space, as in vLLM's kv_cache_usage_perc


@pytest.mark.pure
def test_with_room_to_spare_nothing_is_evicted():
    engine = _engine()
    a, b, c = (_blocks(name, 500) for name in "abc")
    cached = [_alone(engine, 500, blocks, max_tokens=1, at_s=10.0 * i)[0].cached_tokens
              for i, blocks in enumerate((a, b, c, b, a))]
    assert cached == [0, 0, 0, 496, 496]


@pytest.mark.pure
def test_blocks_two_running_requests_share_count_once():
    engine = _engine()
    blocks = _blocks("a", 1000)
    first = engine.submit(1000, max_tokens=40, ignore_eos=True, now_s=0.0, prompt_blocks=blocks)
    engine.advance(engine.next_due_s())  # its prefill step: its blocks are cached
    second = engine.submit(1000, max_tokens=40, ignore_eos=True, now_s=engine.next_due_s(), prompt_blocks=blocks)
    for _ in range(5):
        engine.advance(engine.next_due_s())
    assert second.cached_tokens == 992 and engine.running == 2
    sched = engine.timing.sched
    contexts = sum(w.prompt_tokens + sched.generated(w) - 1 for w in sched.running)  # the last token is not in KV yet
    assert engine.kv_used_tokens == contexts - 992
    engine.advance(math.inf)
    assert first.state == second.state == DONE and engine.kv_used_tokens == 0


class LastToken:
    def __init__(self) -> None:
        self.due_s = 0.0

    def on_token(self, seq, due_s: float) -> None:
        self.due_s = due_s


def _preempting(blocks_a: tuple[int, ...], blocks_b: tuple[int, ...]) -> tuple[Engine, float]:
    """Two 500-token prompts, 300 tokens each, in 1,100 tokens of KV: the second is preempted. When it ends."""
    engine = _engine(kv_capacity_tokens=1100)
    last = LastToken()
    engine.submit(500, max_tokens=300, ignore_eos=True, now_s=0.0, prompt_blocks=blocks_a)
    engine.submit(500, max_tokens=300, ignore_eos=True, now_s=0.0, prompt_blocks=blocks_b, sink=last)
    engine.advance(math.inf)
    return engine, last.due_s


@pytest.mark.pure
def test_a_preempted_request_finds_its_prompt_again_and_is_counted_once():
    cached, cached_end_s = _preempting(_blocks("a", 500), _blocks("b", 500))
    uncached, uncached_end_s = _preempting((), ())
    assert cached.num_preemptions_total == uncached.num_preemptions_total > 0
    assert cached_end_s < uncached_end_s  # its recompute skipped the blocks of its prompt still cached
    assert cached.prefix_cache_queries_total == 1000 and cached.prefix_cache_hits_total == 0  # vLLM leaves recomputes out
    assert cached.kv_used_tokens == uncached.kv_used_tokens == 0


@pytest.mark.pure
def test_fixed_timing_counts_hits_but_keeps_its_exact_ttft():
    engine = _engine(fixed_ttft_s=0.05, fixed_itl_s=0.01)
    blocks = _blocks("a", 1000)
    first, cold_s = _alone(engine, 1000, blocks)
    second, warm_s = _alone(engine, 1000, blocks, at_s=10.0)
    assert (cold_s, warm_s) == (pytest.approx(0.05), pytest.approx(0.05))
    assert (first.cached_tokens, second.cached_tokens) == (0, 992)
    assert (engine.prefix_cache_queries_total, engine.prefix_cache_hits_total) == (2000, 992)


@pytest.mark.pure
def test_requests_without_blocks_are_queried_and_never_hit():
    engine = _engine()
    _alone(engine, 1000, ())
    seq, _ = _alone(engine, 1000, (), at_s=10.0)
    assert seq.cached_tokens == 0
    assert (engine.prefix_cache_queries_total, engine.prefix_cache_hits_total) == (2000, 0)


@pytest.mark.pure
def test_a_profile_may_set_the_block_size():
    data = profile_to_dict(PROFILE)
    data["engine"]["block_size"] = 32
    profile = profile_from_dict(data, "PROFILE=x")
    engine = Engine(profile, clock=lambda: 0.0)
    blocks = tuple(range(1000 // 32))
    _alone(engine, 1000, blocks)
    assert _alone(engine, 1000, blocks, at_s=10.0)[0].cached_tokens == 992  # 31 blocks of 32
    del data["engine"]["block_size"]
    assert profile_from_dict(data, "PROFILE=x").engine.block_size == 16  # profiles written before it: vLLM's default
    data["engine"]["block_size"] = 0
    with pytest.raises(ProfileError, match=r"^PROFILE=x: engine.block_size must be a positive whole number, got 0$"):
        profile_from_dict(data, "PROFILE=x")


# ---- the prompt's blocks as the target hashes them ---------------------------------------------

TURN_1 = [{"role": "system", "content": "You review code. " * 30}, {"role": "user", "content": "Review this: x = 1"}]
TURN_2 = TURN_1 + [{"role": "assistant", "content": "It assigns one to x. " * 12},
                   {"role": "user", "content": "And what about y = 2?"}]


def _common_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@pytest.mark.pure
@pytest.mark.parametrize("first, second", [
    ((TURN_1, "low"), (TURN_2, "low")),  # the next turn of a conversation: it holds the whole first prompt
    ((TURN_2, "low"), (TURN_2[:2] + [{"role": "user", "content": "Something else"}], "low")),
    ((TURN_1, "low"), (TURN_1, "high")),  # the effort is in the system message: only the blocks before it match
])
def test_prompts_share_exactly_the_full_blocks_of_their_common_tokens(first, second):
    (count_a, blocks_a), (count_b, blocks_b) = prompt_blocks(*first, 16), prompt_blocks(*second, 16)
    ids_a, ids_b = prompt_token_ids(*first), prompt_token_ids(*second)
    assert (count_a, count_b) == (len(ids_a), len(ids_b)) == (prompt_tokens(*first), prompt_tokens(*second))
    assert (len(blocks_a), len(blocks_b)) == (count_a // 16, count_b // 16)
    shared_blocks = _common_prefix(list(blocks_a), list(blocks_b))
    assert shared_blocks == _common_prefix(ids_a, ids_b) // 16
    if first[0] is TURN_1 and second[0] is TURN_2:
        assert shared_blocks == count_a // 16  # every full block of turn 1's prompt


# ---- end to end ----------------------------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_conversation_finds_its_history_in_the_targets_prefix_cache(tmp_path, api):
    send_log = tmp_path / "send.jsonl"
    process, url = start_sim(["--speedup", "20", "--send-log", str(send_log)])  # the step-time model, 20 times faster
    try:
        out = tmp_path / "run"
        done = run_cli("load", f"HOST={url}", f"API={api}", "USERS=2", "REQUESTS=9", "TURNS=3", "MAX_TOKENS=24",
                       "NONCE=on", f"OUT={out}")
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        assert stop_sim(process) == 0  # flushes the send log
    records = list(read_records(out / "samples.jsonl"))
    assert len(records) == 9 and all(r.error is None for r in records)
    by_conversation = defaultdict(list)
    for r in sorted(records, key=lambda r: r.turn):
        by_conversation[r.conversation_id].append(r)
    later = 0
    for turns in by_conversation.values():
        for before, r in zip(turns, turns[1:]):
            # NONCE: no other conversation shares its text; its own earlier prompt is cached in whole blocks.
            assert r.cached_tokens == before.prompt_tokens // 16 * 16 > 0
            later += 1
    assert later >= 4
    assert all(r.cached_tokens is not None and r.cached_tokens % 16 == 0 for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["server_prefix_cache_hit_rate"] > 0
    logged = {line["request_id"]: line["cached_tokens"] for line in map(orjson.loads, send_log.read_bytes().splitlines())}
    assert {r.request_id: r.cached_tokens for r in records} == logged
