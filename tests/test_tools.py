"""Tools (TOOLS, TOOL_ROUNDS) without a server: the request bodies, the calls read from both APIs' streams and
checked, the messages a round hands back, the results' exact length, a conversation's rounds and the tasks' figures."""

import orjson
import pytest

from conftest import REPO
from factories import make_record
from llmload.client.accumulator import (AnswerAccumulator, ResponsesToolCallAccumulator, StreamAccumulator,
                                        ToolCallAccumulator)
from llmload.client.apis import APIS
from llmload.client.body import ChatOptions, chat_body, responses_body
from llmload.client.toolcalls import ToolCall, ToolUse, chat_round_messages, invalid_call, responses_round_items
from llmload.promptsets.catalog import Prompt
from llmload.promptsets.conversation import Conversation
from llmload.promptsets.tokens import text_tokens
from llmload.promptsets.tools import RESULTS_PER_TOOL, load_tools, tool_names, tool_results
from llmload.results.tasks import task_outcome, task_stats

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

EXAMPLE = str(REPO / "tools" / "example.json")
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
START = 100.0


def test_the_example_file_offers_realistic_functions_get_weather_among_them():
    tools = load_tools(EXAMPLE)
    assert len(tools) >= 3 and "get_weather" in tool_names(tools)
    assert all(tool["function"]["description"] and tool["function"]["parameters"]["type"] == "object" for tool in tools)


def test_chat_sends_the_tools_as_given_and_responses_their_flat_form():
    tools = load_tools(EXAMPLE)
    options = ChatOptions(model="m", tools=tools, tool_choice="required")
    chat = chat_body(options, MESSAGES)
    assert chat["tools"] == list(tools) and chat["tool_choice"] == "required"
    responses = responses_body(options, MESSAGES)
    assert responses["tool_choice"] == "required"
    assert responses["tools"][0] == {"type": "function", **tools[0]["function"]}
    assert [t["name"] for t in responses["tools"]] == [t["function"]["name"] for t in tools]
    for body in (chat_body(ChatOptions(model="m"), MESSAGES), responses_body(ChatOptions(model="m"), MESSAGES)):
        assert "tools" not in body and "tool_choice" not in body  # no TOOLS: neither is sent


def _chat_chunk(delta=None, finish=None, usage=None):
    chunk = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage:
        chunk["usage"] = usage
    return chunk


def _call_piece(index, arguments, call_id=None, name=None):
    function = {"arguments": arguments}
    if name:
        function["name"] = name
    piece = {"index": index, "function": function}
    if call_id:
        piece.update(id=call_id, type="function")
    return {"tool_calls": [piece]}


# As vLLM streams gpt-oss's calls: reasoning, then the call's first piece naming it, then its arguments a piece each.
CHAT_CALL = [
    _chat_chunk({"role": "assistant", "content": ""}),
    _chat_chunk({"reasoning": "The user wants"}),
    _chat_chunk({"reasoning": " the weather."}),
    _chat_chunk(_call_piece(0, "", "call_1", "get_weather")),
    _chat_chunk(_call_piece(0, '{"city": ')),
    _chat_chunk(_call_piece(0, '"Paris"}')),
    _chat_chunk(finish="tool_calls"),
    {"choices": [], "usage": {"prompt_tokens": 80, "completion_tokens": 6,
                              "completion_tokens_details": {"reasoning_tokens": 4}}},
]


def _feed(acc, chunks):
    for i, chunk in enumerate(chunks):
        acc.on_chunk(START + 0.1 * (i + 1), chunk)
    acc.on_done(START + 0.1 * (len(chunks) + 1))
    return acc.finish(START + 0.1 * (len(chunks) + 2))


def _tool_acc(cls=ToolCallAccumulator, offered=("get_weather",)):
    acc = cls("r1", "p1", 0.0, START)
    acc.answer, acc.tool_use = [], ToolUse(frozenset(offered))
    return acc


@pytest.mark.parametrize("cls", [StreamAccumulator, AnswerAccumulator, ToolCallAccumulator])
def test_a_streamed_chat_call_is_output_timed_like_text(cls):
    acc = _tool_acc() if cls is ToolCallAccumulator else cls("r1", "p1", 0.0, START)
    if cls is AnswerAccumulator:
        acc.answer = []
    record = _feed(acc, CHAT_CALL)
    # two reasoning events and three call pieces carry tokens: TTFT at the first, ITL between them all
    assert record.ttft_s == pytest.approx(0.2) and record.token_events == 5
    assert record.itl_s == pytest.approx([0.1] * 4) and record.ttfvt_s is None
    assert record.ok and record.answered and record.finish_reason == "tool_calls"
    assert record.completion_tokens == 6 and record.reasoning_tokens == 4 and record.reasoning_source == "server"


