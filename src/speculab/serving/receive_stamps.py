"""When bytes reached this host: the kernel's receive stamp, read by the event loop's selector as it polls.

An asyncio loop handles the sockets one poll found ready one after another. At a burst (hundreds of requests arriving
at a server at once, or hundreds of streams' first chunks at a client) the k-th socket's `data_received` runs after
the k-1 before it were parsed, and after whatever the loop was busy with when the bytes came in: a time taken there is
late by the loop's own queue, tens of ms on a small machine (bench/README.md, "burst_ttft"). Linux stamps every
received packet (`SO_TIMESTAMPNS`, CLOCK_REALTIME) and hands the stamp to `recvmsg`. `ReceiveStamps`, the loop's
selector, peeks (MSG_PEEK: the bytes stay for the transport's own read) each watched socket it finds readable and
keeps the stamp of the latest packet pending with how many bytes were pending, so that the `data_received` of the same
loop turn can ask when the bytes it got were all there. Not every byte: the latest packet's time, never earlier than
any byte's arrival. The transport reads later in the turn than the poll, after the sockets before it were handled:
bytes that came in between are in its read too, and the stamp is not theirs (a reply's head stamped 50 ms before the
chunk that followed it, when the loop was that late). So a stamp covers the bytes the poll found, and what a read
holds beyond them is the caller's to time (`covered`: its own clock, once they are in hand).

Used by the mock's truth log (mock.truth_log: when a request reached the server) and by the client
(client.socket_times: when a chunk reached the client). Where there is no stamp (not Linux, a C event loop, a socket
not watched) callers keep their own clock: `arrival_ns`/`age_s` say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Linux's SO_TIMESTAMPNS (Python's socket module names it on some builds only); SCM_TIMESTAMPNS is the same number
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("qq")
_PEEK_BYTES = 256 * 1024  # asyncio's selector transports read at most this much at once
_PEEK_FLAGS = socket.MSG_PEEK | getattr(socket, "MSG_DONTWAIT", 0)


class ReceiveStamps(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The event loop's selector, reading the kernel's receive stamp of each watched socket it finds readable (see
    the module docstring). A stamp lives for the loop turn of its poll only: a `data_received` that reads nothing
    new, or in a later turn, never gets an old one."""

    def __init__(self, clock_ns: Callable[[], int] = time.time_ns):
        super().__init__()
        self.clock_ns = clock_ns
        self.ready_ns = clock_ns()  # when the latest poll returned
        # fd -> (the kernel's stamp of its latest pending packet, the bytes pending then not yet read), this turn
        self.arrived: dict[int, tuple[int, int]] = {}
        # a second socket object on each watched descriptor, to peek with; detached (never closed) when unwatched
        self._peekers: dict[int, socket.socket] = {}
        self._buf = memoryview(bytearray(_PEEK_BYTES))
        self._cmsg = socket.CMSG_SPACE(_TIMESPEC.size) if sys.platform == "linux" else 0
        # Linux turns receive stamping on for the whole host a little after the first socket asks: asked now, it is
        # on before the first connection's bytes arrive (held until close)
        # reads asked about, those a kernel stamp covered whole, and those it covered in part (bench/README.md)
        self.asked = self.stamped = self.split = 0
        self._keep_on = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with contextlib.suppress(OSError):
            self._keep_on.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def watch(self, sock: Any) -> bool:
        """Stamp `sock`'s arrivals (a TCP socket, or asyncio's TransportSocket of one); False where this system
        cannot."""
        if not self._cmsg or sock is None or sock.type != socket.SOCK_STREAM:
            return False
        fd = sock.fileno()
        peeker = socket.socket(sock.family, sock.type, sock.proto, fd)
        try:
            peeker.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            peeker.detach()
            return False
        old = self._peekers.pop(fd, None)
        if old is not None:  # a descriptor number reused before its connection said it was lost
            old.detach()
        self._peekers[fd] = peeker
        return True

    def unwatch(self, fd: int) -> None:
        peeker = self._peekers.pop(fd, None)
        if peeker is not None:
            peeker.detach()  # the descriptor is the transport's: never closed here
        self.arrived.pop(fd, None)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(timeout)
        self.ready_ns = self.clock_ns()
        self.arrived = {}
        for key, events in ready:
            if events & selectors.EVENT_READ:
                peeker = self._peekers.get(key.fd)
                if peeker is not None and (found := self._peek(peeker)) is not None:
                    self.arrived[key.fd] = found
        return ready

    def _peek(self, peeker: socket.socket) -> tuple[int, int] | None:
        try:
            n, anc, _, _ = peeker.recvmsg_into([self._buf], self._cmsg, _PEEK_FLAGS)
        except OSError:
            return None
        t = stamp_of(anc) if n > 0 else None
        return None if t is None else (t, n)

    def covered(self, fd: int, nbytes: int) -> tuple[int, int | None]:
        """Of the `nbytes` `fd`'s transport has just read, how many (from the first) the kernel's stamp of this loop
        turn covers, and the stamp (CLOCK_REALTIME ns): those bytes were all there by then. The rest came after the
        poll: (0, None) without a stamp. A read of nothing (aiohttp's re-parse) is covered by a stamp there is."""
        found = self.arrived.get(fd)
        self.asked += 1
        if found is None:
            return 0, None
        t, pending = found
        n = min(nbytes, pending)
        self.arrived[fd] = (t, pending - n)  # a second read this turn is not covered by bytes the first took
        self.stamped += n == nbytes
        self.split += 0 < n < nbytes
        return (n, t) if n > 0 or nbytes == 0 else (0, None)

    def arrival_ns(self, fd: int, nbytes: int) -> int | None:
        """When the `nbytes` `fd`'s transport has just read had all arrived (CLOCK_REALTIME ns); None: no stamp, or
        some of them came after the poll (then their time is the caller's own clock)."""
        n, t = self.covered(fd, nbytes)
        return t if n == nbytes else None

    @staticmethod
    def age_s(t_ns: int, now_ns: int) -> float:
        """How long before `now_ns` (this selector's clock, read by the caller), in seconds, the stamp `t_ns` was."""
        return max(0.0, (now_ns - t_ns) / 1e9)

    def close(self) -> None:
        for fd in list(self._peekers):
            self.unwatch(fd)
        self._keep_on.close()
        super().close()


def stamp_of(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The SCM_TIMESTAMPNS stamp (ns) in what `recvmsg` returned beside the bytes; None when there is none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return sec * 1_000_000_000 + nsec
    return None


def receive_stamps_of(loop: asyncio.AbstractEventLoop) -> ReceiveStamps | None:
    """The running loop's `ReceiveStamps`, when it was made by `stamping_loop` (or given one as `receive_stamps`)."""
    stamps = getattr(loop, "receive_stamps", None)
    return stamps if isinstance(stamps, ReceiveStamps) else None


def stamping_loop() -> asyncio.AbstractEventLoop:
    """A selector event loop polling with `ReceiveStamps` (found again by `receive_stamps_of`)."""
    stamps = ReceiveStamps()
    loop = asyncio.SelectorEventLoop(stamps)
    loop.receive_stamps = stamps  # type: ignore[attr-defined]
    return loop


def run_stamping(main: Awaitable[T]) -> T:
    """`asyncio.run(main)` on a `stamping_loop` (Python 3.11+; 3.10 has no loop factory: asyncio's own loop)."""
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=stamping_loop) as runner:
            return runner.run(main)  # type: ignore[arg-type]
    return asyncio.run(main)  # type: ignore[arg-type]  # pragma: no cover
