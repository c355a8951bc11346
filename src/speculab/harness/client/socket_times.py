"""Chunk arrival times taken at the socket read, not when the reading coroutine next gets the event loop.

A streamed chunk reaches the harness in two steps: the event loop hands the socket's bytes to aiohttp's protocol
(`data_received`, which parses HTTP and appends the body bytes to the response's reader), and only in a later
loop turn does the coroutine iterating the response resume. Between the two, the loop runs every other callback
that is ready: with hundreds of streams, other streams' parsing. Stamping at resume time therefore adds a delay
that grows with load (0.3 ms median, over 1 ms at p99 at 128-512 streams on a 2-core VM, bench/README.md).

`stamping_session` installs a `ResponseHandler` subclass that reads the clock on entry to `data_received` and
records, per response body, (body bytes received so far, time). `ReadTimes` splits what the coroutine later reads
back into the parts that came in separate socket reads, each with its own time. The hook relies on two aiohttp
internals (the connector's protocol factory and the handler's current payload); when either is missing, nothing
is stamped and arrival times fall back to the read loop's clock, which `read_stamping_active` reports.

On entry to `data_received` is still a loop turn late when a poll finds many sockets readable at once (a burst's
first chunks: the k-th is parsed after the k-1 before it) or the loop was busy when the bytes came. Where the loop
polls with `serving.receive_stamps.ReceiveStamps` (`run_stamping`, which the commands offering load use), the time
is moved back to the kernel's receive stamp of the bytes read: when they reached this host. Of the bytes the poll
found, that is: bytes that came in between the poll and the read keep the read's time.

The same connections stamp the other end of a TTFT: the start of each write to the socket (`sent_time`). A request
function's own clock reading before `session.post` comes too early at a burst: between it and the write that puts
the request on the socket lie the connection's hand-out (or set-up), aiohttp building the request, and the queue of
every other request's task, since aiohttp writes the body from a task of its own (bench/README.md, "burst_ttft").
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Callable, Iterable

import aiohttp
from aiohttp.client_proto import ResponseHandler

from speculab.serving.receive_stamps import ReceiveStamps, receive_stamps_of

Clock = Callable[[], float]


class StampingResponseHandler(ResponseHandler):
    """aiohttp's response protocol, plus the time of every socket read that fed the current response body, and of
    the latest write that put a request on the socket."""

    def __init__(self, *args: object, clock: Clock, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.clock = clock
        self._stamped: object | None = None  # the body reader the stamps below belong to
        self.stamps: collections.deque[tuple[int, float]] = collections.deque()
        self.written_s: float | None = None  # when the latest write to the socket began (None: no write stamped)
        self._arrivals: ReceiveStamps | None = None  # the kernel's receive stamps, where the loop reads them
        self._fd = -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        _stamp_writes(transport, self)
        stamps, sock = receive_stamps_of(asyncio.get_running_loop()), transport.get_extra_info("socket")
        if stamps is not None and stamps.watch(sock):
            self._arrivals, self._fd = stamps, sock.fileno()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._arrivals is not None:
            self._arrivals.unwatch(self._fd)  # before the transport closes the descriptor, whose number is reused
            self._arrivals = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._arrivals is None or not data:
            self._received(data, self.clock())
            return
        # the kernel's stamp (before this turn's reads of other sockets) covers the bytes its poll found; bytes that
        # came after it are fed apart with this read's own time, as if a second read had brought them: aiohttp's
        # parser takes bytes cut anywhere
        n, stamp = self._arrivals.covered(self._fd, len(data))
        # the stamp's clock read before this one: a pause between the two readings (a busy machine takes the CPU
        # away) makes the time later, never earlier than the bytes came (the other order put a first chunk 1.5 ms
        # before the server wrote it)
        now_ns = self._arrivals.clock_ns()
        t = self.clock()
        if stamp is not None and n > 0:
            self._received(data[:n], t - self._arrivals.age_s(stamp, now_ns))
        if n < len(data):
            self._received(data[n:], t)

    def _received(self, data: bytes, t: float) -> None:
        before = getattr(self, "_payload", None)
        super().data_received(data)
        # a read that starts a response (headers and first body bytes together) sets `_payload`; a closing or
        # failing connection clears it: stamp whichever reader received these bytes
        for payload in (before, getattr(self, "_payload", None)):
            if payload is None:
                continue
            if payload is not self._stamped:
                self._stamped = payload
                self.stamps = collections.deque()
            total = getattr(payload, "total_bytes", None)
            if isinstance(total, int) and total > (self.stamps[-1][0] if self.stamps else 0):
                self.stamps.append((total, t))

    def stamps_for(self, payload: object) -> collections.deque[tuple[int, float]] | None:
        return self.stamps if payload is self._stamped else None


def _stamp_writes(transport: asyncio.BaseTransport, proto: StampingResponseHandler) -> None:
    """Note the clock as each write to `transport` begins: aiohttp writes a request (its head with its body) from
    a task of its own, which at a burst runs well after the request function started the request. A transport that
    takes no attribute (a C event loop's) is left alone: then nothing is stamped and `sent_time` falls back."""
    write, writelines = transport.write, transport.writelines  # type: ignore[attr-defined]
    clock = proto.clock

    def stamped_write(data: bytes | bytearray | memoryview) -> None:
        proto.written_s = clock()
        write(data)

    def stamped_writelines(chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        proto.written_s = clock()
        writelines(chunks)

    try:
        transport.write = stamped_write  # type: ignore[attr-defined]
        transport.writelines = stamped_writelines  # type: ignore[attr-defined]
    except AttributeError:
        return


def sent_time(resp: aiohttp.ClientResponse, clock: Clock, started_s: float) -> float:
    """When the request `resp` answers went onto the socket: the start of the latest write on its connection, once
    its response has begun (HTTP/1.1 sends one request at a time on a connection, so that write is this request's).
    `started_s` (the clock when the request function began) when the connection stamps no writes on `clock`, or
    holds a stamp older than it (a response that came before the request's own write, which cannot be this one's)."""
    proto = _protocol_of(resp)
    if not isinstance(proto, StampingResponseHandler) or proto.clock is not clock:
        return started_s
    t = proto.written_s
    return t if t is not None and t >= started_s else started_s


def _protocol_of(resp: aiohttp.ClientResponse) -> object | None:
    # `resp.connection` is already None when the whole body arrived before this call (aiohttp releases the
    # connection at end of payload): the response's own reference to its protocol stays
    proto = getattr(resp, "_protocol", None)
    if proto is None and resp.connection is not None:
        proto = resp.connection.protocol
    return proto


def stamping_session(connector: aiohttp.TCPConnector, clock: Clock, **kwargs: object) -> aiohttp.ClientSession:
    """A session whose connections stamp socket reads with `clock`, when this aiohttp version allows it."""
    factory = getattr(connector, "_factory", None)
    if isinstance(factory, functools.partial) and factory.func is ResponseHandler:
        connector._factory = functools.partial(  # type: ignore[attr-defined]
            StampingResponseHandler, *factory.args, clock=clock, **factory.keywords
        )
    return aiohttp.ClientSession(connector=connector, **kwargs)  # type: ignore[arg-type]


def read_stamping_active(session: aiohttp.ClientSession, clock: Clock | None = None) -> bool:
    """Whether `session` stamps socket reads (with `clock`, when given)."""
    factory = getattr(session.connector, "_factory", None)
    if not (isinstance(factory, functools.partial) and factory.func is StampingResponseHandler):
        return False
    return clock is None or factory.keywords.get("clock") is clock


def chunk_time_source(session: aiohttp.ClientSession, clock: Clock) -> str:
    """For the manifest: where streamed chunks' arrival times come from in a run using `session` and `clock` (on the
    running loop): the kernel's receive stamps, the socket read, or the read loop."""
    if not read_stamping_active(session, clock):
        return "read_loop"
    try:
        kernel = receive_stamps_of(asyncio.get_running_loop()) is not None
    except RuntimeError:  # no loop running
        kernel = False
    return "kernel_receive" if kernel else "socket_read"


def send_time_source(session: aiohttp.ClientSession, clock: Clock) -> str:
    """For the manifest: where requests' `sent_s` comes from: the write that put each on its socket, or the request
    function's clock before `session.post` (where the session stamps nothing)."""
    return "socket_write" if read_stamping_active(session, clock) else "before_post"


class ReadTimes:
    """Maps the pieces a response's body is read back in to the socket reads that delivered them."""

    def __init__(self, stamps: collections.deque[tuple[int, float]] | None):
        self._stamps = stamps  # (body bytes received so far, time of that socket read), oldest first
        self._pos = 0  # body bytes handed out so far

    @classmethod
    def of(cls, resp: aiohttp.ClientResponse, clock: Clock) -> ReadTimes:
        """The stamps of `resp`'s connection, if it stamps reads on the same clock the caller uses."""
        # the identity check in stamps_for refuses stamps if the connection has since carried another response
        proto = _protocol_of(resp)
        ok = isinstance(proto, StampingResponseHandler) and proto.clock is clock
        return cls(proto.stamps_for(resp.content) if ok else None)  # type: ignore[union-attr]

    @property
    def active(self) -> bool:
        return self._stamps is not None

    def split(self, piece: bytes, now: float) -> list[tuple[bytes, float]]:
        """`piece` (the next bytes read from the body at `now`) as (part, arrival time) in order. Bytes no stamp
        covers (none recorded, or fed outside a socket read) get `now`."""
        start, end = self._pos, self._pos + len(piece)
        self._pos = end
        stamps = self._stamps
        if not stamps:
            return [(piece, now)]
        parts: list[tuple[bytes, float]] = []
        at = start
        while stamps and at < end:
            total, t = stamps[0]
            if total <= at:  # bytes already handed out
                stamps.popleft()
                continue
            cut = min(total, end)
            parts.append((piece[at - start : cut - start], t))
            at = cut
            if total <= end:
                stamps.popleft()
        if at < end:
            parts.append((piece[at - start :], now))
        return parts
