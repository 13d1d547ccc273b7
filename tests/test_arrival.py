"""Arrival stamps: the kernel clock mapped onto the monotonic one, and one stamp per event read late."""

import json
import socket
import struct
import sys
import time

import pytest

from factories import make_record
from llmload.client.arrival import (KernelArrivalReader, ReadArrivalReader, RealtimeToMonotonic, arrival_reader,
                                    event_ends)
from llmload.client.readstats import ReadStats
from llmload.client.sse import ChunkedDecoder, SSEDecoder
from llmload.results.histogram import LogHistogram
from llmload.results.records import read_records

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")


class ScriptedClock:
    """Monotonic readings taken from a script; the realtime clock reads monotonic + ``offset_s`` + a step."""

    def __init__(self, monotonic_readings, offset_s):
        self.readings = iter(monotonic_readings)
        self.now_s = 0.0
        self.offset_s = offset_s

    def monotonic(self):
        self.now_s = next(self.readings)
        return self.now_s

    def realtime(self):
        return self.now_s + self.offset_s


@pytest.mark.pure
def test_mapping_keeps_the_narrowest_bracket_and_follows_a_wall_clock_step():
    # Three brackets of width 2 ms, 0.1 ms and 1 ms; the realtime reading is taken at the bracket's start.
    clock = ScriptedClock([10.0, 10.002, 10.003, 10.0031, 10.004, 10.005], offset_s=1000.0)
    mapping = RealtimeToMonotonic(clock.realtime, clock.monotonic, refresh_s=1.0, samples=3)
    # The narrowest bracket (10.003..10.0031, read at 10.003) puts the offset 50 µs off, not 1 ms.
    assert mapping.offset_s(10.0) == pytest.approx(1000.0 - 0.00005)
    assert mapping.to_monotonic(1010.5, now_monotonic_s=10.6) == pytest.approx(10.50005)
    # Never later than the moment the bytes were read.
    assert mapping.to_monotonic(1010.7, now_monotonic_s=10.6) == 10.6

    clock.readings = iter([12.0, 12.0, 12.0, 12.0, 12.0, 12.0])
    clock.offset_s = 1005.0  # the wall clock was stepped 5 s forward
    assert mapping.offset_s(10.9) == pytest.approx(1000.0 - 0.00005)  # within refresh_s: not measured again
    assert mapping.offset_s(12.0) == pytest.approx(1005.0)
    assert mapping.to_monotonic(1016.0, now_monotonic_s=12.0) == pytest.approx(11.0)


@pytest.mark.pure
def test_event_ends_include_the_chunk_crlf():
    data = b"1a\r\ndata: {}\n\n\r\n5\r\ndata:\n\n\r\n5\r\ndata"
    assert event_ends(data) == [len(b"1a\r\ndata: {}\n\n\r\n"), len(data) - len(b"5\r\ndata")]
    assert event_ends(b"HTTP/1.1 200 OK\r\nx: y\r\n\r\n") == []


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(n: int) -> bytes:
    return _chunk(b"data: " + json.dumps({"n": n}).encode() + b"\n\n")


def _late_pair(gap_s: float, events: int):
    """A connected loopback pair; the server sends ``events`` events ``gap_s`` apart, then the client reads."""
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    conn, _ = server.accept()
    server.close()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client, conn


def _send_spaced(conn, gap_s, events, sent_s):
    for n in range(events):
        if n:
            time.sleep(gap_s)
        sent_s.append(time.monotonic())
        conn.sendall(_event(n))


def _decode(pieces):
    """(event number, arrival stamp) of every complete event in ``pieces``."""
    decoder, sse = ChunkedDecoder(), SSEDecoder()
    return [(json.loads(e)["n"], arrived_s) for data, arrived_s in pieces for e in sse.feed(decoder.feed(data))]


@pytest.mark.integration
@linux_only
def test_events_waiting_in_one_read_each_keep_their_own_kernel_stamp():
    stats = ReadStats()
    client, conn = _late_pair(0.04, 3)
    reader = arrival_reader(client, stats, RealtimeToMonotonic())
    assert isinstance(reader, KernelArrivalReader)
    time.sleep(0.05)  # Linux turns stamping on a moment after the first socket asks
    sent_s: list[float] = []
    _send_spaced(conn, 0.04, 3, sent_s)
    time.sleep(0.05)  # the client reads late: all three events wait in the socket
    read_start_s = time.monotonic()
    events = _decode(reader.read())
    assert [n for n, _ in events] == [0, 1, 2]
    stamps = [arrived_s for _, arrived_s in events]
    # Each stamp lies between its own send and the next one, unless the kernel merged its segment into
    # the next (then it carries the later stamp, and the merge is counted); never near the late read.
    shared = 0
    for n, stamp_s in enumerate(stamps):
        assert sent_s[n] - 0.001 <= stamp_s < read_start_s - 0.03
        if n + 1 < 3 and stamp_s > sent_s[n + 1]:
            assert stamp_s == stamps[n + 1]
            shared += 1
    assert stats.shared_stamps == shared
    assert reader.stamps == "kernel"
    assert stats.wakeups == 1 and stats.events == 3 and stats.max_events_per_wakeup == 3
    assert stats.lag.count == 3 and stats.lag.max_s >= read_start_s - stamps[0]
    client.close()
    conn.close()


