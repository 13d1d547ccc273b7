"""The work the load process does per event, counted: a regression that puts it back on the loop fails here.

Counted, not timed: greenlet switches per token event (with a greenlet per stream, every event cost a
switch into the stream's greenlet and one back, plus a gevent Timeout and a failed read around each
wait), and reads per event. Streams start together, so a step's events land together, as from vLLM.
"""

import greenlet
import gevent
import gevent.socket
import pytest

from llmload.client.body import ChatOptions, chat_body
from llmload.client.measure import measure_request
from llmload.client import raw
from llmload.client.raw import RawChatClient
from llmload.client.readstats import PROCESS_READ_STATS
from llmload.sim import start_sim, stop_sim

STREAMS = 32
TOKENS = 40


@pytest.fixture(scope="module")
def lockstep_sim():
    process, url = start_sim(["--fixed-ttft-ms", "50", "--fixed-itl-ms", "10"])
    yield url
    stop_sim(process)


def _run_streams(url: str, monkeypatch) -> tuple[list, int]:
    """STREAMS clients started together, two requests each; (records, greenlet switches meanwhile)."""
    body = chat_body(ChatOptions(model="openai/gpt-oss-20b", effort="low", max_tokens=TOKENS,
                                 extra_body={"ignore_eos": True}), [{"role": "user", "content": "hi"}])
    monkeypatch.setattr(raw, "socket", gevent.socket)  # gevent's sockets, as under Locust (which patches them)
    clients = [RawChatClient(url) for _ in range(STREAMS)]
    records: list = []
    switches = 0

    def count(event, args):
        nonlocal switches
        if event in ("switch", "throw"):
            switches += 1

    def user(client):
        for _ in range(2):
            measure_request(client, body, "p", records.append)

    PROCESS_READ_STATS.reset()
    previous = greenlet.settrace(count)
    try:
        gevent.joinall([gevent.spawn(user, client) for client in clients], raise_error=True)
    finally:
        greenlet.settrace(previous)
        for client in clients:
            client.close()
    return records, switches


def test_the_loop_does_a_bounded_amount_of_work_per_event(lockstep_sim, monkeypatch):
    records, switches = _run_streams(lockstep_sim, monkeypatch)
    assert len(records) == 2 * STREAMS and all(r.ok for r in records)
    token_events = sum(1 + len(r.itl_s) for r in records)
    assert token_events == 2 * STREAMS * TOKENS  # one event per token: the sim streams them 10 ms apart
    # One reader greenlet reads every stream: switches come per wake-up of the reader (which finds one or more
    # events) and per request. A greenlet per stream made at least 2 per event (into its greenlet and back).
    assert switches / token_events < 1.0, f"{switches} greenlet switches for {token_events} token events"
    # One read per wake-up finds what the kernel holds; none is spent to learn that nothing is there.
    stats = PROCESS_READ_STATS
    assert stats.events >= token_events and stats.wakeups <= stats.events
    assert stats.max_in_flight == STREAMS and stats.in_flight == 0
