"""Tools end to end against the built-in target, through a proxy that keeps every byte: each request offers the
tools, a function call is output measured like text, a tool round hands the call and a result of exactly
TOOL_RESULT_TOKENS back in both APIs, every round is a record of its task, the summary's tasks add up, and broken
calls are tool_call_invalid failures."""

import json
from collections import defaultdict

import pytest

from conftest import REPO, run_cli
from llmload.promptsets.tokens import text_tokens
from llmload.promptsets.tools import load_tools
from llmload.results.records import read_records
from llmload.sim import start_sim, stop_sim
from wire_recorder import recording

pytestmark = pytest.mark.integration

TOOLS = REPO / "tools" / "example.json"
OFFERED = load_tools(str(TOOLS))
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}


@pytest.fixture(scope="module")
def sim_fast():
    """Tokens as fast as they can go; a task gets one function call (the target's default), then a text answer."""
    process, url = start_sim(["--fixed-ttft-ms", "5", "--fixed-itl-ms", "0"])
    yield url
    stop_sim(process)


def _load(url, out, *settings, returncode=0):
    done = run_cli("load", f"HOST={url}", f"OUT={out}", f"TOOLS={TOOLS}", "MAX_FAIL_RATIO=0", *settings)
    assert done.returncode == returncode, done.stderr[-2000:]
    return list(read_records(out / "samples.jsonl")), json.loads((out / "summary.json").read_text())


def _tasks(records):
    tasks = defaultdict(list)
    for r in records:
        tasks[r.task_id].append(r)
    return {task: sorted(rounds, key=lambda r: r.round) for task, rounds in tasks.items()}


@pytest.mark.parametrize("api,client", [("chat", "raw"), ("chat", "openai"), ("responses", "raw"), ("responses", "openai")])
def test_a_call_goes_back_with_its_result_and_the_next_round_answers(sim_fast, tmp_path, api, client):
    with recording(sim_fast) as wire:
        records, summary = _load(wire.url, tmp_path / "run", f"API={api}", f"CLIENT={client}", "USERS=2", "REQUESTS=10",
                                 "TOOL_ROUNDS=3", "TOOL_RESULT_TOKENS=120", "TOOL_CHOICE=auto")
        exchanges = [e for e in wire.exchanges(PATHS[api]) if e.body]  # the probe's empty POST asks for /v1/responses
    assert len(exchanges) == len(records) == 10 and all(r.ok for r in records)
    for exchange in exchanges:  # every request offers the tools, in its API's form
        tools = exchange.body["tools"]
        assert exchange.body["tool_choice"] == "auto"
        assert tools == (list(OFFERED) if api == "chat" else [{"type": "function", **t["function"]} for t in OFFERED])
    tasks = _tasks(records)
    for rounds in tasks.values():
        assert [r.round for r in rounds] == list(range(1, len(rounds) + 1))
        first = rounds[0]  # the target calls once per task: round 1 a call, round 2 the answer
        assert first.finish_reason == "tool_calls" and first.answered and first.ttfvt_s is None
        assert first.token_events == first.completion_tokens  # the call's pieces are token events, one token each
        if len(rounds) > 1:
            assert rounds[1].finish_reason == "stop" and rounds[1].ttfvt_s is not None
            assert rounds[1].prompt_tokens > first.prompt_tokens + 120  # the history, then the tool's result
    # round 2's request holds round 1's call and a result of exactly TOOL_RESULT_TOKENS tokens
    followed = [e for e in exchanges if _results(e.body, api)]
    assert len(followed) == sum(len(rounds) > 1 for rounds in tasks.values()) >= 3
    for exchange in followed:
        (call, result), = _results(exchange.body, api)
        assert call["name"] in {t["function"]["name"] for t in OFFERED} and isinstance(json.loads(call["arguments"]), dict)
        assert text_tokens(result) == 120 and json.loads(result)["tool"] == call["name"]
    stats = summary["tasks"]
    answered = [rounds for rounds in tasks.values() if rounds[-1].finish_reason == "stop"]
    assert stats["tasks"] == len(tasks) and stats["outcomes"]["answered"] == len(answered)
    assert stats["outcomes"]["answered"] + stats["outcomes"]["unfinished"] == len(tasks)  # REQUESTS cut the last ones
    assert stats["rounds"]["total"] == 10 and stats["output_tokens"]["total"] == sum(
        r.completion_tokens for rounds in answered for r in rounds)
    assert stats["time_to_answer_ms"]["min"] >= 1000 * min(rounds[-1].start_monotonic_s + rounds[-1].e2e_s
                                                           - rounds[0].start_monotonic_s for rounds in answered) - 1e-6


def _results(body, api):
    """The (call, result text) pairs a request hands back: chat's assistant tool_calls and tool messages, or the
    Responses API's function_call and function_call_output items."""
    if api == "chat":
        messages = body["messages"]
        calls = {c["id"]: c["function"] for m in messages if m.get("tool_calls") for c in m["tool_calls"]}
        return [(calls[m["tool_call_id"]], m["content"]) for m in messages if m["role"] == "tool"]
    items = body["input"]
    calls = {i["call_id"]: i for i in items if i.get("type") == "function_call"}
    return [(calls[i["call_id"]], i["output"]) for i in items if i.get("type") == "function_call_output"]


def test_without_rounds_a_call_ends_the_request(sim_fast, tmp_path):
    records, summary = _load(sim_fast, tmp_path / "run", "USERS=2", "REQUESTS=6")
    assert len(records) == 6 and all(r.ok and r.finish_reason == "tool_calls" for r in records)
    assert all(r.task_id is None and r.round is None for r in records) and summary["tasks"] is None


def test_tool_choice_none_offers_the_tools_and_gets_text(sim_fast, tmp_path):
    records, _ = _load(sim_fast, tmp_path / "run", "USERS=2", "REQUESTS=4", "TOOL_CHOICE=none", "TOOL_ROUNDS=2")
    assert all(r.ok and r.finish_reason == "stop" and r.round == 1 for r in records)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_broken_calls_are_tool_call_invalid_failures_and_end_their_task(tmp_path, api):
    process, url = start_sim(["--fixed-ttft-ms", "5", "--fixed-itl-ms", "0", "--tool-invalid-rate", "1"])
    try:
        records, summary = _load(url, tmp_path / "run", f"API={api}", "USERS=2", "REQUESTS=12", "TOOL_ROUNDS=2",
                                 "FAILURE_BACKOFF=0", returncode=1)  # the run worked; no request succeeded
    finally:
        stop_sim(process)
    assert len(records) == 12 and all(r.error == "tool_call_invalid" and r.round == 1 for r in records)
    assert any("which was not offered" in r.error_detail for r in records)  # half name a function not offered,
    assert any("arguments are not JSON" in r.error_detail for r in records)  # half break the arguments
    assert summary["errors"] == {"tool_call_invalid": 12} and summary["requests_failed"] == 12
    assert summary["tasks"]["outcomes"]["failed"] == 12
