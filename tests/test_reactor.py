"""The work the load process does per event, counted: a regression that puts it back on the loop fails here.

Counted, not timed: how often the streams' greenlets wake (with a greenlet per stream, every event cost a
switch into the stream's greenlet and one back, plus a gevent Timeout and a failed read around each
wait; now a few per request), and how often anything else wakes per event read. Streams start together, so a step's events land together, as from vLLM.
"""

import shutil
import socket
import ssl
import subprocess
import threading
import time

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

pytestmark = pytest.mark.integration

STREAMS = 32
TOKENS = 40


@pytest.fixture(scope="module")
def lockstep_sim():
    process, url = start_sim(["--fixed-ttft-ms", "50", "--fixed-itl-ms", "10"])
    yield url
    stop_sim(process)


def _run_streams(url: str, monkeypatch) -> tuple[list, int, int]:
    """STREAMS clients started together, two requests each; (records, wake-ups of their greenlets, of any other)."""
    body = chat_body(ChatOptions(model="openai/gpt-oss-20b", effort="low", max_tokens=TOKENS,
                                 extra_body={"ignore_eos": True}), [{"role": "user", "content": "hi"}])
    monkeypatch.setattr(raw, "socket", gevent.socket)  # gevent's sockets, as under Locust (which patches them)
    clients = [RawChatClient(url) for _ in range(STREAMS)]
    records: list = []
    users: set[int] = set()
    hub = gevent.get_hub()
    wakeups = {"users": 0, "others": 0}

    def count(event, args):
        if event in ("switch", "throw") and args[1] is not hub:  # into the hub is every greenlet's wait
            wakeups["users" if id(args[1]) in users else "others"] += 1

    def user(client):
        for _ in range(2):
            measure_request(client, body, "p", records.append)

    PROCESS_READ_STATS.reset()
    previous = greenlet.settrace(count)
    try:
        greenlets = [gevent.spawn(user, client) for client in clients]
        users.update(id(g) for g in greenlets)
        gevent.joinall(greenlets, raise_error=True)
    finally:
        greenlet.settrace(previous)
        for client in clients:
            client.close()
    return records, wakeups["users"], wakeups["others"]


def test_the_loop_does_a_bounded_amount_of_work_per_event(lockstep_sim, monkeypatch):
    records, user_wakeups, other_wakeups = _run_streams(lockstep_sim, monkeypatch)
    assert len(records) == 2 * STREAMS and all(r.ok for r in records)
    token_events = sum(1 + len(r.itl_s) for r in records)
    assert token_events == 2 * STREAMS * TOKENS  # one event per token: the sim streams them 10 ms apart
    # A stream's greenlet sleeps through its response: it wakes a few times per request (connect, send, the
    # response complete), however many events the response has. A greenlet per stream woke once per event.
    assert user_wakeups <= 4 * len(records), f"{user_wakeups} wake-ups of the streams' greenlets for {len(records)} requests"
    # One reader reads every stream: it wakes at most once per event that arrived (once per batch when they land together).
    stats = PROCESS_READ_STATS
    assert other_wakeups <= stats.events, f"{other_wakeups} other wake-ups for {stats.events} events read"
    assert stats.events >= token_events and stats.wakeups <= stats.events
    assert stats.max_in_flight == STREAMS and stats.in_flight == 0


def _self_signed(tmp_path):
    """A certificate for 127.0.0.1 made with the openssl command; (cert, key) paths."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command for a test certificate")
def test_a_tls_stream_is_read_with_user_space_stamps(tmp_path, monkeypatch):
    """Over TLS the reactor reads what OpenSSL decrypted (user-space stamps), events spaced as the server sent them."""
    cert, key = _self_signed(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    events = [b'data: {"choices":[{"index":0,"delta":{"reasoning":"r%d"}}]}\n\n' % i for i in range(3)]
    events += [b'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}\n\n',
               b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}\n\n', b"data: [DONE]\n\n"]

    def serve():
        conn, _ = listener.accept()
        with server_context.wrap_socket(conn, server_side=True) as tls:
            request = b""
            while b"\r\n\r\n" not in request:
                request += tls.recv(65536)
            tls.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            for event in events:
                time.sleep(0.03)
                tls.sendall(b"%x\r\n%s\r\n" % (len(event), event))
            tls.sendall(b"0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    client_context = ssl.create_default_context(cafile=str(cert))
    monkeypatch.setattr(raw, "tls_context", lambda: client_context)
    client = RawChatClient(f"https://127.0.0.1:{port}")
    record = measure_request(client, {"model": "m", "messages": []}, "p", lambda r: None)
    client.close()
    listener.close()
    assert record.ok, record.error_detail
    assert record.arrival_stamps == "user" and record.completion_tokens == 4 and record.answered
    assert len(record.itl_s) == 3 and all(gap > 0.001 for gap in record.itl_s)  # sent 30 ms apart: read apart
