"""Request bodies: what is sent for each option."""

import pytest
from llmload.client.body import ChatOptions, chat_body

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

MESSAGES = [{"role": "user", "content": "Summarise the thread."}]


def test_defaults_send_effort_usage_and_leave_max_tokens_out():
    body = chat_body(ChatOptions(model="m"), MESSAGES)
    assert body == {"model": "m", "messages": MESSAGES, "stream": True, "temperature": 1.0, "reasoning_effort": "medium",
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


def test_effort_none_and_max_tokens_and_overrides():
    options = ChatOptions(model="m", effort="none", max_tokens=100, continuous_usage=False, extra_body={"top_p": 0.5, "max_tokens": 7})
    body = chat_body(options, MESSAGES, request={"max_tokens": 50, "ignore_eos": True})
    assert "reasoning_effort" not in body and body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True and body["top_p"] == 0.5
    assert body["max_tokens"] == 7  # run option < prompt's request < EXTRA_BODY
