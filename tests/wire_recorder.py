"""A TCP proxy in front of a server that keeps every byte each way, and reads the chat exchanges back out of them:
what the load generator really sent, and what the server really streamed, with no hook in the suite."""

from __future__ import annotations

import json
import socket
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from contextlib import contextmanager
from typing import Iterator
from urllib.parse import urlparse

from llmload.promptsets.tokens import prompt_tokens


@dataclass
class Exchange:
    """One POST /v1/chat/completions: the body sent and the chunks streamed back."""

    body: dict
    chunks: list[dict]

    @property
    def answer(self) -> str:
        """The visible answer's text as the server streamed it (``delta.content``)."""
        return "".join((c["choices"][0].get("delta") or {}).get("content") or "" for c in self.chunks if c.get("choices"))

    @property
    def usage(self) -> dict:
        return next((c["usage"] for c in reversed(self.chunks) if c.get("usage")), {})


@dataclass
class WireRecorder:
    """Listens on 127.0.0.1:``port`` and forwards to ``target``; ``connections`` holds (sent, received) bytes each."""

    target: tuple[str, int]
    connections: list[tuple[bytearray, bytearray]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            sent, received = bytearray(), bytearray()
            self.connections.append((sent, received))
            for source, sink, kept in ((client, server, sent), (server, client, received)):
                threading.Thread(target=_pump, args=(source, sink, kept), daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def exchanges(self, path: str = "/v1/chat/completions") -> list[Exchange]:
        """Every exchange on ``path`` (chat's, unless given), per connection in order (a connection carries one
        request at a time)."""
        out = []
        for sent, received in self.connections:
            for (head, body), (_, answer) in zip(_messages(bytes(sent)), _messages(bytes(received))):
                if head.startswith(b"POST " + path.encode() + b" "):
                    # an event's data line (a Responses event has an "event: <type>" line before it)
                    data = (line for e in answer.split(b"\n\n") for line in e.split(b"\n") if line.startswith(b"data: "))
                    events = [line[6:] for line in data if line != b"data: [DONE]"]
                    out.append(Exchange(json.loads(body), [json.loads(e) for e in events]))
        return out


@contextmanager
def recording(url: str) -> Iterator[WireRecorder]:
    """A WireRecorder in front of the server at ``url`` while the block runs."""
    parsed = urlparse(url)
    recorder = WireRecorder((parsed.hostname, parsed.port))
    try:
        yield recorder
    finally:
        recorder.close()


def _pump(source: socket.socket, sink: socket.socket, kept: bytearray) -> None:
    try:
        while data := source.recv(65536):
            kept += data
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _messages(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(head, body) of each HTTP message in one direction of a connection; a chunked body decoded."""
    while data:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            return
        head, data = data[:end], data[end + 4:]
        headers = {line.split(b":", 1)[0].strip().lower(): line.split(b":", 1)[1].strip()
                   for line in head.split(b"\r\n")[1:] if b":" in line}
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            body = b""
            while True:  # size line, payload, CRLF; a size of 0 ends the body (no trailers here)
                line_end = data.index(b"\r\n")
                size = int(data[:line_end].split(b";")[0], 16)
                body += data[line_end + 2:line_end + 2 + size]
                data = data[line_end + 2 + size + 2:]
                if size == 0:
                    break
            yield head, body
        else:
            length = int(headers.get(b"content-length", b"0"))
            body, data = data[:length], data[length:]
            yield head, body


def check_history_is_the_answers(exchanges: list[Exchange]) -> dict[int, int]:
    """Assert that each later turn's messages are the turn before's, its answer as streamed and one new user message,
    and that the server counted each prompt as the suite does; return how many requests each turn had."""
    by_messages = defaultdict(list)  # two conversations may start from the same prompt
    for e in exchanges:
        by_messages[json.dumps(e.body["messages"])].append(e)
    turns: dict[int, int] = defaultdict(int)
    for e in exchanges:
        messages = e.body["messages"]
        turn = 1 + sum(m["role"] == "assistant" for m in messages)
        turns[turn] += 1
        if turn == 1:
            continue
        assert messages[-1]["role"] == "user" and messages[-2]["role"] == "assistant"
        before = by_messages[json.dumps(messages[:-2])]  # the turn before sent exactly the rest ...
        assert messages[-2]["content"] in [b.answer for b in before]  # ... and streamed this answer (reasoning left out)
        assert e.usage["prompt_tokens"] == prompt_tokens(messages, e.body.get("reasoning_effort", "medium"))
    return dict(turns)
