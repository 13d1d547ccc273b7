"""A streaming client on plain sockets: one keep-alive connection, no hidden retries; chat or the Responses API.

Each SSE event gets the arrival time of the piece of the response that completed it: the kernel's
receive stamp on plain TCP under Linux, else ``time.monotonic()`` the moment the read returned
(``arrival.py``). Reads take whatever the kernel holds (up to 64 KiB), so nothing waits for a block
to fill. Under Locust the socket module is gevent's. It connects straight to HOST, ignoring
*_PROXY variables: the proxy policy of llmload.system.control_http.
"""

from __future__ import annotations

import socket
import ssl
import time
from typing import Any, Callable

import orjson

from llmload.client.accumulator import StreamAccumulator
from llmload.client.apis import APIS
from llmload.client.arrival import ArrivalReader, RealtimeToMonotonic, ReadArrivalReader, arrival_reader
from llmload.client.faults import error_message
from llmload.client.reactor import IdleTimeout, process_reactor
from llmload.client.readstats import PROCESS_READ_STATS, ReadStats
from llmload.client.sse import ChunkedDecoder, SSEDecoder
from llmload.system.control_http import split_base_url, tls_context
from llmload.errors import ProtocolError, RequestFailed

__all__ = ["RawChatClient"]

_ERROR_BODY_LIMIT = 65536
_PROCESS_CLOCK = RealtimeToMonotonic()


