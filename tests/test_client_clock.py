"""The raw client on a scripted clock: its timing identities hold exactly, with no sleeps or tolerances."""

import itertools

import pytest

from llmload.client.body import ChatOptions, chat_body
from llmload.client.measure import measure_request
from llmload.client.raw import RawChatClient
from llmload.sim import start_sim, stop_sim

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fast_sim():
    """Reasoning, then an answer, each token as fast as the target sends it."""
    process, url = start_sim(["--fixed-ttft-ms", "1", "--fixed-itl-ms", "0"])
    yield url
    stop_sim(process)


def test_timing_identities_on_a_scripted_clock(fast_sim):
    ticks = itertools.count(1000)  # every call of the clock is one second later than the one before
    clock = lambda: float(next(ticks))  # noqa: E731
    client = RawChatClient(fast_sim, clock=clock)
    records = []
    body = chat_body(ChatOptions(model="openai/gpt-oss-20b", effort="low"), [{"role": "user", "content": "hello"}])
    try:
        for _ in range(3):
            measure_request(client, body, "p", records.append, clock=clock)
    finally:
        client.close()
    for r in records:
        assert r.ok and r.arrival_stamps == "user" and r.answered and r.reasoning_tokens > 0
        durations = [r.e2e_s, r.ttft_s, r.ttfvt_s, *r.itl_s]
        assert all(d == int(d) and d >= 0 for d in durations)  # every stamp came from the scripted clock
        assert r.ttft_s >= 1 and r.ttft_s <= r.ttfvt_s <= r.e2e_s
        # The first token's stamp plus the gaps after it is the last token's stamp, which [DONE] follows.
        last_token_s = r.ttft_s + sum(r.itl_s)
        assert last_token_s <= r.e2e_s and len(r.itl_s) <= r.completion_tokens - 1
        assert r.tpot_s == (r.e2e_s - r.ttft_s) / (r.completion_tokens - 1)
