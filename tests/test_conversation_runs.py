"""Conversations, shared prefixes and trace replay end to end against the built-in target, through a proxy that keeps
every byte: each later turn sends the history with the answers exactly as they were streamed, REQUESTS counts turns,
users think between turns, RATE starts conversations, each prompt's count is the server's, and a trace's rows go at
their times with their lengths."""

import json
from collections import defaultdict

import pytest

from conftest import REPO, run_cli
from llmload.promptsets.tokens import prompt_tokens, text_tokens
from llmload.promptsets.traces import read_trace
from llmload.results.records import read_records
from llmload.sim import start_sim, stop_sim
from wire_recorder import check_history_is_the_answers, recording

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sim_fast():
    """Tokens as fast as they can go: turns end quickly, and their answers hold visible text."""
    process, url = start_sim(["--fixed-ttft-ms", "5", "--fixed-itl-ms", "0"])
    yield url
    stop_sim(process)


@pytest.fixture
def wire(sim_fast):
    with recording(sim_fast) as recorder:
        yield recorder


def test_each_turn_sends_the_history_with_the_answers_as_streamed(wire, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={wire.url}", "USERS=2", "REQUESTS=12", "TURNS=3", "THINK_TIME=0.3s", "NONCE=on",
                   f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    exchanges = wire.exchanges()
    assert len(exchanges) == 12  # REQUESTS counts turns; the last conversations may be cut short by it
    turns = check_history_is_the_answers(exchanges)
    assert set(turns) == {1, 2, 3} and turns[1] >= turns[2] >= turns[3] >= 2
    assert all(e.answer for e in exchanges)  # answers with text: the history above holds real answers
    records = sorted(read_records(out / "samples.jsonl"), key=lambda r: (r.conversation_id, r.turn))
    by_conversation = defaultdict(list)
    for r in records:
        by_conversation[r.conversation_id].append(r)
    assert len(by_conversation) == turns[1]
    assert all([r.turn for r in rs] == list(range(1, len(rs) + 1)) for rs in by_conversation.values())
    for rs in by_conversation.values():
        assert len({r.prompt_id for r in rs}) == 1 and len({r.effort for r in rs}) == 1
        assert all(b.prompt_tokens > a.prompt_tokens for a, b in zip(rs, rs[1:]))  # the history grows
        for a, b in zip(rs, rs[1:]):  # the user thought 0.3 s between an answer and the next turn
            assert b.start_monotonic_s - (a.start_monotonic_s + a.e2e_s) >= 0.3
    nonces = {e.body["messages"][0]["content"].split("\n")[0] for e in exchanges}
    assert len(nonces) == turns[1]  # NONCE: one per conversation, kept in its history
    summary = json.loads((out / "summary.json").read_text())
    assert {turn: part["requests_ok"] for turn, part in summary["by_turn"].items()} == {str(t): n for t, n in turns.items()}
    assert "Conversations, by turn" in done.stdout


def test_with_rate_conversations_start_on_the_schedule_and_their_turns_follow(wire, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={wire.url}", "RATE=20", "ARRIVALS=constant", "REQUESTS=10", "TURNS=2", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    records = list(read_records(out / "samples.jsonl"))
    firsts = sorted((r for r in records if r.turn == 1), key=lambda r: r.scheduled_monotonic_s)  # file order: by end
    seconds = [r for r in records if r.turn == 2]
    assert len(records) == 10 and len(firsts) + len(seconds) == 10 and seconds  # REQUESTS counts turns
    assert all(r.scheduled_monotonic_s is not None for r in firsts)
    assert all(r.scheduled_monotonic_s is None for r in seconds)
    assert {r.conversation_id for r in seconds} <= {r.conversation_id for r in firsts}
    gaps = sorted(b.scheduled_monotonic_s - a.scheduled_monotonic_s for a, b in zip(firsts, firsts[1:]))
    assert gaps == pytest.approx([0.05] * len(gaps))  # conversations, not requests, start at RATE
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arrivals"]["requests_scheduled"] == len(firsts)
    assert check_history_is_the_answers(wire.exchanges()) == {1: len(firsts), 2: len(seconds)}


def test_shared_prefixes_lead_every_prompt_and_count_exactly(wire, tmp_path):
    out = tmp_path / "run"
    done = run_cli("load", f"HOST={wire.url}", "REQUESTS=6", "ORDER=sequence", "PREFIX_TOKENS=300", "PREFIX_GROUPS=2",
                   f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    exchanges = wire.exchanges()
    prefixes = [e.body["messages"][0] for e in exchanges]
    assert all(p["role"] == "system" and text_tokens(p["content"]) == 300 for p in prefixes)
    assert len({p["content"] for p in prefixes}) == 2
    for e in exchanges:
        assert e.usage["prompt_tokens"] == prompt_tokens(e.body["messages"])


def test_a_trace_sends_every_row_at_its_time_with_its_lengths(wire, tmp_path):
    out = tmp_path / "run"
    trace = "traces/sample.mooncake.jsonl"
    done = run_cli("load", f"HOST={wire.url}", f"TRACE={trace}", "TRACE_LIMIT=30", "TRACE_SPEED=4", f"OUT={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = read_trace(REPO / trace, limit=30).rows
    records = list(read_records(out / "samples.jsonl"))
    by_id = {r.prompt_id: r for r in records}
    assert len(records) == len(by_id) == 30 and set(by_id) == {f"trace-{row.line}" for row in rows}  # every row once
    start = min(r.scheduled_monotonic_s for r in records)
    for row in rows:  # at its time, TRACE_SPEED times faster
        assert by_id[f"trace-{row.line}"].scheduled_monotonic_s - start == pytest.approx(row.offset_s / 4, abs=1e-6)
    assert all(r.start_monotonic_s >= r.scheduled_monotonic_s for r in records)
    by_line = {row.line: row for row in rows}
    for r in records:
        row = by_line[int(r.prompt_id.split("-")[1])]
        assert r.completion_tokens == max(1, row.output_tokens) and r.finish_reason == "length"  # forced: ignore_eos
        assert r.prompt_tokens == prompt_tokens([{"role": "user", "content": ""}]) + row.input_tokens
    bodies = [e.body for e in wire.exchanges()]
    assert len(bodies) == 30 and all(b["ignore_eos"] is True for b in bodies)  # the target answers /version: vLLM
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arrivals"]["requests_scheduled"] == 30 and summary["config"]["trace"] == trace
