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
    conn.setblocking(False)
    yield client, conn
    for s in (client, conn, srv):
        s.close()


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
        t = stamps.arrival_ns(conn.fileno())
        assert t is not None and before <= t <= after  # stamped as it came in, before the poll returned
        assert stamps.age_s(conn.fileno()) >= 0
        assert conn.recv(100) == b"hello"  # the peek left every byte for the reader
        stamps.select(0)  # a later poll that finds nothing: no stale stamp
        assert stamps.arrival_ns(conn.fileno()) is None and stamps.age_s(conn.fileno()) == 0.0
    finally:
        stamps.close()
    client.sendall(b"x")  # closing the selector detached its peekers: the descriptor is still the transport's
    assert conn.fileno() >= 0 and conn.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_STREAM


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
        assert stamps.arrival_ns(conn.fileno()) is None
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
