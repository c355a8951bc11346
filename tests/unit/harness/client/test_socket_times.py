"""Chunk times from the socket read: the splitting rule, and the hook's presence in this aiohttp version."""

import asyncio
import collections

from speculab.harness.client.request import make_session
from speculab.harness.client.socket_times import ReadTimes, StampingResponseHandler, read_stamping_active


def times(stamps, pieces, now=99.0):
    rt = ReadTimes(collections.deque(stamps) if stamps is not None else None)
    return [rt.split(p, now) for p in pieces]


def test_a_piece_spanning_two_reads_is_split_at_the_read_boundary():
    # reads delivered body bytes 0-4 at t=1 and 5-9 at t=2; the coroutine read all 10 at once
    assert times([(5, 1.0), (10, 2.0)], [b"aaaaabbbbb"]) == [[(b"aaaaa", 1.0), (b"bbbbb", 2.0)]]


def test_reads_split_across_pieces_keep_their_times():
    got = times([(4, 1.0), (10, 2.0)], [b"abc", b"defghij"])
    assert got == [[(b"abc", 1.0)], [(b"d", 1.0), (b"efghij", 2.0)]]


def test_bytes_no_read_stamped_get_the_read_loop_time():
    assert times([(3, 1.0)], [b"abcdef"]) == [[(b"abc", 1.0), (b"def", 99.0)]]
    assert times(None, [b"abc"]) == [[(b"abc", 99.0)]]
    assert times([], [b"abc"]) == [[(b"abc", 99.0)]]


def test_every_byte_is_handed_out_once_in_order():
    stamps = [(2, 1.0), (3, 2.0), (7, 3.0), (8, 4.0)]
    pieces = [b"a", b"bcd", b"ef", b"gh"]
    got = times(stamps, pieces)
    assert b"".join(part for parts in got for part, _ in parts) == b"abcdefgh"
    flat = [t for parts in got for _, t in parts]
    assert flat == sorted(flat) and flat == [1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 4.0]


async def test_the_session_stamps_socket_reads_in_this_aiohttp_version():
    # if an aiohttp upgrade removes the hook, timing silently falls back to the read loop: fail here instead
    async with make_session() as session:
        assert read_stamping_active(session)


class FakeTransport(asyncio.Transport):
    def get_extra_info(self, name, default=None):
        return default

    def is_closing(self):
        return False


async def test_each_socket_read_is_stamped_with_the_body_bytes_it_completed():
    """aiohttp's own parser fed by hand: reads at t=1, 2, 3 (headers with no body, then two body reads)."""
    now = [0.0]
    h = StampingResponseHandler(loop=asyncio.get_running_loop(), clock=lambda: now[0])
    h.connection_made(FakeTransport())
    h.set_response_params()
    for t, data in ((1.0, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), (2.0, b"5\r\nhello\r\n")):
        now[0] = t
        h.data_received(data)
    now[0] = 3.0
    h.data_received(b"6\r\n world\r\n")
    (_message, payload), _ = h._buffer[0]  # the response aiohttp queued for its reader
    assert list(h.stamps_for(payload)) == [(5, 2.0), (11, 3.0)]
    rt = ReadTimes(h.stamps_for(payload))
    assert rt.split(b"hello world", 9.0) == [(b"hello", 2.0), (b" world", 3.0)]


async def test_a_body_that_arrived_whole_before_reading_keeps_its_socket_read_time():
    """aiohttp releases the connection once the whole body is in: the stamps must still be found (the response's
    own protocol), or a short stream read late would be timed by the read loop."""
    import time

    from fakes.scripted_openai import FakeServer, Write, serve

    body = b'data: {"choices": [{"index": 0, "text": "hi", "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
    async with (
        serve(FakeServer(lambda _: [Write(body)])) as url,
        make_session() as session,
        session.post(f"{url}/v1/completions", data=b"{}") as resp,
    ):
        await asyncio.sleep(0.05)  # the reader is late: the body is in and the connection released
        assert resp.connection is None
        reads = ReadTimes.of(resp, time.perf_counter)
        assert reads.active
        piece = await resp.content.read()
        parts = reads.split(piece, time.perf_counter())
        assert b"".join(p for p, _ in parts) == body
        assert all(time.perf_counter() - t >= 0.04 for _, t in parts)  # the read's time, not now
