"""Chunked and SSE decoding, fed in every possible split."""

import pytest

from llmload.client.sse import ChunkedDecoder, ProtocolError, SSEDecoder

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def feed_in_pieces(decoder, data: bytes, size: int):
    out = []
    for i in range(0, len(data), size):
        got = decoder.feed(data[i : i + size])
        out.append(got) if isinstance(got, bytes) else out.extend(got)
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_chunked_round_trip_at_any_split(size):
    pieces = [b"data: {}\n\n", "data: {\"c\":\"日本\"}\n\n".encode(), b"x" * 300]
    decoder = ChunkedDecoder()
    assert b"".join(feed_in_pieces(decoder, chunked(*pieces), size)) == b"".join(pieces)
    assert decoder.done


def test_chunked_ignores_extensions_and_stops_at_zero_chunk():
    decoder = ChunkedDecoder()
    assert decoder.feed(b"5;name=v\r\nhello\r\n0\r\n\r\nGARBAGE") == b"hello"
    assert decoder.done


def test_chunked_rejects_bad_size_and_missing_crlf():
    with pytest.raises(ProtocolError, match="bad chunk size"):
        ChunkedDecoder().feed(b"zz\r\nhello\r\n")
    with pytest.raises(ProtocolError, match="CRLF"):
        ChunkedDecoder().feed(b"5\r\nhelloXX")


STREAM = (
    b": keep-alive\n\n"
    b'data: {"a":1}\n\n'
    b"event: message\nid: 7\ndata: {\"b\":\n"
    b"data: 2}\n\n"
    b"retry: 100\n\n"
    b"data:nospace\n\n"
    + "data: {\"c\":\"é日\"}\n\n".encode()
    + b"data: [DONE]\n\n"
)
EXPECTED = [b'{"a":1}', b'{"b":\n2}', b"nospace", '{"c":"é日"}'.encode(), b"[DONE]"]


@pytest.mark.parametrize("size", [1, 2, 5, 13, 10_000])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_sse_events_at_any_split_and_line_ending(size, newline):
    data = STREAM.replace(b"\n", newline)
    assert feed_in_pieces(SSEDecoder(), data, size) == EXPECTED


def test_sse_keeps_incomplete_event_until_its_blank_line():
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a"') == []
    assert decoder.feed(b":1}\n") == []
    assert decoder.feed(b"\n") == [b'{"a":1}']


def test_sse_utf8_character_split_across_reads():
    event = 'data: {"content":"日"}\n\n'.encode()
    split = event.index("日".encode()) + 1  # inside the 3-byte character
    decoder = SSEDecoder()
    assert decoder.feed(event[:split]) == []
    assert decoder.feed(event[split:]) == ['{"content":"日"}'.encode()]


RESPONSES_STREAM = (  # the Responses API: an event line before each data line (vLLM 0.32, OpenAI)
    b'event: response.created\ndata: {"type":"response.created"}\n\n'
    b'event: response.output_text.delta\ndata: {"delta":"a"}\n\n'
    b"event: response.output_text.delta\nid: 3\ndata: {\"delta\":\n"
    b"data: \"b\"}\n\n"
    b"event: response.in_progress\n\n"
    b'event: response.completed\ndata: {"type":"response.completed"}\n\n'
)
RESPONSES_EXPECTED = [b'{"type":"response.created"}', b'{"delta":"a"}', b'{"delta":\n"b"}', b'{"type":"response.completed"}']


@pytest.mark.parametrize("size", [1, 2, 5, 13, 61, 10_000])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_sse_events_with_an_event_line_at_any_split(size, newline):
    data = RESPONSES_STREAM.replace(b"\n", newline)
    assert feed_in_pieces(SSEDecoder(), data, size) == RESPONSES_EXPECTED


def test_sse_one_whole_event_with_an_event_line_per_read():
    decoder = SSEDecoder()
    for block, payload in zip(RESPONSES_STREAM.split(b"\n\n")[:2], RESPONSES_EXPECTED):
        assert decoder.feed(block + b"\n\n") == [payload]
