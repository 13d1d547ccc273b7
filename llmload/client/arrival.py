"""When each piece of a response arrived: the kernel's receive stamp where there is one, else the read's.

On Linux a plain TCP socket with ``SO_TIMESTAMPNS`` set returns, with every ``recvmsg``, the kernel's
arrival time (CLOCK_REALTIME) of the last segment the read consumed; the process may read it much
later. ``KernelArrivalReader`` maps that stamp onto ``time.monotonic`` (the clock of request starts).
When several SSE events wait it peeks, then reads up to each event's end, so each event keeps the
stamp of the segment that completed it. Limit: Linux merges a segment into the unread one before it
(tcp_try_coalesce) and keeps the newer stamp, so events that waited together may share the stamp
of the last; ``ReadStats.shared_stamps`` counts events whose stamp a later event repeats (an upper
bound: events the server wrote together share a segment, and rightly its stamp). TLS and other systems use ``ReadArrivalReader``.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
import time
from typing import Callable

from llmload.client.readstats import ReadStats

__all__ = ["ArrivalReader", "KernelArrivalReader", "ReadArrivalReader", "RealtimeToMonotonic", "arrival_reader",
           "event_ends", "READ_SIZE"]

READ_SIZE = 65536
# Not exported by Python's socket module; 35 on every Linux architecture (SCM_TIMESTAMPNS has the same value).
SO_TIMESTAMPNS = 35 if sys.platform.startswith("linux") else None
_TIMESPEC = struct.Struct("qq")
_ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0


class RealtimeToMonotonic:
    """Maps CLOCK_REALTIME seconds onto CLOCK_MONOTONIC seconds.

    The two clocks run at the same rate (NTP slews both); only a step of the wall clock moves their
    offset, so it is measured again every ``refresh_s``. Each measurement brackets a realtime reading
    between two monotonic ones and keeps the narrowest of ``samples`` brackets.
    """

    def __init__(self, realtime: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 refresh_s: float = 1.0, samples: int = 3) -> None:
        self._realtime = realtime
        self._monotonic = monotonic
        self._refresh_s = refresh_s
        self._samples = samples
        self._offset_s = 0.0
        self._next_refresh_s = float("-inf")

    def offset_s(self, now_monotonic_s: float) -> float:
        """Realtime minus monotonic, measured again when ``refresh_s`` has passed since the last time."""
        if now_monotonic_s >= self._next_refresh_s:
            best_width_s = float("inf")
            for _ in range(self._samples):
                before_s = self._monotonic()
                real_s = self._realtime()
                after_s = self._monotonic()
                if after_s - before_s < best_width_s:
                    best_width_s = after_s - before_s
                    self._offset_s = real_s - (before_s + after_s) / 2
            self._next_refresh_s = now_monotonic_s + self._refresh_s
        return self._offset_s

    def to_monotonic(self, realtime_s: float, now_monotonic_s: float) -> float:
        """``realtime_s`` on the monotonic clock, never later than ``now_monotonic_s`` (when it was read)."""
        return min(realtime_s - self.offset_s(now_monotonic_s), now_monotonic_s)


def event_ends(data: bytes) -> list[int]:
    """Offsets just past each SSE event's blank line in raw response bytes (and a chunk's CRLF after it)."""
    ends = []
    pos = data.find(b"\n\n")
    while pos >= 0:
        end = pos + 2
        if data.startswith(b"\r\n", end):
            end += 2
        ends.append(end)
        pos = data.find(b"\n\n", end)
    return ends


class ReadArrivalReader:
    """User-space stamps: each read is stamped with ``time.monotonic()`` the moment it returns.

    On a non-blocking socket a read that finds nothing returns no piece; on TLS it also takes the
    bytes OpenSSL decrypted ahead, which no readiness event would announce.
    """

    stamps = "user"

    def __init__(self, sock: socket.socket, stats: ReadStats, clock: Callable[[], float] = time.monotonic) -> None:
        self._recv = sock.recv
        self._pending = getattr(sock, "pending", None)
        self._stats = stats
        self._clock = clock  # a test's scripted clock makes every duration exact

    def start_request(self) -> None:
        """Nothing to reset: every read is stamped in user space."""

    def read(self) -> list[tuple[bytes, float]]:
        """The bytes of one read (empty at the end of the stream) with their arrival time; none if nothing waited."""
        try:
            data = self._recv(READ_SIZE)
            while data and self._pending is not None and self._pending():
                data += self._recv(READ_SIZE)
        except (BlockingIOError, ssl.SSLWantReadError):
            return []
        arrived_s = self._clock()
        self._stats.on_wakeup(data.count(b"\n\n"))
        return [(data, arrived_s)]


class KernelArrivalReader:
    """Kernel stamps (``SO_TIMESTAMPNS``), one per SSE event where the kernel kept one.

    A read returns the stamp of the last segment it consumed. While the client keeps up, one read
    takes what is queued (one event). Once a read found several events waiting, the next one peeks
    first and reads up to each event's end, so each keeps its own segment's stamp. Splitting costs a
    syscall per event just when the client is behind, and buys nothing when the kernel had merged
    the waiting segments: then it is tried again only after 2, 4, ... 64 multi-event reads.
    ``stamps`` turns "mixed" if a read of the current request came without a stamp.
    """

    def __init__(self, sock: socket.socket, stats: ReadStats, clock: RealtimeToMonotonic) -> None:
        self._recvmsg = sock.recvmsg
        self._stats = stats
        self._clock = clock
        self._split = True  # until a read shows the client keeping up
        self._skip_splits = 0  # multi-event reads left before splitting is tried again
        self._backoff = 1
        self.stamps = "kernel"

    def start_request(self) -> None:
        """A new request on the kept-alive connection: its record says which stamps it got, not the connection's."""
        self.stamps = "kernel"

    def _arrival_s(self, ancillary: list[tuple[int, int, bytes]], read_s: float) -> float:
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) == _TIMESPEC.size:
                seconds, nanoseconds = _TIMESPEC.unpack(payload)
                arrived_s = self._clock.to_monotonic(seconds + nanoseconds * 1e-9, read_s)
                self._stats.on_lag(read_s - arrived_s)
                return arrived_s
        self.stamps = "mixed"
        return read_s

    def read(self) -> list[tuple[bytes, float]]:
        """The next pieces of the stream (one empty piece at its end), each with its arrival time; none if nothing waited."""
        if self._split:
            return self._read_split()
        try:
            data, ancillary, _, _ = self._recvmsg(READ_SIZE, _ANCILLARY_SIZE)
        except BlockingIOError:
            return []
        read_s = time.monotonic()
        if not data:
            return [(data, read_s)]
        events = data.count(b"\n\n")
        self._stats.on_wakeup(events)
        if events > 1:
            self._stats.shared_stamps += events - 1
            self._split = not self._skip_splits
            self._skip_splits = max(0, self._skip_splits - 1)
        return [(data, self._arrival_s(ancillary, read_s))]

    def _read_split(self) -> list[tuple[bytes, float]]:
        recvmsg = self._recvmsg
        try:
            queued = recvmsg(READ_SIZE, 0, socket.MSG_PEEK)[0]
        except BlockingIOError:
            return []
        if not queued:
            return [(b"", time.monotonic())]
        ends = event_ends(queued)
        events = len(ends)
        self._stats.on_wakeup(events)
        if not ends or ends[-1] < len(queued):
            ends.append(len(queued))  # the start of an event still arriving: read it, or the socket stays readable
        pieces = []
        stamps = []
        start = 0
        for i, end in enumerate(ends):
            data, ancillary, _, _ = recvmsg(end - start, _ANCILLARY_SIZE)
            read_s = time.monotonic()
            if not data:
                pieces.append((data, read_s))
                break
            pieces.append((data, self._arrival_s(ancillary, read_s)))
            if i < events:
                stamps.append(ancillary)
            start += len(data)
        distinct = len({bytes(a[0][2]) if a else b"" for a in stamps})
        self._stats.shared_stamps += len(stamps) - distinct
        useful = distinct * 2 > events
        self._split = events > 1 and useful
        if events > 1:
            self._backoff = 1 if useful else min(64, self._backoff * 2)
            self._skip_splits = 0 if useful else self._backoff
        return pieces


ArrivalReader = KernelArrivalReader | ReadArrivalReader


_stamps_kept_on: list[socket.socket] = []


def _keep_kernel_stamping() -> None:
    """Hold one idle stamping socket for the process's life.

    Linux stamps received packets only while some socket asks for it, and turns that on and off a
    moment late (a deferred static key): without a socket that stays, a run's first reads, and those
    after every moment with no connection open, would come without stamps.
    """
    if not _stamps_kept_on:
        keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        _stamps_kept_on.append(keeper)


def arrival_reader(sock: socket.socket, stats: ReadStats, clock: RealtimeToMonotonic) -> ArrivalReader:
    """A kernel-stamping reader where the socket can stamp (plain TCP on Linux), else a user-space one."""
    if SO_TIMESTAMPNS is None or isinstance(sock, ssl.SSLSocket) or not _ANCILLARY_SIZE:
        return ReadArrivalReader(sock, stats)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        _keep_kernel_stamping()
    except OSError:
        return ReadArrivalReader(sock, stats)
    return KernelArrivalReader(sock, stats, clock)
