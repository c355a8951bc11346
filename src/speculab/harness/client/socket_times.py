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
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable

import aiohttp
from aiohttp.client_proto import ResponseHandler

Clock = Callable[[], float]


class StampingResponseHandler(ResponseHandler):
    """aiohttp's response protocol, plus the time of every socket read that fed the current response body."""

    def __init__(self, *args: object, clock: Clock, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.clock = clock
        self._stamped: object | None = None  # the body reader the stamps below belong to
        self.stamps: collections.deque[tuple[int, float]] = collections.deque()

    def data_received(self, data: bytes) -> None:
        t = self.clock()
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
    """For the manifest: where streamed chunks' arrival times come from in a run using `session` and `clock`."""
    return "socket_read" if read_stamping_active(session, clock) else "read_loop"


class ReadTimes:
    """Maps the pieces a response's body is read back in to the socket reads that delivered them."""

    def __init__(self, stamps: collections.deque[tuple[int, float]] | None):
        self._stamps = stamps  # (body bytes received so far, time of that socket read), oldest first
        self._pos = 0  # body bytes handed out so far

    @classmethod
    def of(cls, resp: aiohttp.ClientResponse, clock: Clock) -> ReadTimes:
        """The stamps of `resp`'s connection, if it stamps reads on the same clock the caller uses."""
        # `resp.connection` is already None when the whole body arrived before this call (aiohttp releases the
        # connection at end of payload): the response's own reference to its protocol stays. The identity check
        # in stamps_for still refuses stamps if the connection has since carried another response.
        proto = getattr(resp, "_protocol", None)
        if proto is None and resp.connection is not None:
            proto = resp.connection.protocol
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