def test_the_call_is_kept_whole_and_checked():
    acc = _tool_acc()
    record = _feed(acc, CHAT_CALL)
    assert record.ok
    assert acc.tool_use.calls == [ToolCall("call_1", "get_weather", '{"city": "Paris"}')]


def test_parallel_calls_are_told_apart_by_their_index():
    chunks = [_chat_chunk(_call_piece(0, '{"city": "Paris"}', "call_a", "get_weather")),
              _chat_chunk(_call_piece(1, '{"order_id":', "call_b", "lookup_order")),
              _chat_chunk(_call_piece(1, ' "ORD-1"}')), _chat_chunk(finish="tool_calls")]
    acc = _tool_acc(offered=("get_weather", "lookup_order"))
    assert _feed(acc, chunks).ok
    assert [(c.call_id, c.name, c.arguments) for c in acc.tool_use.calls] == [
        ("call_a", "get_weather", '{"city": "Paris"}'), ("call_b", "lookup_order", '{"order_id": "ORD-1"}')]


@pytest.mark.parametrize("name,arguments,why", [
    ("get_weather", '{"city": "Par', "arguments are not JSON"),
    ("get_weather", '["Paris"]', "arguments are not a JSON object"),
    ("get_weather_unoffered", '{"city": "Paris"}', "which was not offered"),
])
def test_an_invalid_call_is_a_tool_call_invalid_failure(name, arguments, why):
    chunks = [_chat_chunk(_call_piece(0, arguments, "call_1", name)), _chat_chunk(finish="tool_calls")]
    record = _feed(_tool_acc(), chunks)
    assert record.error == "tool_call_invalid" and why in record.error_detail and name in record.error_detail


def test_a_call_cut_by_the_output_limit_ends_length_unchecked():
    chunks = [_chat_chunk(_call_piece(0, '{"city": "Pa', "call_1", "get_weather")), _chat_chunk(finish="length")]
    record = _feed(_tool_acc(), chunks)
    assert record.ok and record.finish_reason == "length"


def test_a_failed_stream_keeps_its_own_category():
    chunks = [_chat_chunk(_call_piece(0, '{"ci', "call_1", "get_weather")), {"error": {"message": "engine died"}}]
    record = _feed(_tool_acc(), chunks)
    assert record.error == "stream_error"


def _responses_call(arguments='{"city": "Paris"}', name="get_weather"):
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": name, "arguments": arguments,
            "status": "completed"}
    usage = {"input_tokens": 60, "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 5}}
    return [
        {"type": "response.created", "response": {"status": "in_progress", "output": []}},
        {"type": "response.reasoning_text.delta", "delta": "Weather", "item_id": "rs_1"},
        {"type": "response.output_item.added", "item": {"type": "function_call", "name": name}},
        {"type": "response.function_call_arguments.delta", "delta": arguments[:5], "item_id": "fc_1"},
        {"type": "response.function_call_arguments.delta", "delta": arguments[5:], "item_id": "fc_1"},
        {"type": "response.completed", "response": {"status": "completed", "usage": usage,
                                                    "output": [{"type": "reasoning", "id": "rs_1"}, item]}},
    ], item


def test_a_responses_call_is_read_from_its_terminal_event():
    events, item = _responses_call()
    acc = _tool_acc(ResponsesToolCallAccumulator)
    record = _feed(acc, events)
    assert record.ok and record.finish_reason == "tool_calls" and record.token_events == 3 and record.ttfvt_s is None
    assert acc.tool_use.calls == [ToolCall("call_9", "get_weather", '{"city": "Paris"}', item)]


def test_a_responses_call_of_a_function_not_offered_is_invalid():
    events, _ = _responses_call(name="delete_everything")
    record = _feed(_tool_acc(ResponsesToolCallAccumulator), events)
    assert record.error == "tool_call_invalid" and "'delete_everything', which was not offered" in record.error_detail


def test_invalid_call_passes_valid_calls():
    calls = [ToolCall("a", "f", '{"x": 1}'), ToolCall("b", "g", "{}")]
    assert invalid_call(calls, frozenset({"f", "g"})) is None
    assert "not offered" in invalid_call(calls, frozenset({"f"}))


def test_a_chat_round_hands_back_the_calls_then_one_tool_message_each():
    calls = [ToolCall("call_a", "get_weather", '{"city": "Paris"}'), ToolCall("call_b", "lookup_order", "{}")]
    assert chat_round_messages(calls, "", ["r1", "r2"]) == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "r1"},
        {"role": "tool", "tool_call_id": "call_b", "content": "r2"}]
    assert chat_round_messages(calls[:1], "Let me look.", ["r1"])[0]["content"] == "Let me look."