class RawChatClient:
    """Streams ``POST /v1/chat/completions`` (or ``/v1/responses``, as ``api`` says) over one reused HTTP/1.1 connection."""

    def __init__(self, base_url: str, api_key: str = "", timeout_s: float = 600.0, kernel_stamps: bool = True,
                 read_stats: ReadStats = PROCESS_READ_STATS, clock: Callable[[], float] | None = None,
                 api: str = "chat") -> None:
        """``clock`` replaces the arrival stamps (a scripted clock in tests); it turns kernel stamps off."""
        self.api = APIS[api]
        self._scheme, self._host, self._port, prefix = split_base_url(base_url)
        self._timeout_s = timeout_s
        self._kernel_stamps = kernel_stamps and clock is None
        self._clock = clock or time.monotonic
        self._read_stats = read_stats
        default_port = 443 if self._scheme == "https" else 80
        host_header = self._host if self._port == default_port else f"{self._host}:{self._port}"
        auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        self._head = (
            f"POST {prefix}{self.api.path} HTTP/1.1\r\nHost: {host_header}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\nUser-Agent: llmload\r\n{auth}"
        )
        self._sock: socket.socket | None = None
        self._reader: ArrivalReader | None = None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._reader = None

    def _connection(self) -> tuple[socket.socket, ArrivalReader]:
        if self._sock is not None and self._reader is not None and not _peer_closed(self._sock):
            return self._sock, self._reader
        self.close()
        try:
            sock = socket.create_connection((self._host, self._port), timeout=self._timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._scheme == "https":
                sock = tls_context().wrap_socket(sock, server_hostname=self._host)
        except socket.timeout:
            raise RequestFailed("timeout", f"connecting to {self._host}:{self._port}") from None
        except ssl.SSLError as e:
            raise RequestFailed("connect", f"{self._host}:{self._port}: TLS handshake failed ({e.reason or e})") from None
        except OSError as e:
            raise RequestFailed("connect", f"{self._host}:{self._port}: {e.strerror or e}") from None
        if self._kernel_stamps:
            reader = arrival_reader(sock, self._read_stats, _PROCESS_CLOCK)
        else:
            reader = ReadArrivalReader(sock, self._read_stats, self._clock)
        self._sock, self._reader = sock, reader
        return sock, reader

    def stream_chat(self, body: dict[str, Any], request_id: str, acc: StreamAccumulator) -> float:
        payload = orjson.dumps(body)
        sock, reader = self._connection()
        reader.start_request()
        head = f"{self._head}X-Request-Id: {request_id}\r\nContent-Length: {len(payload)}\r\n\r\n"
        response = _Response(reader, acc)
        try:
            sock.settimeout(self._timeout_s)
            sock.sendall(head.encode() + payload)
            sock.settimeout(0.0)  # the reactor reads only what is there
            return process_reactor().serve(sock.fileno(), response.on_readable, self._timeout_s)
        except (socket.timeout, IdleTimeout):
            raise RequestFailed("timeout", f"no data for {self._timeout_s:g} s") from None
        except ProtocolError as e:
            raise RequestFailed("protocol", str(e)) from None
        except OSError as e:
            raise RequestFailed("disconnected", e.strerror or str(e)) from None
        finally:
            acc.arrival_stamps = reader.stamps
            if not response.keep:
                self.close()


def _peer_closed(sock: socket.socket) -> bool:
    """Whether a kept-alive connection (left non-blocking by its last response) was closed by the server while idle."""
    if isinstance(sock, ssl.SSLSocket):
        return False  # MSG_PEEK is not available on TLS sockets; a stale one fails as "disconnected"
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class _Response:
    """One response's parser, fed by the reactor whenever its socket has data: head, then the SSE body.

    ``on_readable`` reads what the socket holds and returns the end time once the response is complete.
    A status other than 200 ends in RequestFailed(http_<code>) with the start of the body's message.
    """

    __slots__ = ("_reader", "_acc", "_head", "_status", "_chunked", "_length", "_received", "_decoder", "_sse",
                 "_error_body", "keep")

    def __init__(self, reader: ArrivalReader, acc: StreamAccumulator) -> None:
        self._reader = reader
        self._acc = acc
        self._head: bytes | None = b""  # None once the head is parsed
        self._status = 0
        self._chunked = False
        self._length: int | None = None
        self._received = 0
        self._decoder: ChunkedDecoder | None = None
        self._sse = SSEDecoder()
        self._error_body = b""
        self.keep = False
        """Whether the connection can carry the next request (known once the head is read)."""

    def on_readable(self) -> float | None:
        for data, arrived_s in self._reader.read():
            if self._head is not None:
                if not data:
                    raise RequestFailed("disconnected", "connection closed before the response headers")
                data = self._on_head(data)
                if data is None or not (data or self._length == 0):
                    continue
                end_s = self._on_body(data, arrived_s, eof=False)
            else:
                end_s = self._on_body(data, arrived_s, eof=not data)
            if end_s is not None:
                return end_s
        return None

    def _on_head(self, data: bytes) -> bytes | None:
        """Collect the head; the body bytes that came with it, None while the head is incomplete."""
        buf = self._head + data
        head_end = buf.find(b"\r\n\r\n")
        if head_end < 0:
            if len(buf) > 65536:
                raise ProtocolError("response headers over 64 KiB")
            self._head = buf
            return None
        self._head = None
        self._status, headers = _parse_head(buf[:head_end])
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._length = None if self._chunked else _content_length(headers)
        self.keep = headers.get("connection", "").lower() != "close" and (self._chunked or self._length is not None)
        self._decoder = ChunkedDecoder() if self._chunked else None
        return buf[head_end + 4 :]

    def _on_body(self, data: bytes, arrived_s: float, eof: bool) -> float | None:
        decoder = self._decoder
        if eof:
            if self._status != 200:
                raise self._http_failure()
            if decoder is None and self._length is None:
                return self._end(arrived_s)  # a close-delimited body ends here
            raise RequestFailed("disconnected", "connection closed mid-stream")
        self._received += len(data)
        body = decoder.feed(data) if decoder is not None else data
        complete = (decoder is not None and decoder.done) or (self._length is not None and self._received >= self._length)
        if self._status != 200:
            self._error_body += body
            if complete or len(self._error_body) >= _ERROR_BODY_LIMIT:
                raise self._http_failure()
            return None
        acc = self._acc
        loads = orjson.loads
        for event in self._sse.feed(body):
            if event == b"[DONE]":
                acc.on_done(arrived_s)
                continue
            try:
                chunk = loads(event)
            except orjson.JSONDecodeError:
                raise ProtocolError(f"SSE data is not JSON: {event[:80]!r}") from None
            acc.on_chunk(arrived_s, chunk)
        return self._end(arrived_s) if complete else None

    def _end(self, arrived_s: float) -> float:
        acc = self._acc
        if acc.done_s is None and acc.stream_error is None:  # an error object says more than a missing [DONE]
            raise RequestFailed("protocol", f"stream ended without {acc.end_mark}")
        return acc.done_s or arrived_s

    def _http_failure(self) -> RequestFailed:
        self.keep = False  # the rest of an error body is not read
        return RequestFailed(f"http_{self._status}", error_message(self._error_body[:_ERROR_BODY_LIMIT]))


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError):
        raise ProtocolError(f"bad status line {lines[0][:60]!r}") from None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def _content_length(headers: dict[str, str]) -> int | None:
    value = headers.get("content-length")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ProtocolError(f"bad Content-Length {value[:20]!r}") from None
