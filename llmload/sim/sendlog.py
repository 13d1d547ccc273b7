"""Buffered JSON-lines log of per-token send times (ground truth for client timing error): one line per streamed
request, ``{"request_id", "sent_s": [monotonic seconds per token chunk], "cached_tokens": prompt tokens its
admission found in the prefix cache}``."""

from __future__ import annotations

import asyncio
from typing import BinaryIO

import orjson

FLUSH_INTERVAL_S = 1.0


class SendLog:
    """Collects one line per streamed request; writes at most once a second and at close."""

    def __init__(self, path: str) -> None:
        self._file: BinaryIO = open(path, "ab")  # opened up front so a bad path fails at startup
        self._lines: list[bytes] = []
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Begin periodic flushing on the running loop."""
        self._timer = asyncio.get_running_loop().call_later(FLUSH_INTERVAL_S, self._tick)

    def add(self, request_id: str, sent_s: list[float], cached_tokens: int) -> None:
        """Queue the line for one finished (or aborted) stream; never touches the disk."""
        self._lines.append(orjson.dumps({"request_id": request_id, "sent_s": sent_s, "cached_tokens": cached_tokens})
                           + b"\n")

    def _tick(self) -> None:
        """Periodic flush, then re-arm."""
        self.flush()
        self._timer = asyncio.get_running_loop().call_later(FLUSH_INTERVAL_S, self._tick)

    def flush(self) -> None:
        """Write buffered lines to disk."""
        if self._lines:
            lines, self._lines = self._lines, []
            self._file.write(b"".join(lines))
            self._file.flush()

    def close(self) -> None:
        """Final flush and close."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._file.closed:
            self.flush()
            self._file.close()
