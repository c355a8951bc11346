"""One async request function per endpoint kind, all behind `RequestFunc`: send one request, record raw events.

Kinds: `/v1/completions` and `/v1/chat/completions`, each streamed (SSE) or not. Every function returns a
`RequestRecord` and never raises for server or network trouble: failures become `ErrorInfo` with a category,
so a run always satisfies sent == ok + error. Times come from an injected clock (`time.perf_counter` by
default) at the socket: a request is sent when the write that puts it on its connection begins, a chunk arrives
with the socket read that delivered it (`socket_times`). Streamed bytes go through `stream.StreamState`, the clock-free
state machine that says which chunks count and how tokens are counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from aiohttp.http_exceptions import ContentEncodingError
from yarl import URL

from speculab.harness.client.body import (
    MAX_BODY_BYTES,
    MAX_ERROR_BODY_BYTES,
    NOT_A_STREAM,
    BodyTooLarge,
    read_body,
)
from speculab.harness.client.endpoint import Clock, EndpointConfig, RequestSampling, TokenCounter, build_payload
from speculab.harness.client.response import build_record, finish_error
from speculab.harness.client.socket_times import ReadTimes, sent_time, stamping_session
from speculab.harness.client.stream import StreamState
from speculab.harness.records import (
    ErrorCategory,
    ErrorInfo,
    RequestRecord,
    RequestSpec,
)
from speculab.protocol.chunks import Delta, MalformedChunk, error_from_body, one_line, parse_body


class RequestFunc(Protocol):
    """Send one request and return what was observed. Never raises for server or network failures."""

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord: ...


def _timeout(ep: EndpointConfig) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=ep.timeout_s)


def _transport_error(e: BaseException, *, got_response: bool, timeout_s: float) -> ErrorInfo:
    if isinstance(e, asyncio.CancelledError):
        return ErrorInfo(ErrorCategory.CANCELLED, "cancelled: the run was interrupted")
    if isinstance(e, asyncio.TimeoutError):
        return ErrorInfo(ErrorCategory.TIMEOUT, f"no complete response within {timeout_s:g} s")
    if isinstance(e, aiohttp.ClientConnectorError):
        return ErrorInfo(ErrorCategory.CONNECT, f"cannot connect: {e}")
    if isinstance(e, aiohttp.ClientResponseError) and not got_response:
        return ErrorInfo(ErrorCategory.MALFORMED, one_line(f"invalid HTTP response: {e.message}"), e.status or None)
    if isinstance(e, aiohttp.ClientPayloadError) and isinstance(e.__cause__, ContentEncodingError):
        # the body is not what its Content-Encoding says (a proxy's gzip header on plain bytes): not a lost connection
        return ErrorInfo(ErrorCategory.MALFORMED, one_line(f"invalid HTTP response: {e.__cause__.message}"))
    return ErrorInfo(ErrorCategory.DROPPED, one_line(f"connection lost: {type(e).__name__}: {e}".rstrip(": ")))


async def _http_error(resp: aiohttp.ClientResponse) -> ErrorInfo:
    body = await read_body(resp, MAX_ERROR_BODY_BYTES, truncate=True)
    err = error_from_body(body)
    msg = err.message if err else one_line(body[:300].decode("utf-8", errors="replace")) or resp.reason or ""
    return ErrorInfo(ErrorCategory.HTTP, f"HTTP {resp.status}: {msg}", resp.status)


async def _not_a_stream(resp: aiohttp.ClientResponse) -> ErrorInfo:
    """A 200 answer to a stream request that is a document: the server ignored stream=true, answered with a JSON
    error and status 200, or a proxy sent its own page."""
    body = await read_body(resp, MAX_ERROR_BODY_BYTES, truncate=True)
    e = error_from_body(body) if resp.content_type == "application/json" else None
    if e is not None:
        return ErrorInfo(ErrorCategory.ERROR_EVENT, e.message)
    start = one_line(body[:120].decode("utf-8", errors="replace"))
    return ErrorInfo(ErrorCategory.MALFORMED, f"expected an SSE stream, got {resp.content_type}: {start!r}")


@dataclass(frozen=True, slots=True)
class _Request:
    """What both request functions hold, and the request they send."""

    endpoint: EndpointConfig
    sampling: RequestSampling
    clock: Clock = time.perf_counter
    count_tokens: TokenCounter | None = None

    def _body(self, spec: RequestSpec) -> bytes:
        # serialized before the clock starts: encoding the body is the harness's work, not the endpoint's latency
        return json.dumps(build_payload(self.endpoint, self.sampling, spec)).encode()


@dataclass(frozen=True, slots=True)
class StreamingRequest(_Request):
    """`RequestFunc` for streamed completions or chat completions."""

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        ep = self.endpoint
        body = self._body(spec)
        headers = ep.headers()
        st = StreamState(
            ep.api, logprobs_requested=ep.logprobs is not None, count_tokens=self.count_tokens, read=ep.read
        )
        clock = self.clock
        err: ErrorInfo | None = None
        got_response = False
        end_s: float | None = None
        sent_s = clock()  # until the response says which write sent it (a request that got none keeps this)
        try:
            async with session.post(ep.url, data=body, headers=headers, timeout=_timeout(ep)) as resp:
                got_response = True
                sent_s = sent_time(resp, clock, sent_s)
                if resp.status != 200:
                    err = await _http_error(resp)
                elif resp.content_type == "application/json" or resp.content_type in NOT_A_STREAM:
                    err = await _not_a_stream(resp)
                else:
                    reads = ReadTimes.of(resp, clock)  # each chunk's time: the socket read that delivered it
                    async for piece in resp.content.iter_any():
                        if any(st.feed(part, t) for part, t in reads.split(piece, clock())):
                            break
                    else:
                        st.eof()
                    end_s = clock()
                    if st.done:
                        # read the terminating bytes so the connection can be reused; never wait long for them
                        with contextlib.suppress(Exception):
                            await asyncio.wait_for(resp.content.read(), 0.05)
        except (asyncio.CancelledError, asyncio.TimeoutError, aiohttp.ClientError) as e:
            if not (st.done and end_s is not None):  # a failure after [DONE] does not spoil the response
                err = _transport_error(e, got_response=got_response, timeout_s=ep.timeout_s)
        return st.record(
            spec=spec, scheduled_s=scheduled_s, sent_s=sent_s, end_s=end_s or clock(), warmup=warmup, error=err
        )


@dataclass(frozen=True, slots=True)
class UnaryRequest(_Request):
    """`RequestFunc` for non-streamed completions or chat completions: one body, no chunks."""

    async def __call__(
        self, session: aiohttp.ClientSession, spec: RequestSpec, *, scheduled_s: float, warmup: bool = False
    ) -> RequestRecord:
        ep = self.endpoint
        body = self._body(spec)
        headers = ep.headers()
        err: ErrorInfo | None = None
        delta = Delta()
        got_response = False
        sent_s = self.clock()
        try:
            async with session.post(ep.url, data=body, headers=headers, timeout=_timeout(ep)) as resp:
                got_response = True
                sent_s = sent_time(resp, self.clock, sent_s)
                if resp.status != 200:
                    err = await _http_error(resp)
                else:
                    try:
                        delta = parse_body(await read_body(resp, MAX_BODY_BYTES), ep.api)
                    except (MalformedChunk, BodyTooLarge) as e:
                        err = ErrorInfo(ErrorCategory.MALFORMED, f"malformed response body: {e}")
                    if delta.error is not None:
                        err = ErrorInfo(ErrorCategory.ERROR_EVENT, delta.error.message or "error object in body")
                    err = err or finish_error(delta.finish_reason)
        except (asyncio.CancelledError, asyncio.TimeoutError, aiohttp.ClientError) as e:
            err = _transport_error(e, got_response=got_response, timeout_s=ep.timeout_s)
        end_s = self.clock()
        return build_record(
            spec,
            delta,
            scheduled_s=scheduled_s,
            sent_s=sent_s,
            end_s=end_s,
            warmup=warmup,
            stream=False,
            error=err,
            logprobs=delta.logprobs if ep.logprobs is not None else None,
            read=ep.read,
        )


def request_func(
    endpoint: EndpointConfig,
    sampling: RequestSampling,
    *,
    clock: Clock = time.perf_counter,
    count_tokens: TokenCounter | None = None,
) -> RequestFunc:
    """The request function for this endpoint kind (api x stream)."""
    cls = StreamingRequest if endpoint.stream else UnaryRequest
    return cls(endpoint, sampling, clock, count_tokens)


def make_session(*, limit: int = 0, clock: Clock = time.perf_counter) -> aiohttp.ClientSession:
    """One session per run. No connection cap by default (aiohttp's default of 100 would silently throttle
    high concurrency); no session-wide timeout (each request has its own). Its connections stamp every socket
    read with `clock` (see read_stamps): streamed requests using the same clock time chunks by those stamps."""
    return stamping_session(
        aiohttp.TCPConnector(limit=limit, force_close=False),
        clock,
        timeout=aiohttp.ClientTimeout(total=None),
        # keep-alive connections are reused; responses are read incrementally by us
        auto_decompress=True,
    )


async def open_connections(session: aiohttp.ClientSession, url: str, n: int, *, timeout_s: float = 30.0) -> int:
    """Have `session` hold at least `n` open connections to `url`'s server, idle in its pool, before a load's clock
    starts: a burst of n requests then takes one each instead of setting n up at once, which on a small machine
    delays the burst's sends by tens of ms (bench/README.md, "burst_ttft"), and every request's TTFT with them.
    Connections already idle count; nothing is sent on them. Returns how many are open; a server that refuses some
    is not an error here (the requests will say so)."""
    if n < 1:
        return 0
    connector = session.connector
    if connector is None:
        return 0
    req = aiohttp.ClientRequest("GET", URL(url), loop=asyncio.get_running_loop())
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    got = await asyncio.gather(*(connector.connect(req, [], timeout) for _ in range(n)), return_exceptions=True)
    opened = [c for c in got if isinstance(c, aiohttp.connector.Connection)]
    for c in opened:
        c.release()  # back to the pool, kept alive
    return len(opened)
