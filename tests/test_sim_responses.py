"""The built-in target's Responses API (POST /v1/responses) and function calls (both APIs), and both clients timing
its Responses streams against its send log."""

import json
import statistics
import urllib.request

import orjson
import pytest

from llmload.client.measure import make_client, measure_request
from llmload.sim import start_sim, stop_sim

pytestmark = pytest.mark.integration

MODEL = "openai/gpt-oss-20b"
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
              {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in CHAT_TOOLS]


def post(url: str, path: str, body: dict) -> bytes:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


def sse(body: bytes) -> list[tuple[str | None, object]]:
    """(event line, parsed data) of each event of a body."""
    events = []
    for block in body.decode().split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        data = fields["data"]
        events.append((fields.get("event"), data if data == "[DONE]" else json.loads(data)))
    return events


def responses_events(url: str, **body) -> list[dict]:
    events = sse(post(url, "/v1/responses", {"model": MODEL, "input": USER, "stream": True, **body}))
    assert all(name == event["type"] for name, event in events)  # the event line names the data's type
    return [event for _, event in events]


def chat_chunks(url: str, **body) -> list[dict]:
    events = sse(post(url, "/v1/chat/completions", {"model": MODEL, "messages": USER, "stream": True,
                                                    "stream_options": {"include_usage": True}, **body}))
    assert events[-1] == (None, "[DONE]")
    return [event for _, event in events[:-1]]


@pytest.fixture(scope="module")
def sim():
    process, url = start_sim(["--speedup", "1000", "--seed", "3"])
    yield url
    assert stop_sim(process) == 0


def test_a_responses_stream_is_vllms_and_every_event_is_the_sdks_type(sim):
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    events = responses_events(sim, reasoning={"effort": "low"}, max_output_tokens=2000)
    typed = TypeAdapter(ResponseStreamEvent)
    for event in events:
        typed.validate_python(event)  # each is one of the openai SDK's stream types, with its required fields
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    reasoning = [e["delta"] for e in events if e["type"] == "response.reasoning_text.delta"]
    text = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert reasoning and text and "[DONE]" not in kinds
    assert kinds.index("response.output_item.done") < kinds.index("response.output_text.delta")  # reasoning closes first
    response = events[-1]["response"]
    usage = response["usage"]
    assert response["status"] == "completed" and response["incomplete_details"] is None
    assert usage["output_tokens_details"]["reasoning_tokens"] == len(reasoning)
    assert usage["output_tokens"] == len(reasoning) + len(text)
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert response["output"][0]["content"][0]["text"] == "".join(reasoning)
    assert response["output"][1]["content"][0]["text"] == "".join(text)


def test_max_output_tokens_makes_the_response_incomplete(sim):
    events = responses_events(sim, max_output_tokens=5)
    response = events[-1]["response"]
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["usage"]["output_tokens"] == 5


def test_without_stream_the_target_says_it_streams_only(sim):
    with pytest.raises(urllib.error.HTTPError) as refused:
        post(sim, "/v1/responses", {"model": MODEL, "input": "hi"})
    assert refused.value.code == 400


def _chat_call(chunks: list[dict]) -> tuple[str, str, str]:
    """(name, arguments, finish_reason) of the one function call streamed in chat chunks."""
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert calls and calls[0]["type"] == "function" and calls[0]["id"]
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1]
    return calls[0]["function"]["name"], "".join(c["function"]["arguments"] for c in calls), finish


def test_a_task_calls_a_function_then_answers_after_its_result(sim):
    name, arguments, finish = _chat_call(chat_chunks(sim, tools=CHAT_TOOLS, reasoning_effort="low"))
    assert name == "get_weather" and list(json.loads(arguments)) == ["city"] and finish == "tool_calls"
    history = USER + [{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                                            "function": {"name": name, "arguments": arguments}}]},
                      {"role": "tool", "tool_call_id": "call_1", "content": "18 C, clear"}]
    answer = chat_chunks(sim, messages=history, tools=CHAT_TOOLS)
    assert any(c["choices"] and c["choices"][0]["delta"].get("content") for c in answer)
    assert not any(c["choices"] and "tool_calls" in c["choices"][0]["delta"] for c in answer)
    # the Responses API: the call is a function_call item whose arguments stream as deltas
    events = responses_events(sim, tools=RESPONSES_TOOLS, reasoning={"effort": "low"})
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    call = next(item for item in events[-1]["response"]["output"] if item["type"] == "function_call")
    assert call["name"] == "get_weather" and call["arguments"] == deltas and json.loads(deltas)
    assert not any(e["type"] == "response.output_text.delta" for e in events)
    after = [{"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]},
             {"type": "function_call_output", "call_id": call["call_id"], "output": "18 C, clear"}]
    answered = responses_events(sim, input=USER + after, tools=RESPONSES_TOOLS)
    assert any(e["type"] == "response.output_text.delta" for e in answered)


def test_tool_choice_none_answers_and_required_always_calls(sim):
    assert not any(c["choices"] and "tool_calls" in c["choices"][0]["delta"]
                   for c in chat_chunks(sim, tools=CHAT_TOOLS, tool_choice="none"))
    history = USER + [{"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]
    name, _, _ = _chat_call(chat_chunks(sim, messages=history, tools=CHAT_TOOLS, tool_choice="required"))
    assert name == "get_time"  # the second call of a task takes the next offered function


def test_tool_invalid_rate_breaks_calls_both_ways():
    process, url = start_sim(["--speedup", "1000", "--tool-invalid-rate", "1"])
    try:
        kinds = set()
        for _ in range(12):
            name, arguments, _ = _chat_call(chat_chunks(url, tools=CHAT_TOOLS, reasoning_effort="low"))
            if name == "get_weather":
                with pytest.raises(json.JSONDecodeError):
                    json.loads(arguments)
                kinds.add("not JSON")
            else:
                assert name == "get_weather_unoffered" and json.loads(arguments)
                kinds.add("not offered")
        assert kinds == {"not JSON", "not offered"}
    finally:
        assert stop_sim(process) == 0


@pytest.mark.parametrize("client", ["raw", "openai"])
def test_both_clients_time_responses_streams_against_the_send_log(tmp_path, client):
    log = tmp_path / "sent.jsonl"
    process, url = start_sim(["--fixed-ttft-ms", "30", "--fixed-itl-ms", "5", "--send-log", str(log)])
    records = []
    try:
        streaming = make_client(client, url, api="responses")
        body = {"model": MODEL, "input": USER, "stream": True, "max_output_tokens": 40, "reasoning": {"effort": "low"}}
        for _ in range(4):
            measure_request(streaming, body, "p1", records.append)
        streaming.close()
    finally:
        assert stop_sim(process) == 0  # flushes the send log
    sent = {line["request_id"]: line["sent_s"] for line in map(orjson.loads, log.read_bytes().splitlines())}
    assert sorted(sent) == sorted(r.request_id for r in records)
    delays = []
    for r in records:
        assert r.ok and r.completion_tokens == 40 and r.token_source == "server" and r.finish_reason == "length"
        assert r.token_events == len(sent[r.request_id]) == 40  # one token event per token the target wrote
        arrived = [r.start_monotonic_s + r.ttft_s]
        for gap in r.itl_s:
            arrived.append(arrived[-1] + gap)
        delays += [got - wrote for wrote, got in zip(sent[r.request_id], arrived)]
    assert min(delays) > 0  # the same CLOCK_MONOTONIC: nothing arrives before it was written
    assert statistics.median(delays) < (0.002 if client == "raw" else 0.02)
