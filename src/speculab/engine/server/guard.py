"""What every request passes before any route sees it: the request-head limit (431), the API key (401) and the
body-size limit (413).

A plain ASGI middleware (not Starlette's BaseHTTPMiddleware, which wraps streaming responses), so a refusal
costs nothing: the key and the Content-Length header are checked before a byte of the body is read, and a body
sent without a length (chunked) is read only up to the limit. A refused body is never parsed; the rest of it is
drained and discarded by the HTTP layer, so the client reads the 413 instead of a connection reset.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from speculab.engine.server.errors import error_bytes

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_HEADER_BYTES = 16 * 1024  # h11's and uvicorn's own default


@dataclass(frozen=True, slots=True)
class GuardConfig:
    api_key: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    metrics_public: bool = True  # /metrics answers without the key (the harness's scraper sends none)

    def needs_key(self, path: str) -> bool:
        """Under an API key: the OpenAI routes, the schema (it lists them) and, unless public, /metrics."""
        if self.api_key is None:
            return False
        if path.startswith("/v1/") or path in ("/openapi.json", "/docs", "/redoc"):
            return True
        return path == "/metrics" and not self.metrics_public


class _TooLarge(Exception):
    pass


def head_bytes(scope: Scope) -> int:
    """The size of the request line and headers as sent (HTTP/1.1 framing), from the ASGI scope."""
    query = scope.get("query_string", b"")
    line = len(scope["method"]) + len(scope.get("raw_path") or scope["path"].encode()) + len(query) + 12
    return line + sum(len(k) + len(v) + 4 for k, v in scope["headers"]) + 2


class RequestGuard:
    def __init__(self, app: ASGIApp, cfg: GuardConfig, count_error: Callable[[int], None]):
        self.app, self.cfg, self.count_error = app, cfg, count_error
        self._expected = f"Bearer {cfg.api_key}".encode() if cfg.api_key is not None else b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if head_bytes(scope) > self.cfg.max_header_bytes:  # it arrived whole; connection.py refuses it otherwise
            msg = f"request line and headers exceed {self.cfg.max_header_bytes} bytes (--max-header-bytes)"
            await self._refuse(send, 431, msg, code="request_header_fields_too_large")
            return
        headers = dict(scope["headers"])  # lower-cased names; a repeated header keeps its last value
        if self.cfg.needs_key(scope["path"]) and not hmac.compare_digest(
            headers.get(b"authorization", b""), self._expected
        ):
            msg = "invalid or missing API key; send 'Authorization: Bearer <key>'"
            await self._refuse(send, 401, msg, code="invalid_api_key")
            return
        limit = self.cfg.max_request_bytes
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await self._refuse(send, 413, f"request body of {int(length)} bytes {self._over}", code="request_too_large")
            return
        try:
            body = await _read_body(receive, limit)
        except _TooLarge:
            await self._refuse(send, 413, f"request body {self._over}", code="request_too_large")
            return
        await self.app(scope, _replay(body, receive), send)

    @property
    def _over(self) -> str:
        return f"exceeds the limit of {self.cfg.max_request_bytes} bytes (--max-request-bytes)"

    async def _refuse(self, send: Send, status: int, message: str, *, code: str) -> None:
        self.count_error(status)
        body = error_bytes(status, message, code=code)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive, limit: int) -> list[Message]:
    """The request's body messages (ending with the last part, or a disconnect); _TooLarge past `limit` bytes."""
    messages: list[Message] = []
    size = 0
    while True:
        msg = await receive()
        messages.append(msg)
        if msg["type"] != "http.request":  # the client left: hand the disconnect on
            return messages
        size += len(msg.get("body", b""))
        if size > limit:
            raise _TooLarge
        if not msg.get("more_body", False):
            return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive() that returns the buffered body first, then whatever the connection says next (a disconnect)."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
