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

LINGER_S = 2.0


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

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the request was refused: drop the rest of it, so that the client gets to read the answer
        super().data_received(data)

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
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)


def uvicorn_config(app: Any, *, host: str, port: int, max_header_bytes: int, **kw: Any) -> uvicorn.Config:
    """uvicorn settings for the engine server (h11 with the guarded protocol); `kw` passes other options on."""
    kw.setdefault("log_level", "warning")
    kw.setdefault("lifespan", "on")
    return uvicorn.Config(
        app, host=host, port=port, http=GuardedH11Protocol, h11_max_incomplete_event_size=max_header_bytes, **kw
    )
