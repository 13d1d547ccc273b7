"""The openai SDK's HTTP transport, watched for ``data: [DONE]``: the SDK consumes it silently, so
without this a stream that ends without it would count as a success (the raw client: protocol)."""

from __future__ import annotations

import re
from typing import Any, Iterator

import httpx2

__all__ = ["DoneWatch"]

_DONE = re.compile(rb"(?m)^data: ?\[DONE\]")
_DONE_OVERLAP = 16
"""Bytes of the previous read searched again, for a marker split between two reads."""


class DoneWatch(httpx2.BaseTransport):
    """Wraps the SDK's transport; ``done_seen`` says whether the last response's body held ``data: [DONE]``."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self._inner = inner
        self.done_seen = False

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.done_seen = False
        response = self._inner.handle_request(request)
        response.stream = WatchedStream(response.stream, self)
        return response

    def close(self) -> None:
        self._inner.close()


class WatchedStream(httpx2.SyncByteStream):
    """A response body, passed on unchanged and searched for the marker."""

    def __init__(self, stream: Any, watch: DoneWatch) -> None:
        self._stream = stream
        self._watch = watch

    def __iter__(self) -> Iterator[bytes]:
        tail = b""
        for data in self._stream:
            if not self._watch.done_seen:
                # Copy and search only reads that hold the marker, or whose start completes one.
                if (b"[DONE]" in data or b"[DONE]" in tail + data[:_DONE_OVERLAP]) and _DONE.search(tail + data):
                    self._watch.done_seen = True
                tail = data[-_DONE_OVERLAP:]
            yield data

    def close(self) -> None:
        self._stream.close()
