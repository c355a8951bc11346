"""The kernel's receive stamps as the event loop's selector reads them (serving/receive_stamps.py): what a stamp is
bounded by, how long it lives, and that the transport's descriptor is never closed by it."""

from __future__ import annotations

import selectors
import socket
import struct
import sys
import time

import pytest

from speculab.serving.receive_stamps import SO_TIMESTAMPNS, ReceiveStamps, receive_stamps_of, stamp_of, stamping_loop

linux = pytest.mark.skipif(sys.platform != "linux", reason="SO_TIMESTAMPNS is Linux's")


def test_stamp_of_reads_the_timespec_and_ignores_other_messages():
    ts = struct.pack("qq", 1_700_000_000, 123)
    assert stamp_of([(socket.SOL_SOCKET, SO_TIMESTAMPNS, ts)]) == 1_700_000_000_000_000_123
    assert stamp_of([(socket.SOL_SOCKET, SO_TIMESTAMPNS + 1, ts), (socket.IPPROTO_TCP, SO_TIMESTAMPNS, ts)]) is None
    assert stamp_of([]) is None


@pytest.fixture
def pair():
    srv = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(srv.getsockname())
    conn, _ = srv.accept()
    if sys.platform == "linux":
        _stamping_on(client, conn)
    conn.setblocking(False)
    yield client, conn
    for s in (client, conn, srv):
        s.close()


def _stamping_on(client: socket.socket, conn: socket.socket) -> None:
    """Linux turns receive stamping on for the whole host a little after the first socket asks (ReceiveStamps asks at
    once, for the same reason): in a fresh process the first packets may come unstamped, so wait until one is."""
    conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        client.sendall(b"?")
        _, anc, _, _ = conn.recvmsg(16, socket.CMSG_SPACE(16))
        if stamp_of(anc) is not None:
            return
        time.sleep(0.01)
    pytest.fail("the kernel stamped no packet within 5 s")


@linux
def test_a_readable_socket_gets_the_kernel_stamp_of_its_bytes_for_one_poll_only(pair):
    client, conn = pair
    stamps = ReceiveStamps()
    try:
        stamps.register(conn.fileno(), selectors.EVENT_READ)
        assert stamps.watch(conn)
        before = time.time_ns()
        client.sendall(b"hello")
        after = time.time_ns()
        while not stamps.select(1.0):
            pass
        assert conn.recv(100) == b"hello"  # the peek left every byte for the reader
        t = stamps.arrival_ns(conn.fileno(), 5)
        assert t is not None and before <= t <= after  # stamped as it came in, before the poll returned
        assert stamps.age_s(t, time.time_ns()) >= 0 and stamps.age_s(t, t - 5) == 0.0
        stamps.select(0)  # a later poll that finds nothing: no stale stamp
        assert stamps.arrival_ns(conn.fileno(), 5) is None and stamps.covered(conn.fileno(), 5) == (0, None)
    finally:
        stamps.close()
    client.sendall(b"x")  # closing the selector detached its peekers: the descriptor is still the transport's
    assert conn.fileno() >= 0 and conn.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_STREAM


@linux
def test_a_stamp_covers_the_bytes_its_poll_found_and_not_those_that_came_after(pair):
    """The transport reads later in the loop turn than the poll: bytes that came in between are in its read, and the
    poll's stamp (50 ms older here) is not theirs."""
    client, conn = pair
    stamps = ReceiveStamps()
    try:
        stamps.register(conn.fileno(), selectors.EVENT_READ)
        assert stamps.watch(conn)
        client.sendall(b"head")
        while not stamps.select(1.0):
            pass
        time.sleep(0.05)
        client.sendall(b"chunk")
        deadline = time.monotonic() + 5
        got = b""
        while len(got) < 9 and time.monotonic() < deadline:  # the transport's read, late in the turn
            try:
                got += conn.recv(100)
            except BlockingIOError:
                time.sleep(0.001)
        assert got == b"headchunk"
        n, t = stamps.covered(conn.fileno(), len(got))
        assert n == 4 and t is not None  # the poll's bytes only
        assert stamps.arrival_ns(conn.fileno(), 0) == t  # a re-parse of nothing: still this turn's stamp
        assert stamps.covered(conn.fileno(), 5) == (0, None)  # the poll's bytes were read already
        assert (stamps.asked, stamps.stamped, stamps.split) == (3, 1, 1)
    finally:
        stamps.close()
    stamps = ReceiveStamps()
    try:  # the whole read inside what the poll found: the stamp is the read's
        stamps.register(conn.fileno(), selectors.EVENT_READ)
        assert stamps.watch(conn)
        client.sendall(b"whole")
        while not stamps.select(1.0):
            pass
        assert conn.recv(100) == b"whole"
        assert stamps.arrival_ns(conn.fileno(), 5) is not None
    finally:
        stamps.close()


@linux
def test_unwatched_sockets_are_not_peeked(pair):
    client, conn = pair
    stamps = ReceiveStamps()
    try:
        stamps.register(conn.fileno(), selectors.EVENT_READ)
        assert stamps.watch(conn)
        stamps.unwatch(conn.fileno())
        client.sendall(b"hello")
        while not stamps.select(1.0):
            pass
        assert stamps.arrival_ns(conn.fileno(), 5) is None
        assert conn.recv(100) == b"hello"
    finally:
        stamps.close()


def test_a_stamping_loop_is_found_again_and_a_plain_one_is_not():
    import asyncio

    loop = stamping_loop()
    try:
        assert isinstance(receive_stamps_of(loop), ReceiveStamps)
    finally:
        loop.close()
    plain = asyncio.new_event_loop()
    try:
        assert receive_stamps_of(plain) is None
    finally:
        plain.close()
