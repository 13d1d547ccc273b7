#!/usr/bin/env python3
"""Does Linux keep one receive stamp per TCP segment once segments wait unread? (No: it merges them.)

Over loopback, a sender writes ``--segments`` small messages ``--gap-ms`` apart (TCP_NODELAY: one
segment each). The receiver (SO_TIMESTAMPNS) either reads each message as it comes ("prompt") or
sleeps until all were sent, then reads them one message at a time with exact-length ``recvmsg``
calls ("late"). It prints, per mode, how many distinct kernel stamps the messages got and the
growth of the kernel's TCPRcvCoalesce counter (/proc/net/netstat), which tcp_try_coalesce
increments each time it merges a segment into the unread one before it.

    python bench/stamp_coalesce_check.py [--segments 20] [--gap-ms 2]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llmload.client.arrival import SO_TIMESTAMPNS  # noqa: E402

MESSAGE = b"data: {\"token\": 1}\n\n"
_TIMESPEC = struct.Struct("qq")


def rcv_coalesce_count() -> int:
    """The kernel's TcpExt TCPRcvCoalesce counter (all sockets of the network namespace)."""
    names, values = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines()[:2]]
    return int(values[names.index("TCPRcvCoalesce")])


def _stamp_s(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = _TIMESPEC.unpack(payload)
            return seconds + nanoseconds * 1e-9
    return None


def run(mode: str, segments: int, gap_s: float) -> tuple[list[float], list[float | None], int]:
    """(send times, kernel stamps of each message as read, TCPRcvCoalesce growth) for one mode."""
    listener = socket.create_server(("127.0.0.1", 0))
    receiver = socket.create_connection(listener.getsockname())
    sender, _ = listener.accept()
    sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    receiver.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sent_s: list[float] = []
    all_sent = threading.Event()

    def send() -> None:
        for _ in range(segments):
            sent_s.append(time.time())
            sender.sendall(MESSAGE)
            time.sleep(gap_s)
        all_sent.set()

    before = rcv_coalesce_count()
    thread = threading.Thread(target=send)
    thread.start()
    if mode == "late":
        all_sent.wait()
    stamps = []
    for _ in range(segments):
        data, ancillary, _, _ = receiver.recvmsg(len(MESSAGE), socket.CMSG_SPACE(_TIMESPEC.size))
        assert data == MESSAGE, data
        stamps.append(_stamp_s(ancillary))
    thread.join()
    grown = rcv_coalesce_count() - before
    for s in (sender, receiver, listener):
        s.close()
    return sent_s, stamps, grown


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--segments", type=int, default=20)
    p.add_argument("--gap-ms", type=float, default=2.0)
    args = p.parse_args()
    if SO_TIMESTAMPNS is None:
        print("SO_TIMESTAMPNS: Linux only", file=sys.stderr)
        return 2
    for mode in ("prompt", "late"):
        sent_s, stamps, grown = run(mode, args.segments, args.gap_ms / 1e3)
        errors_ms = [(stamp - sent) * 1e3 for stamp, sent in zip(stamps, sent_s) if stamp is not None]
        print(f"{mode:6}: {len(set(stamps))} distinct stamps for {args.segments} messages; "
              f"stamp - send time min {min(errors_ms):.3f} ms, max {max(errors_ms):.3f} ms; "
              f"TCPRcvCoalesce +{grown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
