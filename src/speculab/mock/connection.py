"""The mock server's connections under abusive clients: the bounds `speculab serve` has (serving/exhaustion.py),
on aiohttp.

aiohttp, like uvicorn, holds a connection whose request never finishes for as long as bytes trickle in (its
keep-alive timer only runs between requests). Here each connection gets the same deadline for receiving its request
(`--request-receive-timeout`, 30 s): armed when the connection opens and when the first byte of a next request
arrives, disarmed once the request's head and body are all in, so a long streamed answer is never cut. A connection
past it gets a 408 (when no head of the request had arrived yet; otherwise the handler waits for a body and is
simply cut off) and is closed, counted in speculab_mock:request_receive_timeouts_total. When descriptors run out, the
CLI's accept loop (AcceptLoop) closes the oldest of these early (speculab_mock:connections_shed_total).

aiohttp has no setting for its connection class: `GuardedRunner` wraps the runner's `web.Server`, whose only job
here is to be the protocol factory, so that it makes `DeadlineHandler`s with the server's own arguments.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from speculab.protocol.openai import error_body
from speculab.serving.exhaustion import ConnectionCounters, ReceiveDeadline, ReceivingConnections
from speculab.serving.receive_stamps import ReceiveStamps


@dataclass(slots=True)
class ConnectionGuard:
    """What the connection layer of one mock server shares across its connections."""

    timeout_s: float  # 0: no deadline
    counters: ConnectionCounters = field(default_factory=ConnectionCounters)
    # the truth log's `received_ns` (mock.truth_log): the kernel's receive stamps, where the loop polls with them
    # (the CLI's, with a truth log); None: the time `data_received` is called
    receive_stamps: ReceiveStamps | None = None
    receiving: ReceivingConnections = field(default_factory=ReceivingConnections)


class DeadlineHandler(RequestHandler):
    """aiohttp's connection, with a deadline for receiving each request (see the module docstring)."""

    def __init__(self, manager: Any, *, guard: ConnectionGuard, loop: asyncio.AbstractEventLoop, **kw: Any):
        super().__init__(manager, loop=loop, **kw)
        self.guard = guard
        self.deadline = ReceiveDeadline(self, loop, guard.timeout_s, guard.receiving)
        self._heads_before = 0  # request heads parsed on this connection when the deadline was armed
        self._payload: Any = None  # the newest request's body stream (aiohttp's StreamReader)
        # the truth log's `received_ns` (mock.truth_log): the socket read that completed the request `received_body`
        self.received_ns: int | None = None
        self.received_by = ""
        self.received_body: Any = None
        self._fd = -1  # the socket's descriptor (the receive stamps' key)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None else -1
        if self.guard.receive_stamps is not None and sock is not None:
            self.guard.receive_stamps.watch(sock)
        self._arm()  # a connection that never sends a byte is held no longer than one that sends slowly

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.guard.receive_stamps is not None:
            self.guard.receive_stamps.unwatch(self._fd)  # the descriptor's number goes to the next connection
        self.deadline.disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        stamps = self.guard.receive_stamps  # before this connection's own parsing
        # None where bytes of this read came after the poll: then the request was whole only by now
        kernel_ns = stamps.arrival_ns(self._fd, len(data)) if stamps is not None else None
        t_ns, by = (time.time_ns(), "data_received") if kernel_ns is None else (kernel_ns, "kernel")
        if data and not self.deadline.armed:  # aiohttp calls this with b"" to re-parse what it buffered
            self._arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        if self._request_count > self._heads_before and self._messages:
            self._payload = self._messages[-1][1]  # the newest request's body; aiohttp's task has not taken it yet
        if self._request_count > self._heads_before and (self._payload is None or self._payload.is_eof()):
            self.deadline.disarm()  # head and body are in
            if self._payload is not None and self._payload is not self.received_body:
                self.received_ns, self.received_by, self.received_body = t_ns, by, self._payload

    def _arm(self) -> None:
        self._heads_before, self._payload = self._request_count, None
        self.deadline.arm()

    def close_receiving(self, *, shed: bool = False) -> None:
        """The deadline passed (or, `shed`, descriptors ran out): answer 408 if no head arrived yet, and close."""
        transport = self.transport
        if transport is None or transport.is_closing():
            self.deadline.disarm()
            return
        message = self.deadline.expire(self.guard.counters, shed=shed)
        if self._request_count == self._heads_before:  # nothing of this request parsed, so nothing answered
            body = json.dumps(error_body(message, type="invalid_request_error", code="request_timeout")).encode()
            head = f"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            transport.write(head.encode() + b"connection: close\r\n\r\n" + body)
        transport.close()


class _GuardedServer:
    """The runner's `web.Server`, making `DeadlineHandler`s; everything else (shutdown, connections) is its own."""

    def __init__(self, server: web.Server, guard: ConnectionGuard):
        self._server, self._guard = server, guard

    def __call__(self) -> DeadlineHandler:
        # the arguments web.Server.__call__ gives its handlers (aiohttp keeps them private)
        loop, kwargs = self._server._loop, self._server._kwargs  # type: ignore[attr-defined]
        return DeadlineHandler(self._server, guard=self._guard, loop=loop, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class GuardedRunner(web.AppRunner):
    """`web.AppRunner` whose connections have the receive deadline of `guard`."""

    def __init__(self, app: web.Application, guard: ConnectionGuard, **kw: Any):
        super().__init__(app, **kw)
        self.guard = guard

    async def _make_server(self) -> Any:
        return _GuardedServer(await super()._make_server(), self.guard)


def received_ns(request: web.BaseRequest) -> tuple[int, str] | None:
    """When the bytes that completed `request` (head and body) arrived, CLOCK_REALTIME ns, and whose time it is
    (mock.truth_log); None when the connection is not a `DeadlineHandler`'s or a later request on it was read
    since (pipelining)."""
    proto = request.protocol
    if isinstance(proto, DeadlineHandler) and proto.received_body is request.content and proto.received_ns:
        return proto.received_ns, proto.received_by
    return None
