"""What keeps a server up when clients exhaust it: the open-files limit, accept failures, slow requests, log volume.

Shared by `speculab serve` (uvicorn, engine/server/connection.py) and `speculab mock-server` (aiohttp,
mock/connection.py): one implementation of each bound, whatever parses the HTTP.

A client can hold descriptors (slow connections), and every descriptor past the process's limit makes `accept`
fail with EMFILE. asyncio's selector loop then logs a traceback per attempt and keeps trying up to `backlog`
times in the same tick, each scheduling its own retry: hundreds of megabytes of log a minute. Here:
- `raise_open_files_limit` lifts the soft RLIMIT_NOFILE to the hard limit at start;
- `AcceptLoop` stops at the first failed accept, counts it, logs one line per ACCEPT_LOG_INTERVAL_S with the
  count (no traceback), has the oldest incomplete requests closed (`on_exhausted`, connection.py) and accepts
  again every ACCEPT_RETRY_S, serving the connections it has meanwhile;
- `ReceiveDeadline` closes a connection whose request has not all arrived within the deadline, and
  `ReceivingConnections` the oldest of those early when descriptors run out (the server's protocol says what
  "arrived" means and answers the 408: `close_receiving`);
- `LogRateLimit` bounds every other message a client can provoke: per kind of message and in all.
The counters are exported on /metrics by `ConnectionCollector`. Nothing here knows about HTTP.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import selectors
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

ACCEPT_RETRY_S = 0.1  # asyncio's own retry is 1 s; a descriptor freed by a closed connection is reused sooner
ACCEPT_LOG_INTERVAL_S = 10.0
_MAX_KINDS = 256  # kinds of log message remembered per interval; records of further kinds are dropped
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
DEFAULT_REQUEST_RECEIVE_TIMEOUT_S = 30.0
SHED_AT_ONCE = 256  # receiving connections closed per failed accept (at most one per ACCEPT_RETRY_S)


@dataclass(slots=True)
class ConnectionCounters:
    """What the connection layer refused or dropped, for /metrics (one instance per server)."""

    receive_timeouts: int = 0  # connections closed because their request did not arrive in time
    connections_shed: int = 0  # connections closed early, their request incomplete, because accept() failed
    accept_failures: int = 0  # accept() calls that failed for lack of descriptors or memory
    log_lines_suppressed: int = 0  # log records dropped by LogRateLimit


class ConnectionCollector(Collector):
    """The counters as Prometheus counters named `PREFIX + name`: `speculab:` on the reference engine; the mock server,
    which may pose as vLLM or another engine, gives its own prefix, since a `speculab:` name on /metrics is what tells
    speculab's engine apart (harness.servers.adapters.detect_engine)."""

    def __init__(self, counters: ConnectionCounters, model_name: str, prefix: str = "speculab:"):
        self.counters, self.model_name, self.prefix = counters, model_name, prefix

    def collect(self) -> Iterator[Metric]:
        c = self.counters
        for name, doc, value in (
            ("request_receive_timeouts", "Connections closed: request not received in time.", c.receive_timeouts),
            ("connections_shed", "Incomplete requests closed early: out of descriptors.", c.connections_shed),
            ("accept_failures", "Failed accept() calls (out of file descriptors or memory).", c.accept_failures),
            ("log_lines_suppressed", "Log records dropped by the rate limit.", c.log_lines_suppressed),
        ):
            m = CounterMetricFamily(self.prefix + name, doc, labels=["model_name"])
            m.add_metric([self.model_name], value)
            yield m


class Receiving(Protocol):
    """A connection whose request may still be arriving (the server's HTTP protocol)."""

    def close_receiving(self, *, shed: bool = False) -> None:
        """The deadline passed (or, `shed`, descriptors ran out): answer 408 if nothing was answered yet, close."""


class ReceivingConnections:
    """The connections whose request is still arriving, oldest first: when descriptors run out, the oldest of them
    are closed early, so that the connections waiting in the kernel's accept queue (a normal client's among them)
    get a descriptor instead of waiting for the deadline. A connection whose request is complete is never shed."""

    def __init__(self) -> None:
        self._conns: dict[Receiving, None] = {}  # insertion-ordered: oldest first

    def add(self, conn: Receiving) -> None:
        self._conns[conn] = None

    def discard(self, conn: Receiving) -> None:
        self._conns.pop(conn, None)

    def __len__(self) -> int:
        return len(self._conns)

    def shed(self) -> None:
        for conn in list(itertools.islice(self._conns, SHED_AT_ONCE)):
            conn.close_receiving(shed=True)


class ReceiveDeadline:
    """One connection's deadline for receiving its request: `arm` when a request starts arriving, `disarm` once it
    is complete (a long streamed answer is never cut); when it passes, the connection's `close_receiving` runs.
    `timeout_s` 0: no deadline (the connection is still listed, so it can be shed)."""

    def __init__(
        self,
        conn: Receiving,
        loop: asyncio.AbstractEventLoop,
        timeout_s: float,
        receiving: ReceivingConnections,
    ):
        self.conn, self.loop, self.timeout_s, self.receiving = conn, loop, timeout_s, receiving
        self._timer: asyncio.TimerHandle | None = None
        self.armed = False

    def arm(self) -> None:
        self.disarm()
        self.armed = True
        self.receiving.add(self.conn)
        if self.timeout_s > 0:
            self._timer = self.loop.call_later(self.timeout_s, self.conn.close_receiving)

    def disarm(self) -> None:
        self.armed = False
        self.receiving.discard(self.conn)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def expire(self, counters: ConnectionCounters, *, shed: bool) -> str:
        """Disarm, count the connection as closed (timed out, or shed), and return the 408's message."""
        self.disarm()
        if shed:
            counters.connections_shed += 1
            return "request not complete when the server ran out of connections; send it faster"
        counters.receive_timeouts += 1
        return f"request not received within {self.timeout_s:g} s (--request-receive-timeout)"


