"""The raw client against a scripted socket server: byte-exact responses, split where it hurts."""

import json
import socket
import threading
import time

import pytest

from llmload.client.raw import RawChatClient
from llmload.system.control_http import split_base_url
from llmload.client.measure import measure_request


class ScriptedServer:
    """Answers each request on a connection with the next script: a list of bytes or float pauses."""

    def __init__(self, scripts):
        self.scripts = list(scripts)
        self.requests = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while self.scripts:
            conn, _ = self.sock.accept()
            self.connections += 1
            with conn:
                while self.scripts:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        data = conn.recv(65536)
                        if not data:
                            break
                        request += data
                    if not request:
                        break
                    head, _, body = request.partition(b"\r\n\r\n")
                    length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
                    while len(body) < length:
                        body += conn.recv(65536)
                    self.requests.append((head.decode(), json.loads(body)))
                    script = self.scripts.pop(0)
                    for step in script:
                        if isinstance(step, float):
                            time.sleep(step)
                        elif step == "close":
                            break
                        else:
                            conn.sendall(step)
                    if "close" in script:
                        break


OK_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(obj) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def delta(**fields):
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": fields.pop("finish", None)}]}


USAGE = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10,
                                  "completion_tokens_details": {"reasoning_tokens": 1}}}
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def run(server, api_key=""):
    client = RawChatClient(server.url, api_key)
    records = []
    record = measure_request(client, BODY, "p1", records.append)
    assert records == [record]
    return client, record


@pytest.mark.integration
def test_vllm_stream_with_timing_and_split_utf8():
    answer = event(delta(content="日本"))
    cut = answer.index("日".encode()) + 1
    server = ScriptedServer([[
        OK_HEAD,
        chunk(event(delta(role="assistant", content=""))), 0.05,
        chunk(event(delta(reasoning="think"))), 0.03,
        chunk(b": ping\n\n"),
        chunk(answer[:cut]), 0.01, chunk(answer[cut:]), 0.02,
        chunk(event(delta(content="!", finish="stop"))),
        chunk(event(USAGE)), chunk(b"data: [DONE]\n\n"), b"0\r\n\r\n",
    ]])
    _, r = run(server, api_key="sk-test")
    assert r.ok, r.error_detail
    assert r.answered and r.finish_reason == "stop"
    assert (r.prompt_tokens, r.completion_tokens, r.reasoning_tokens) == (7, 3, 1)
    assert 0.045 < r.ttft_s < 0.07
    assert 0.03 - 0.005 < r.ttfvt_s - r.ttft_s < 0.045 + 0.01  # the answer event completes after the 10 ms split
    assert len(r.itl_s) == 2
    head, body = server.requests[0]
    assert "Authorization: Bearer sk-test" in head and "X-Request-Id: " in head
    assert body == BODY


@pytest.mark.integration
def test_crlf_events_and_content_length_body_and_keep_alive_reuse():
    stream = (event(delta(content="a")) + event(delta(content="b", finish="stop")) + event(USAGE) + b"data: [DONE]\n\n").replace(b"\n", b"\r\n")
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(stream)
    server = ScriptedServer([[head, stream], [head, stream]])
    client, r1 = run(server)
    r2 = measure_request(client, BODY, "p2", lambda r: None)
    assert r1.ok and r2.ok and r2.answered
    assert server.connections == 1


@pytest.mark.integration
def test_http_error_is_one_failed_record_with_the_body():
    body = b'{"error": {"message": "The model `m` does not exist.", "code": 404}}'
    server = ScriptedServer([[b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body), body]])
    _, r = run(server)
    assert r.error == "http_404" and "does not exist" in r.error_detail


@pytest.mark.integration
def test_connection_closed_mid_stream():
    server = ScriptedServer([[OK_HEAD, chunk(event(delta(content="a"))), "close"]])
    _, r = run(server)
    assert r.error == "disconnected" and r.ttft_s is not None


@pytest.mark.integration
def test_stream_without_done_is_a_protocol_error():
    server = ScriptedServer([[OK_HEAD, chunk(event(delta(content="a", finish="stop"))), b"0\r\n\r\n"]])
    _, r = run(server)
    assert r.error == "protocol" and "[DONE]" in r.error_detail


@pytest.mark.integration
def test_garbage_data_is_a_protocol_error():
    server = ScriptedServer([[OK_HEAD, chunk(b"data: {not json\n\n")]])
    _, r = run(server)
    assert r.error == "protocol"


@pytest.mark.integration
def test_refused_connection():
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    r = measure_request(RawChatClient(f"http://127.0.0.1:{port}"), BODY, "p", lambda r: None)
    assert r.error == "connect"


@pytest.mark.integration
def test_read_timeout():
    server = ScriptedServer([[OK_HEAD, 1.0]])
    r = measure_request(RawChatClient(server.url, timeout_s=0.2), BODY, "p", lambda r: None)
    assert r.error == "timeout"


@pytest.mark.integration
def test_stale_keep_alive_connection_is_replaced_not_retried():
    stream = event(delta(content="a", finish="stop")) + b"data: [DONE]\n\n"
    head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(stream)
    server = ScriptedServer([[head, stream, "close"], [head, stream]])
    client, r1 = run(server)
    time.sleep(0.05)
    r2 = measure_request(client, BODY, "p2", lambda r: None)
    assert r1.ok and r2.ok and server.connections == 2 and len(server.requests) == 2


@pytest.mark.pure
@pytest.mark.parametrize("url,expected", [
    ("http://127.0.0.1:8000", ("http", "127.0.0.1", 8000, "")),
    ("http://127.0.0.1:8000/v1/", ("http", "127.0.0.1", 8000, "")),
    ("https://gw.example/llm/v1", ("https", "gw.example", 443, "/llm")),
    ("127.0.0.1:9", ("http", "127.0.0.1", 9, "")),
])
def test_split_base_url(url, expected):
    assert split_base_url(url) == expected
