"""Incremental decoders for a streamed HTTP response body: chunked transfer coding, then SSE.

Both take bytes as they come off the socket, in pieces of any size, and return only what is
complete, so a multi-byte UTF-8 character or a ``\\r\\n`` split across reads is handled. SSE events
are returned as the raw bytes of their ``data`` field; comments (keep-alives) and other fields
are dropped.
"""

from __future__ import annotations

from llmload.errors import ProtocolError

__all__ = ["ChunkedDecoder", "SSEDecoder", "ProtocolError"]


class ChunkedDecoder:
    """Decodes ``Transfer-Encoding: chunked``; ``done`` turns true at the zero-size chunk."""

    __slots__ = ("_buf", "_remaining", "_need_crlf", "done")

    def __init__(self) -> None:
        self._buf = b""
        self._remaining = 0  # payload bytes still due in the current chunk
        self._need_crlf = False  # the CRLF after a chunk's payload is still due
        self.done = False

    def feed(self, data: bytes) -> bytes:
        if not (self._buf or self._remaining or self._need_crlf or self.done):
            # The common case, one whole chunk per read (a server writes an event a chunk): no loop.
            eol = data.find(b"\r\n")
            if 0 < eol <= 8 and data.endswith(b"\r\n"):
                try:
                    size = int(data[:eol], 16)
                except ValueError:
                    size = -1  # an extension or a bad size: the general path says which
                if size > 0 and eol + 4 + size == len(data):
                    return data[eol + 2 : -2]
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos = 0
        end = len(buf)
        while pos < end and not self.done:
            if self._remaining:
                take = min(self._remaining, end - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._need_crlf = True
                continue
            if self._need_crlf:
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ProtocolError("chunk payload not followed by CRLF")
                pos += 2
                self._need_crlf = False
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if end - pos > 1024:
                    raise ProtocolError("chunk-size line too long")
                break
            size_field = buf[pos:eol].split(b";", 1)[0].strip()
            try:
                size = int(size_field, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_field[:20]!r}") from None
            pos = eol + 2
            if size == 0:
                self.done = True  # trailers, if any, carry nothing we use
            else:
                self._remaining = size
        self._buf = buf[pos:] if pos < end and not self.done else b""
        return b"".join(out) if len(out) != 1 else out[0]


class SSEDecoder:
    """Splits a text/event-stream into the data payloads of complete events."""

    __slots__ = ("_buf", "_skip_lf")

    def __init__(self) -> None:
        self._buf = b""
        self._skip_lf = False  # the last piece ended in CR: a LF starting the next one is its pair

    def feed(self, data: bytes) -> list[bytes]:
        if not self._buf and not self._skip_lf and data.endswith(b"\n\n"):
            # The common case, one whole event of one data line (after an event line, as the Responses API
            # sends them): no split, no copy of a buffer.
            payload = data[6:-2] if data.startswith(b"data: ") else _after_event_line(data[:-2])
            if payload is not None and b"\n" not in payload and b"\r" not in payload:
                return [payload]
        if self._skip_lf and data:
            self._skip_lf = False
            if data.startswith(b"\n"):
                data = data[1:]
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:
            # Rare: CRLF or CR line endings. A CR ends a line at once (so a CR-only stream never
            # waits for the next read); a LF right after it is dropped when it comes.
            self._skip_lf = buf.endswith(b"\r")
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        blocks = buf.split(b"\n\n")
        self._buf = blocks.pop()
        payloads: list[bytes] = []
        for block in blocks:
            payload = block[6:] if block.startswith(b"data: ") else _after_event_line(block)  # the common cases
            if payload is None or b"\n" in payload:
                payload = _parse_event_block(block)
            if payload is not None:
                payloads.append(payload)
        return payloads


def _after_event_line(block: bytes) -> bytes | None:
    """What follows ``event: <name>\\ndata: `` in a block that starts so (the Responses API's events), else None."""
    if not block.startswith(b"event: "):
        return None
    data_at = block.find(b"\ndata: ")
    if data_at < 0 or b"\n" in block[:data_at]:
        return None
    return block[data_at + 7 :]


def _parse_event_block(block: bytes) -> bytes | None:
    """The data of one event block (several lines), or None for a comment-only block."""
    data_lines = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data_lines.append(value[1:] if value.startswith(b" ") else value)
        # Comment lines (":" keep-alives), "event:", "id:", "retry:" and blanks carry no token.
    if not data_lines:
        return None
    return b"\n".join(data_lines)