def test_a_responses_round_hands_back_the_items_as_sent_then_their_outputs():
    _, item = _responses_call()
    calls = [ToolCall("call_9", "get_weather", item["arguments"], item)]
    assert responses_round_items(calls, "", ["18 C"]) == [
        item, {"type": "function_call_output", "call_id": "call_9", "output": "18 C"}]
    assert APIS["responses"].round_messages is responses_round_items and APIS["chat"].round_messages is chat_round_messages


@pytest.mark.parametrize("tokens", [40, 200, 1000])
def test_each_result_is_exactly_its_length_and_valid_json(tokens):
    results = tool_results(("get_weather", "search_knowledge_base"), tokens, 0)
    assert set(results) == {"get_weather", "search_knowledge_base"}
    for name, texts in results.items():
        assert len(texts) == RESULTS_PER_TOOL and len(set(texts)) == RESULTS_PER_TOOL
        for text in texts:
            assert text_tokens(text) == tokens and orjson.loads(text)["tool"] == name
    assert tool_results(("get_weather",), tokens, 0)["get_weather"] == results["get_weather"]  # seeded


def test_a_conversations_rounds_append_the_call_then_its_turn_answers():
    prompt = Prompt("p", list(MESSAGES), {}, {})
    conversation = Conversation.start("7", prompt, rounds=3)
    assert conversation.round == 1 and conversation.rounds_left and not conversation.mid_turn
    handed = [{"role": "assistant", "content": None, "tool_calls": []}, {"role": "tool", "content": "x"}]
    conversation.called(handed)
    assert conversation.round == 2 and conversation.mid_turn and not conversation.done
    assert conversation.messages == [*MESSAGES, *handed]
    conversation.answered("18 C and clear.")
    assert conversation.done and conversation.round == 1
    assert conversation.messages[-1] == {"role": "assistant", "content": "18 C and clear."}


def _round(task, round_, finish="stop", start=0.0, e2e=1.0, **fields):
    return make_record(task_id=task, round=round_, finish_reason=finish, start_monotonic_s=start, e2e_s=e2e,
                       answered=True, prompt_tokens=100 * round_, completion_tokens=10, reasoning_tokens=4, **fields)


def test_tasks_by_outcome_rounds_time_and_tokens():
    records = [
        _round("0.1", 1, "tool_calls", 0.0, 1.0), _round("0.1", 2, "stop", 1.0, 2.0),  # answered in 3 s
        _round("1.1", 1, "tool_calls"), _round("1.1", 2, "tool_calls"), _round("1.1", 3, "tool_calls"),  # out of rounds
        _round("2.1", 1, "tool_calls"),  # the run ended before its next round
        _round("3.1", 1, "tool_calls"), _round("3.1", 2, error="tool_call_invalid"),
        _round("4.1", 1, error="interrupted"),
        make_record(),  # no task: not a round
    ]
    stats = task_stats(records, max_rounds=3)
    assert stats.tasks == 5
    assert stats.outcomes == {"answered": 1, "no_answer": 0, "out_of_rounds": 1, "unfinished": 1, "failed": 1,
                              "interrupted": 1}
    assert stats.rounds_by_count == {"1": 2, "2": 2, "3": 1} and stats.rounds.total == 9
    assert stats.time_to_answer_ms.count == 1 and stats.time_to_answer_ms.mean == pytest.approx(3000.0)
    assert (stats.prompt_tokens.total, stats.output_tokens.total, stats.reasoning_tokens.total) == (300, 20, 8)
    assert task_stats([make_record()], 3) is None


def test_a_final_round_without_an_answer_is_no_answer():
    cut = _round("0.1", 2, "length")
    assert task_outcome([_round("0.1", 1, "tool_calls"), cut], 3) == "answered"
    assert task_outcome([_round("0.1", 1, "tool_calls"), make_record(task_id="0.1", round=2, finish_reason="length")],
                        3) == "no_answer"
