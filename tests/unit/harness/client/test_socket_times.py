"""Chunk times from the socket read, send times from the socket write: the splitting rule, the hooks' presence in
this aiohttp version, and the kernel's stamps against the mock's truth."""

import asyncio
import collections
import sys
import time

import pytest

from speculab.harness.client.request import make_session
from speculab.harness.client.socket_times import (
    ReadTimes,
    StampingResponseHandler,
    chunk_time_source,
    read_stamping_active,
    sent_time,
)


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


async def test_bytes_that_came_after_the_poll_keep_the_reads_time_not_the_kernels_stamp():
    """The loop polled (the head and "hello" pending, stamped 50 ms ago) and read later in the turn, when " world"
    had come too: the stamp is the poll's bytes' only, or " world" would be timed 50 ms before it was there."""
    from speculab.serving.receive_stamps import ReceiveStamps

    head, first, late = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"5\r\nhello\r\n", b"6\r\n world\r\n"
    reads: list[str] = []  # which clock was read, in order

    def kernel_clock() -> int:
        reads.append("kernel")
        return 10_000_000_000

    def own_clock() -> float:
        reads.append("own")
        return 10.0

    stamps = ReceiveStamps(clock_ns=kernel_clock)
    try:
        h = StampingResponseHandler(loop=asyncio.get_running_loop(), clock=own_clock)
        h.connection_made(FakeTransport())
        h.set_response_params()
        h._arrivals, h._fd = stamps, 7  # as connection_made sets them on a watched socket
        stamps.arrived = {7: (9_950_000_000, len(head + first))}  # what the poll's peek found
        reads.clear()
        h.data_received(head + first + late)
        (_message, payload), _ = h._buffer[0]
        assert list(h.stamps_for(payload)) == [(5, 9.95), (11, 10.0)]
        # the kernel stamp's clock first: a pause between the two readings makes the time later, never earlier
        assert reads == ["kernel", "own"]
        assert (stamps.asked, stamps.stamped, stamps.split) == (1, 0, 1)
    finally:
        stamps.close()


async def test_a_body_that_arrived_whole_before_reading_keeps_its_socket_read_time():
    """aiohttp releases the connection once the whole body is in: the stamps must still be found (the response's
    own protocol), or a short stream read late would be timed by the read loop."""
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


class WritableTransport(FakeTransport):
    def __init__(self):
        super().__init__()
        self.written = []

    def write(self, data):
        self.written.append(bytes(data))

    def writelines(self, chunks):
        self.written.append(b"".join(chunks))


async def test_each_write_to_the_socket_is_stamped_as_it_begins():
    now = [1.0]
    h = StampingResponseHandler(loop=asyncio.get_running_loop(), clock=lambda: now[0])
    transport = WritableTransport()
    h.connection_made(transport)
    assert h.written_s is None
    now[0] = 2.0
    transport.write(b"POST / HTTP/1.1\r\n\r\n")
    assert h.written_s == 2.0 and transport.written == [b"POST / HTTP/1.1\r\n\r\n"]  # still written
    now[0] = 3.0
    transport.writelines([b"a", b"b"])
    assert h.written_s == 3.0 and transport.written[-1] == b"ab"


class FakeResponse:
    def __init__(self, protocol):
        self._protocol, self.connection = protocol, None


async def test_sent_time_is_the_latest_write_unless_it_cannot_be_this_requests():
    clock = time.perf_counter
    h = StampingResponseHandler(loop=asyncio.get_running_loop(), clock=clock)
    h.written_s = 5.0
    assert sent_time(FakeResponse(h), clock, 3.0) == 5.0  # written after the request function began
    assert sent_time(FakeResponse(h), clock, 6.0) == 6.0  # a write older than the request: another request's
    assert sent_time(FakeResponse(h), time.monotonic, 3.0) == 3.0  # stamped on another clock
    assert sent_time(FakeResponse(object()), clock, 3.0) == 3.0  # a connection that stamps nothing
    h.written_s = None
    assert sent_time(FakeResponse(h), clock, 3.0) == 3.0


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's receive stamps are Linux's")
def test_the_clients_ttft_lies_within_the_servers_truth_at_the_socket(tmp_path):
    """On a loop that reads the kernel's receive stamps, against the mock's truth log (same loop, CLOCK_REALTIME):
    the request went out no later than it arrived, and the first chunk came in no earlier than it was written. Order,
    not time: the kernel stamps each side's bytes between the sender's clock reading and the reader's. A request whose
    body came after the server's poll (aiohttp may write head and body apart) is timed at the server's read instead,
    and says so: later, never earlier."""
    from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
    from speculab.harness.client.request import request_func
    from speculab.harness.records import RequestSpec
    from speculab.mock.script import MockConfig
    from speculab.mock.server import running_mock_server
    from speculab.mock.truth_log import read_truth_log
    from speculab.serving.receive_stamps import run_stamping

    path = tmp_path / "truth.jsonl"
    cfg = MockConfig(ttft_s=0.01, gap_s=0.005, output_tokens=3, truth_log=str(path))
    clock = time.time

    async def main():
        async with running_mock_server(cfg) as url, make_session(clock=clock) as session:
            ep = EndpointConfig(base_url=url, model="speculab-mock")
            request = request_func(ep, RequestSampling(max_tokens=3), clock=clock)
            recs = [await request(session, RequestSpec(index=i, prompt=f"p{i}"), scheduled_s=clock()) for i in (0, 1)]
            return recs, chunk_time_source(session, clock)

    records, source = run_stamping(main())
    assert source == "kernel_receive"
    truth = {line["prompt"]: line for line in read_truth_log(path)}
    slack_ns = 1_000  # time.time()'s float: a quarter of a microsecond at today's epoch
    for r in records:
        line = truth[f"p{r.index}"]
        assert r.ok and line["received_by"] in ("kernel", "data_received")
        assert int(r.sent_s * 1e9) <= line["received_ns"] + slack_ns
        assert line["chunks_ns"][0] <= int(r.chunks[0].t_s * 1e9) + slack_ns
