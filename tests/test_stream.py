"""Chunk shapes to records: every delta shape vLLM and its peers send."""

import pytest

from llmload.client.accumulator import StreamAccumulator

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

START = 100.0


def role():
    return {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}


def delta(finish=None, usage=None, **fields):
    chunk = {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def usage_chunk(prompt, completion, reasoning=None):
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {"choices": [], "usage": usage}


def acc():
    return StreamAccumulator("r1", "p1", 1_700_000_000.0, START)


def test_reasoning_then_answer_with_server_usage():
    a = acc()
    a.on_chunk(START + 0.100, role())
    a.on_chunk(START + 0.100, delta(reasoning="Let"))
    a.on_chunk(START + 0.110, delta(reasoning=" me"))
    a.on_chunk(START + 0.130, delta(content="Hi"))
    a.on_chunk(START + 0.140, delta(content="!", finish="stop"))
    a.on_chunk(START + 0.141, usage_chunk(50, 4, reasoning=2))
    a.on_done(START + 0.142)
    r = a.finish(a.done_s)
    assert r.ok and r.answered and r.finish_reason == "stop"
    assert abs(r.ttft_s - 0.100) < 1e-12 and abs(r.ttfvt_s - 0.130) < 1e-12
    assert [round(x, 6) for x in r.itl_s] == [0.010, 0.020, 0.010]
    assert abs(r.e2e_s - 0.142) < 1e-12
    assert abs(r.tpot_s - (0.142 - 0.100) / 3) < 1e-12
    assert (r.prompt_tokens, r.completion_tokens, r.reasoning_tokens) == (50, 4, 2)
    assert (r.token_source, r.reasoning_source) == ("server", "server")


def test_an_answer_sent_in_one_event_has_no_tpot():
    # vLLM with gpt-oss whose harmony parse fails holds the answer back and sends it whole at the end.
    a = acc()
    a.on_chunk(START + 0.050, role())
    a.on_chunk(START + 1.200, delta(content="the whole answer", finish="length"))
    a.on_chunk(START + 1.2001, usage_chunk(50, 256))
    a.on_done(START + 1.2002)
    r = a.finish(a.done_s)
    assert r.ok and r.completion_tokens == 256 and r.token_events == 1 and r.itl_s == []
    assert r.tpot_s is None  # not (E2E - TTFT) / 255, about 0: nothing to time between the tokens


def test_older_reasoning_content_field_counts_as_reasoning():
    a = acc()
    a.on_chunk(START + 0.05, delta(reasoning_content="think"))
    a.on_chunk(START + 0.06, delta(content="ok", finish="stop"))
    a.on_done(START + 0.07)
    r = a.finish(a.done_s)
    assert abs(r.ttft_s - 0.05) < 1e-12
    assert r.reasoning_tokens == 1 and r.reasoning_source == "stream"
    assert r.completion_tokens == 2 and r.token_source == "stream"


def test_continuous_usage_counts_bundled_reasoning_tokens_exactly():
    a = acc()
    u = lambda c: {"prompt_tokens": 9, "completion_tokens": c, "total_tokens": 9 + c}
    a.on_chunk(START + 0.01, {**role(), "usage": u(0)})
    a.on_chunk(START + 0.02, delta(reasoning="a b c", usage=u(3)))
    a.on_chunk(START + 0.03, delta(reasoning="d", usage=u(4)))
    a.on_chunk(START + 0.04, delta(content="x y", usage=u(6), finish="stop"))
    a.on_chunk(START + 0.04, usage_chunk(9, 6))  # a server without reasoning_tokens in usage
    a.on_done(START + 0.05)
    r = a.finish(a.done_s)
    assert r.reasoning_tokens == 4 and r.reasoning_source == "stream"
    assert r.completion_tokens == 6 and r.token_source == "server"
    assert len(r.itl_s) == 2


def test_max_tokens_inside_reasoning_gives_no_answer():
    a = acc()
    a.on_chunk(START + 0.01, delta(reasoning="a"))
    a.on_chunk(START + 0.02, delta(reasoning="b", finish="length"))
    a.on_chunk(START + 0.02, usage_chunk(5, 2, reasoning=2))
    a.on_done(START + 0.03)
    r = a.finish(a.done_s)
    assert r.ok and not r.answered and r.finish_reason == "length" and r.ttfvt_s is None


def test_error_object_in_stream_makes_a_failed_record():
    a = acc()
    a.on_chunk(START + 0.01, delta(content="a"))
    a.on_chunk(START + 0.02, {"error": {"message": "engine died", "type": "InternalServerError"}})
    r = a.finish(START + 0.03)
    assert r.error == "stream_error" and r.error_detail == "engine died"


def test_no_token_at_all():
    a = acc()
    a.on_chunk(START + 0.01, role())
    r = a.finish(START + 0.02, "disconnected", "closed")
    assert r.ttft_s is None and r.tpot_s is None and r.itl_s == [] and r.error == "disconnected"
    assert r.reasoning_source == "none"


def test_where_each_clock_stops():
    """TTFT skips the role-only chunk; E2E ends at [DONE], after the usage chunk; TPOT is (E2E - TTFT) / (n - 1)."""
    a = acc()
    a.on_chunk(START + 0.050, role())
    a.on_chunk(START + 0.200, delta(reasoning="a"))
    a.on_chunk(START + 0.300, delta(content="b", finish="stop"))
    a.on_chunk(START + 0.400, usage_chunk(10, 2, reasoning=1))
    a.on_done(START + 0.500)
    r = a.finish(a.done_s)
    assert r.ttft_s == pytest.approx(0.200) and r.ttfvt_s == pytest.approx(0.300)
    assert r.e2e_s == pytest.approx(0.500) and r.itl_s == pytest.approx([0.100])
    assert r.tpot_s == pytest.approx((0.500 - 0.200) / (2 - 1))


def _sglang_usage(reasoning_top, details):
    """SGLang's usage chunk as its UsageInfo dumps it (sglang 0.5.23 openai/protocol.py): reasoning_tokens on top,
    completion_tokens_details only when there are some, prompt_tokens_details null without --enable-cache-report."""
    return {"choices": [], "usage": {"prompt_tokens": 50, "total_tokens": 54, "completion_tokens": 4,
                                     "prompt_tokens_details": None, "reasoning_tokens": reasoning_top,
                                     "completion_tokens_details": details}}


@pytest.mark.parametrize("usage,expected", [
    (_sglang_usage(2, {"reasoning_tokens": 2}), (2, "server")),   # 0.5.23
    (_sglang_usage(2, None), (2, "server")),                       # its own field only
    (_sglang_usage(0, None), (2, "stream")),                       # before its fix (PR 15562): 0 whatever came
])
def test_sglang_streams_reasoning_content_and_counts_it_in_its_usage(usage, expected):
    a = acc()
    a.on_chunk(START + 0.05, delta(reasoning_content="Let"))
    a.on_chunk(START + 0.06, delta(reasoning_content=" me"))
    a.on_chunk(START + 0.08, delta(content="Hi"))
    a.on_chunk(START + 0.09, delta(content="!", finish="stop"))
    a.on_chunk(START + 0.091, usage)
    a.on_done(START + 0.092)
    r = a.finish(a.done_s)
    assert abs(r.ttft_s - 0.05) < 1e-12 and abs(r.ttfvt_s - 0.08) < 1e-12
    assert (r.reasoning_tokens, r.reasoning_source) == expected and r.cached_tokens is None


def test_trtllm_serves_reasoning_and_usage_without_its_count():
    # tensorrt_llm/serve/harmony_adapter.py: deltas carry tool_calls [] beside the text; the finish comes in an empty
    # delta of its own; the usage chunk has the three counts only.
    a = acc()
    a.on_chunk(START + 0.04, {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": []}}]})
    a.on_chunk(START + 0.05, delta(reasoning="Let", tool_calls=[]))
    a.on_chunk(START + 0.06, delta(reasoning=" me", tool_calls=[]))
    a.on_chunk(START + 0.08, delta(content="Hi", tool_calls=[]))
    a.on_chunk(START + 0.09, delta(finish="stop"))
    a.on_chunk(START + 0.091, usage_chunk(50, 3))
    a.on_done(START + 0.092)
    r = a.finish(a.done_s)
    assert abs(r.ttft_s - 0.05) < 1e-12 and abs(r.ttfvt_s - 0.08) < 1e-12 and r.finish_reason == "stop"
    assert (r.reasoning_tokens, r.reasoning_source, r.completion_tokens, r.token_source) == (2, "stream", 3, "server")
