"""The HTTP/1.1 connection under `speculab serve`: uvicorn's h11 protocol, with OpenAI JSON for the requests that
never reach the app, and an answer the client can actually read.

uvicorn answers any request h11 cannot parse with a plain-text 400 and closes the socket at once. h11 knows
better for an over-long request head (its error carries `error_status_hint` 431), and closing at once loses the
answer: the client is typically still sending its (megabyte) header, the unread bytes make the kernel reset the
connection, and the client sees ECONNRESET instead of a status. So here the status is h11's hint, the body is
OpenAI JSON, and after answering the connection *lingers*: it half-closes (FIN after the response), reads and
drops whatever the client still sends, and closes for good when the client does or after LINGER_S.

The request-head limit (`--max-header-bytes`) is h11's `max_incomplete_event_size`: h11 refuses a head that
grows past it before it is complete. A head that arrives complete in one read is measured by the guard instead
(guard.py), so the limit holds either way.

The request itself has a deadline (`--request-receive-timeout`): request line, headers and body must arrive within
it, or the connection gets a 408 and is closed (counted in speculab:request_receive_timeouts_total, not logged).
uvicorn's keep-alive timeout cannot do this (every byte received resets it) and no ASGI middleware can (it runs
once the head is parsed). The deadline arms when the connection opens and, on a kept-alive connection, when the
first byte of the next request arrives (the idle time between requests is uvicorn's keep-alive timeout, 5 s); it
is disarmed as soon as the request is complete, so a long streamed answer is never cut. When descriptors run out,
the connections that have waited longest for their request are closed before their deadline (ReceivingConnections).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol
from uvicorn.server import ServerState

from speculab.engine.server.errors import error_bytes
from speculab.engine.server.guard import DEFAULT_MAX_HEADER_BYTES
from speculab.serving.exhaustion import (
    DEFAULT_REQUEST_RECEIVE_TIMEOUT_S,
    AcceptLoop,
    ConnectionCounters,
    ReceiveDeadline,
    ReceivingConnections,
)

LINGER_S = 2.0
_RECEIVING = (h11.IDLE, h11.SEND_BODY)  # the client's h11 states while its request is still arriving


class ServerConfig(uvicorn.Config):
    """uvicorn's settings plus the request deadline, and what the connection layer keeps across connections."""

    def __init__(self, app: Any, *, request_receive_timeout_s: float, counters: ConnectionCounters, **kw: Any):
        self.request_receive_timeout_s = request_receive_timeout_s
        self.counters = counters
        self.receiving = ReceivingConnections()
        super().__init__(app, **kw)

    def get_loop_factory(self) -> Any:  # uvicorn >= 0.36 asks; older ones run asyncio's own loop
        if self.loop in ("auto", "asyncio") and hasattr(asyncio, "SelectorEventLoop"):
            return lambda: AcceptLoop(self.counters, on_exhausted=self.receiving.shed)
        return super().get_loop_factory()  # type: ignore[misc]


class _Connection(h11.Connection):
    """h11's connection, remembering its last protocol error (the status hint is 431 for a head that is too long)."""

    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as e:
            self.last_error = e
            raise


class GuardedH11Protocol(H11Protocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.max_head_bytes = config.h11_max_incomplete_event_size or DEFAULT_MAX_HEADER_BYTES
        self.conn = _Connection(h11.SERVER, self.max_head_bytes)
        self._lingering = False
        self.counters: ConnectionCounters = getattr(config, "counters", None) or ConnectionCounters()
        receiving = getattr(config, "receiving", None)  # shared by the server's connections (ServerConfig)
        timeout_s: float = getattr(config, "request_receive_timeout_s", DEFAULT_REQUEST_RECEIVE_TIMEOUT_S)
        self.deadline = ReceiveDeadline(
            self,
            self.loop,
            timeout_s,
            ReceivingConnections() if receiving is None else receiving,  # empty is falsy
        )

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.deadline.arm()  # a connection that never sends a byte is held no longer than one that sends slowly

    def connection_lost(self, exc: Exception | None) -> None:
        self.deadline.disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the request was refused: drop the rest of it, so that the client gets to read the answer
        if not self.deadline.armed and self.conn.their_state is h11.IDLE:
            self.deadline.arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state not in _RECEIVING:
            self.deadline.disarm()  # the request is complete (or the connection is done with)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.deadline.armed and self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            # a pipelined request, its head read while the last answer went out, its body not all here yet: its
            # head cancelled uvicorn's keep-alive timer, so the deadline must bound it (from now)
            self.deadline.arm()

    def close_receiving(self, *, shed: bool = False) -> None:
        """The deadline passed (or, `shed`, descriptors ran out): answer 408 if nothing was answered yet, and close,
        freeing the descriptor that a slow client holds."""
        if self.transport.is_closing() or self.conn.their_state not in _RECEIVING:
            self.deadline.disarm()
            return
        message = self.deadline.expire(self.counters, shed=shed)
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # nothing of this request answered yet
            body = error_bytes(408, message, code="request_timeout")
            head = f"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            self.transport.write(head.encode() + b"connection: close\r\n\r\n" + body)
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app's receive() now says http.disconnect; its answer goes nowhere
        self.transport.close()

    def handle_events(self) -> None:
        try:
            super().handle_events()
        except Exception:  # a request uvicorn cannot represent (a non-ASCII target): answer 400, do not drop it
            self.logger.warning("Invalid HTTP request received.", exc_info=True)
            self.send_400_response("invalid HTTP request")

    def send_400_response(self, msg: str) -> None:
        err = self.conn.last_error
        # h11's hints are 400, 431 and 501 (a Transfer-Encoding other than chunked): that last one is the client's
        # doing too, and this server answers client mistakes with 4xx, so it is a 400 here.
        status = 431 if err is not None and err.error_status_hint == 431 else 400
        if status == 431:
            message = f"request line and headers exceed {self.max_head_bytes} bytes (--max-header-bytes)"
            body = error_bytes(431, message, code="request_header_fields_too_large")
        else:
            reason = str(err or msg)
            reason = reason if len(reason) <= 200 else reason[:200] + "..."  # it may quote the whole request line
            body = error_bytes(status, f"invalid HTTP request: {reason}")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            for event in (
                h11.Response(status_code=status, headers=headers, reason=STATUS_PHRASES[status]),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # a response had already started: nothing sensible left to send
            self.transport.close()
            return
        self._linger()

    def _linger(self) -> None:
        self._lingering = True
        self.deadline.disarm()  # the linger has its own, shorter bound
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)


def uvicorn_config(
    app: Any,
    *,
    host: str,
    port: int,
    max_header_bytes: int,
    request_receive_timeout_s: float = DEFAULT_REQUEST_RECEIVE_TIMEOUT_S,
    counters: ConnectionCounters | None = None,
    **kw: Any,
) -> ServerConfig:
    """uvicorn settings for the engine server (h11 with the guarded protocol); `kw` passes other options on.

    `request_receive_timeout_s` 0 turns the request deadline off; `counters` receives what the connection layer
    refuses (export them with exhaustion.ConnectionCollector)."""
    kw.setdefault("log_level", "warning")
    kw.setdefault("lifespan", "on")
    return ServerConfig(
        app,
        request_receive_timeout_s=request_receive_timeout_s,
        counters=counters or ConnectionCounters(),
        host=host,
        port=port,
        http=GuardedH11Protocol,
        h11_max_incomplete_event_size=max_header_bytes,
        **kw,
    )
