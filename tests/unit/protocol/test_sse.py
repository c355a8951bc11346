import random

import pytest

from speculab.protocol.sse import SSEDecoder, SSEEvent, decode_all


def rechunk(payload: bytes, rng: random.Random) -> list[bytes]:
    """Split payload at random points, including zero-length pieces and single bytes."""
    out, i = [], 0
    while i < len(payload):
        n = rng.choice([0, 1, 1, 2, 3, 7, 50])
        out.append(payload[i : i + n])
        i += n
    return out


def feed_all(pieces: list[bytes]) -> list[SSEEvent]:
    dec = SSEDecoder()
    events = []
    for p in pieces:
        events.extend(dec.feed(p))
    return events


STREAM = (
    ": keep-alive\n\n"
    'data: {"choices":[{"text":"héllo ✓"}]}\n\n'
    "event: error\ndata: line one\ndata: line two\n\n"
    "data:no-space\r\n\r\n"
    "id: 7\ndata:  two spaces\n\n"
    'data: {"x": 1}\r\r'
    "data: [DONE]\n\n"
).encode()

EXPECTED = [
    SSEEvent('{"choices":[{"text":"héllo ✓"}]}'),
    SSEEvent("line one\nline two", event="error"),
    SSEEvent("no-space"),
    SSEEvent(" two spaces", id="7"),
    SSEEvent('{"x": 1}', id="7"),  # the last event id persists, as the spec says
    SSEEvent("[DONE]", id="7"),
]


def test_whole_stream():
    assert decode_all(STREAM) == EXPECTED
    assert EXPECTED[-1].is_done and not EXPECTED[0].is_done


@pytest.mark.parametrize("seed", range(200))
def test_random_rechunking_gives_same_events(seed):
    rng = random.Random(seed)
    assert feed_all(rechunk(STREAM, rng)) == EXPECTED


def test_crlf_split_across_chunks_is_one_line_ending():
    # "\r" ends one chunk, "\n" starts the next: must not produce an extra blank line (which would dispatch early)
    evs = feed_all([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"])
    assert evs == [SSEEvent("a\nb")]


def test_byte_at_a_time_utf8():
    payload = "data: 日本語 ✓ émoji 🎉\n\n".encode()
    assert feed_all([payload[i : i + 1] for i in range(len(payload))]) == [SSEEvent("日本語 ✓ émoji 🎉")]


def test_pending_detects_cut_stream():
    dec = SSEDecoder()
    assert dec.feed(b'data: {"a": 1}\n\ndata: {"b"') == [SSEEvent('{"a": 1}')]
    assert dec.pending
    dec2 = SSEDecoder()
    dec2.feed(b"data: x\n\n")
    assert not dec2.pending
    dec3 = SSEDecoder()
    dec3.feed(b"data: x\n")  # field line seen, blank line missing
    assert dec3.pending


def test_comments_and_empty_events_are_not_dispatched():
    assert decode_all(b": ping\n\n: ping\n\nevent: x\n\n") == []


LF_ONLY = (
    b"".join(f'data: {{"i": {i}, "t": "\xc3\xa9"}}\n\n'.encode("latin-1") for i in range(50)) + b"data: [DONE]\n\n"
)


@pytest.mark.parametrize("seed", range(50))
def test_random_rechunking_lf_only_fast_path(seed):
    whole = decode_all(LF_ONLY)
    assert len(whole) == 51 and whole[0].data == '{"i": 0, "t": "é"}'
    assert feed_all(rechunk(LF_ONLY, random.Random(seed))) == whole


def test_an_endless_line_stops_at_the_cap_instead_of_growing():
    """Issue 25: a stream of one endless line grew the client to ~300 MB before the timeout."""
    from speculab.protocol.sse import LineTooLong

    dec = SSEDecoder(max_line_bytes=1000)
    assert dec.feed(b"data: " + b"x" * 900) == []
    with pytest.raises(LineTooLong, match="line over"):
        dec.feed(b"x" * 200)


def test_data_lines_without_the_blank_line_stop_at_the_cap():
    from speculab.protocol.sse import LineTooLong

    dec = SSEDecoder(max_line_bytes=1000)
    with pytest.raises(LineTooLong, match="one event's data"):
        for _ in range(100):
            dec.feed(b"data: " + b"y" * 50 + b"\n")


def test_lines_under_the_cap_pass_and_the_cap_is_per_event():
    dec = SSEDecoder(max_line_bytes=1000)
    for _ in range(50):  # 50 events of 600 bytes: far more than the cap in all, each under it
        (ev,) = dec.feed(b"data: " + b"z" * 600 + b"\n\n")
        assert len(ev.data) == 600
