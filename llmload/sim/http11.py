"""Minimal asyncio.Protocol HTTP/1.1 server connection: keep-alive, Content-Length, chunked out."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable, Protocol

from .chunks import error_body

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass(slots=True)
class Request:
    """One parsed HTTP request."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes


class ActiveResponse(Protocol):
    """A response in progress that must hear about the connection's fate."""

    def on_lost(self) -> None:
        """The peer went away before the response finished."""

    def on_pause(self) -> None:
        """The socket buffer is above its high-water mark."""

    def on_resume(self) -> None:
        """The socket buffer drained."""


Handler = Callable[["HttpConnection", Request], None]


class HttpConnection(asyncio.Protocol):
    """Parses requests one at a time and lets a handler answer each, possibly later."""

    def __init__(self, handler: Handler, registry: set["HttpConnection"]) -> None:
        self._handler = handler
        self._registry = registry
        self._buf = bytearray()
        self._busy = False  # a response is in progress; further requests wait in _buf
        self._in_process = False
        self._keep_alive = True
        self._paused = False
        self.transport: asyncio.Transport | None = None
        self.active: ActiveResponse | None = None
        self.closed = False

    # ---- asyncio.Protocol callbacks ----------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Remember the transport."""
        self.transport = transport  # type: ignore[assignment]
        self._registry.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        """Tell an in-flight response that nobody is listening any more."""
        self.closed = True
        self._registry.discard(self)
        active, self.active = self.active, None
        if active is not None:
            active.on_lost()

    def pause_writing(self) -> None:
        """Forward backpressure to the response so it stops producing."""
        self._paused = True
        if self.active is not None:
            self.active.on_pause()

    def resume_writing(self) -> None:
        """Forward drain to the response."""
        self._paused = False
        if self.active is not None:
            self.active.on_resume()

    @property
    def paused(self) -> bool:
        """Whether the socket buffer is currently above its high-water mark."""
        return self._paused

    def data_received(self, data: bytes) -> None:
        """Buffer bytes; parse when no response is in progress (no pipelined overlap)."""
        self._buf += data
        if not self._busy:
            self._process()

    # ---- request parsing ---------------------------------------------------------
    def _process(self) -> None:
        """Dispatch complete buffered requests until one answers asynchronously."""
        self._in_process = True
        try:
            while not self._busy and not self.closed:
                req = self._parse()
                if req is None:
                    return
                self._busy = True
                self._handler(self, req)
        finally:
            self._in_process = False

    def _parse(self) -> Request | None:
        """Return the next complete request from the buffer, or None if incomplete."""
        buf = self._buf
        while buf[:2] == b"\r\n":  # tolerate stray CRLF between requests
            del buf[:2]
        if buf and not b"A"[0] <= buf[0] <= b"Z"[0]:  # e.g. a TLS ClientHello: answer now, not at the client's timeout
            self._fatal(400, "not an HTTP/1.1 request (TLS to a plain-HTTP port?)")
            return None
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD_BYTES:
                self._fatal(431, "request head too large")
            return None
        lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._fatal(400, "malformed request line")
            return None
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                self._fatal(400, "malformed header line")
                return None
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._fatal(501, "chunked request bodies are not supported; send Content-Length")
            return None
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self._fatal(400, "bad Content-Length")
            return None
        if length < 0 or length > MAX_BODY_BYTES:
            self._fatal(413, "request body too large")
            return None
        total = end + 4 + length
        if len(buf) < total:
            if headers.get("expect", "").lower() == "100-continue" and len(buf) == end + 4:
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return None
        body = bytes(buf[end + 4:total])
        del buf[:total]
        conn = headers.get("connection", "").lower()
        self._keep_alive = ("close" not in conn) if version == "HTTP/1.1" else ("keep-alive" in conn)
        return Request(method, target.split("?", 1)[0], headers, body)

    def _fatal(self, status: int, message: str) -> None:
        """Answer an unparseable request and close, since framing is lost."""
        self._keep_alive = False
        self._busy = True
        self.send(status, error_body(status, message))

    # ---- response writing --------------------------------------------------------
    def _head(self, status: int, content_type: str, extra: str) -> bytes:
        """Status line and headers."""
        conn = "" if self._keep_alive else "connection: close\r\n"
        return (f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
                f"content-type: {content_type}\r\n{extra}{conn}\r\n").encode("latin-1")

    def send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        """Send a complete response with Content-Length and finish it."""
        if self.closed or self.transport is None:
            return
        self.transport.write(self._head(status, content_type, f"content-length: {len(body)}\r\n") + body)
        self.finish()

    def start_stream(self, status: int, content_type: str, active: ActiveResponse) -> None:
        """Send headers of a chunked response; the caller then writes pre-framed chunks."""
        self.active = active
        self.transport.write(self._head(status, content_type, "transfer-encoding: chunked\r\n"))

    def finish(self) -> None:
        """Mark the current response complete; close or move to the next request."""
        self.active = None
        self._busy = False
        if not self._keep_alive:
            self.transport.close()
            self.closed = True
            self._registry.discard(self)
            return
        if self._buf and not self._in_process:
            # Defer: finish() may run deep inside the engine's token loop.
            asyncio.get_running_loop().call_soon(self._resume_processing)

    def _resume_processing(self) -> None:
        """Parse requests that arrived while the previous response was streaming."""
        if not self._busy and not self.closed:
            self._process()

    def close(self) -> None:
        """Close after flushing what was written (fault injection)."""
        if self.transport is not None and not self.closed:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection without flushing (shutdown)."""
        if self.transport is not None and not self.closed:
            self.transport.abort()