def raise_open_files_limit() -> int | None:
    """Lift the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force (None: no such limit)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)  # Linux refuses an infinite NOFILE
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return None if soft == resource.RLIM_INFINITY else soft


class AcceptLoop(asyncio.SelectorEventLoop):
    """asyncio's selector loop, whose accept survives running out of descriptors (see the module docstring)."""

    def __init__(
        self,
        counters: ConnectionCounters,
        on_exhausted: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        selector: selectors.BaseSelector | None = None,  # asyncio's own default when None
    ):
        super().__init__(selector)
        self.counters, self.on_exhausted, self._clock = counters, on_exhausted, clock
        self._unreported, self._reported_at = 0, -float("inf")

    # The body is asyncio's (3.10-3.13) with one change: on EMFILE & co it stops, instead of trying `backlog` more
    # times in this tick, each failure logging a traceback and scheduling one more retry.
    def _accept_connection(  # type: ignore[override]
        self,
        protocol_factory: Any,
        sock: Any,
        sslcontext: Any = None,
        server: Any = None,
        backlog: int = 100,
        *rest: Any,
    ) -> None:
        for _ in range(backlog):
            try:
                conn, addr = sock.accept()
                conn.setblocking(False)
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                self._accept_failed(exc)
                self.on_exhausted()  # free descriptors for the connections waiting to be accepted
                self._remove_reader(sock.fileno())  # type: ignore[attr-defined]
                args = (protocol_factory, sock, sslcontext, server, backlog, *rest)
                self.call_later(ACCEPT_RETRY_S, self._start_serving, *args)  # type: ignore[attr-defined]
                return
            else:
                accept = self._accept_connection2(  # type: ignore[attr-defined]
                    protocol_factory, conn, {"peername": addr}, sslcontext, server, *rest
                )
                self.create_task(accept)

    def _accept_failed(self, exc: OSError) -> None:
        self.counters.accept_failures += 1
        self._unreported += 1
        now = self._clock()
        if now - self._reported_at >= ACCEPT_LOG_INTERVAL_S:
            log.error(
                "accept() failed (%s) %d time(s) since the last report; closing the oldest incomplete requests, "
                "serving the rest, retrying every %.1f s; at most one such line per %.0f s "
                "(speculab:accept_failures_total)",
                exc.strerror or exc,
                self._unreported,
                ACCEPT_RETRY_S,
                ACCEPT_LOG_INTERVAL_S,
            )
            self._unreported, self._reported_at = 0, now


class LogRateLimit(logging.Filter):
    """At most `per_kind` records of one kind and `total` in all per `interval_s`; the rest are counted, and the
    next record let through (of any kind) says how many were dropped. A kind is (logger, level, first line of the
    message template, at most 80 characters); at most _MAX_KINDS are remembered, so client input cannot grow this."""

    def __init__(
        self,
        counters: ConnectionCounters,
        *,
        per_kind: int = 5,
        total: int = 60,
        interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__()
        self.counters, self.per_kind, self.total, self.interval_s, self._clock = (
            counters,
            per_kind,
            total,
            interval_s,
            clock,
        )
        self._window_start = -float("inf")
        self._seen: dict[tuple[str, int, str], int] = {}
        self._passed, self._dropped = 0, 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = self._clock()
        if now - self._window_start >= self.interval_s:
            self._window_start, self._seen, self._passed = now, {}, 0
        key = (record.name, record.levelno, str(record.msg).split("\n", 1)[0][:80])
        if key not in self._seen and len(self._seen) >= _MAX_KINDS:  # the bookkeeping is bounded too
            n = self.per_kind + 1
        else:
            n = self._seen[key] = self._seen.get(key, 0) + 1
        if n > self.per_kind or self._passed >= self.total:
            self._dropped += 1
            self.counters.log_lines_suppressed += 1
            return False
        self._passed += 1
        if self._dropped:
            record.msg = f"{record.msg} [{self._dropped} log records suppressed by the rate limit since the last one]"
            self._dropped = 0
        return True


# Loggers a client can make write: the HTTP servers', asyncio's (exception handler) and speculab's own.
_BOUNDED_LOGGERS = (
    *("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "asyncio"),
    *("aiohttp.server", "aiohttp.access", "aiohttp.web", "aiohttp.internal"),  # the mock's
)


def bound_logs(counters: ConnectionCounters) -> LogRateLimit:
    """Install one LogRateLimit on every logger a client can make write (once per process; returns it)."""
    ours = (n for n in list(logging.Logger.manager.loggerDict) if n.startswith("speculab.") and n != __name__)
    names = [*_BOUNDED_LOGGERS, *ours]  # this module's one line per interval is bounded already
    loggers = [logging.getLogger(n) for n in names]
    for lg in loggers:
        for f in lg.filters:
            if isinstance(f, LogRateLimit):  # a second server in this process (tests): count for the newest
                f.counters = counters
                return f
    limit = LogRateLimit(counters)
    for lg in loggers:
        lg.addFilter(limit)
    return limit