@pytest.mark.integration
def test_user_space_stamps_give_every_waiting_event_the_read_time():
    stats = ReadStats()
    client, conn = _late_pair(0.02, 3)
    reader = ReadArrivalReader(client, stats)
    sent_s: list[float] = []
    _send_spaced(conn, 0.02, 3, sent_s)
    time.sleep(0.03)
    events = _decode(reader.read())
    assert [n for n, _ in events] == [0, 1, 2]
    assert len({arrived_s for _, arrived_s in events}) == 1 and events[0][1] > sent_s[2]
    assert reader.stamps == "user" and stats.lag.count == 0 and stats.max_events_per_wakeup == 3
    client.close()
    conn.close()


@pytest.mark.integration
def test_end_of_stream_is_one_empty_piece():
    client, conn = _late_pair(0, 0)
    reader = arrival_reader(client, ReadStats(), RealtimeToMonotonic())
    conn.sendall(_event(7))
    conn.close()
    time.sleep(0.01)
    pieces = reader.read()
    assert _decode(pieces) == [(7, pieces[0][1])]
    assert reader.read()[0][0] == b""
    client.close()


@pytest.mark.pure
def test_histogram_quantiles_are_within_its_bucket_width_and_merge():
    values_s = [i * 1e-5 for i in range(1, 10_001)]  # 10 µs .. 100 ms
    first, second = LogHistogram(), LogHistogram()
    for i, v in enumerate(values_s):
        (first if i % 2 else second).add(v)
    first.merge(LogHistogram.from_dict(json.loads(json.dumps(second.to_dict()))))
    assert first.count == 10_000 and first.max_s == pytest.approx(0.1)
    for q, exact_s in ((0.5, 0.05), (0.99, 0.099)):
        assert abs(first.quantile_s(q) - exact_s) / exact_s < 0.025
    assert first.quantile_s(1.0) == first.max_s
    assert LogHistogram().quantile_s(0.5) is None


@pytest.mark.pure
def test_records_written_before_the_field_read_as_user_stamps(tmp_path):
    record = make_record(start_unix_s=1.0, start_monotonic_s=2.0, e2e_s=0.5, ttft_s=0.1, ttfvt_s=0.2, tpot_s=0.01)
    line = json.loads(record.to_json_line())
    del line["arrival_stamps"]
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(line) + "\n")
    assert [r.arrival_stamps for r in read_records(path)] == ["user"]


@pytest.mark.integration
@linux_only
def test_each_record_says_which_stamps_it_used(sim_fixed):
    from llmload.client.measure import measure_request
    from llmload.client.raw import RawChatClient

    body = {"model": "openai/gpt-oss-20b", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "max_tokens": 5}
    stamps = {}
    for kernel in (True, False):
        client = RawChatClient(sim_fixed, kernel_stamps=kernel, read_stats=ReadStats())
        # The second: Linux starts stamping a moment after the first socket asks (see _keep_kernel_stamping).
        records = [measure_request(client, body, "p", lambda r: None) for _ in range(2)]
        client.close()
        assert all(r.ok and 0.09 < r.ttft_s < 1.0 for r in records)
        assert records[0].arrival_stamps in (("kernel", "mixed") if kernel else ("user",))
        stamps[kernel] = records[1].arrival_stamps
    assert stamps == {True: "kernel", False: "user"}


class MergedStampSocket:
    """A socket whose queued bytes all carry one kernel stamp, as when Linux merged the waiting segments."""

    def __init__(self):
        self.queue = b""
        self.peeks = 0
        self.stamp = [(socket.SOL_SOCKET, 35, struct.pack("qq", int(time.time()), 0))]

    def recvmsg(self, size, ancillary_size, flags=0):
        data = self.queue[:size]
        if flags & socket.MSG_PEEK:
            self.peeks += 1
            return data, [], 0, None
        self.queue = self.queue[len(data):]
        return data, self.stamp, 0, None


@pytest.mark.pure
def test_splitting_backs_off_while_the_kernel_keeps_merging_the_waiting_segments():
    sock, stats = MergedStampSocket(), ReadStats()
    reader = KernelArrivalReader(sock, stats, RealtimeToMonotonic())
    peeks = []
    for _ in range(8):  # every wake-up finds two events waiting, merged into one segment
        sock.queue = _event(1) + _event(2)
        before = sock.peeks
        assert [n for n, _ in _decode(reader.read())] == [1, 2]
        peeks.append(sock.peeks - before)
    # A futile split, whole reads while backing off (2) and one that finds several waiting again, a split...
    assert peeks == [1, 0, 0, 0, 1, 0, 0, 0]
    assert stats.shared_stamps == 8 and stats.events == 16 and stats.wakeups == 8
